package engine

import (
	"testing"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/model"
)

// TestModelBytes: the memory estimate of a tiny model, counted by hand.
func TestModelBytes(t *testing.T) {
	arch, err := model.NewArch(2, []int{3}, 1, model.SigmoidCE) // 13 parameters
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opt    optim.Kind
		device bool
		want   float64
	}{
		{optim.Momentum, false, 4 * (6*13 + 4*(2*3+2*3+2*1+1))}, // 5 copies + state; input twice, outputs and their gradients, eval scratch
		{optim.SGD, false, 4 * (5*13 + 4*15)},
		{optim.Momentum, true, 4 * (3*13 + 4*3)}, // host copies and the staged input only
	} {
		if got := modelBytes(arch, c.opt, 4, c.device); got != c.want {
			t.Errorf("%v, device %v: %v bytes, want %v", c.opt, c.device, got, c.want)
		}
	}
}
