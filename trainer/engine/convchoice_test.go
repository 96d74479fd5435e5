package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/trainer/model"
)

// TestDescribeChoice checks the convolutions line: how many the library
// runs, dml's with the instruction set their kernels run on where the
// backend says, and the times that chose.
func TestDescribeChoice(t *testing.T) {
	timings := []model.ConvTiming{
		{Layers: []string{"conv1"}, Own: 340 * time.Microsecond, Lib: 810 * time.Microsecond},
		{Layers: []string{"conv2"}, Own: 2240 * time.Microsecond, Lib: 1220 * time.Microsecond},
	}
	convs := []string{"conv1", "conv2"}
	for _, c := range []struct {
		choice    model.ConvChoice
		isa, want string
	}{
		{model.ConvChoice{false, true}, "k×k on AVX-512", "the library runs 1 of 2; dml's kernels (k×k on AVX-512) run conv1 (conv1: 0.34/0.81, conv2: 2.24/1.22)"},
		{model.ConvChoice{false, false}, "AVX2", "the library runs 0 of 2; dml's kernels (AVX2) run conv1, conv2 ("},
		{model.ConvChoice{false, true}, "", "the library runs 1 of 2; dml's kernels run conv1 ("},
		{model.ConvChoice{true, true}, "AVX2", "the library runs 2 of 2 (conv1"},
	} {
		got := describeChoice(c.choice, convs, timings, c.isa)
		if !strings.Contains(got, c.want) {
			t.Errorf("describeChoice(%v, isa %q) = %q, want it to contain %q", c.choice, c.isa, got, c.want)
		}
	}
}
