package trainer

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/blas"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/kernelstest"
)

// TestConvChoiceAllRanks: under --kernels auto rank 0 measures the
// convolutions and says its choice once; every rank takes part in
// passing it on, whatever its own backend (a rank without the library
// does not leave the others waiting), and the ranks end with one set of
// weights.
func TestConvChoiceAllRanks(t *testing.T) {
	auto, err := blas.Open(kernels.Options{})
	if err != nil || !kernels.OnTrial(auto) {
		if os.Getenv("CI") == "" {
			t.Skipf("no OpenBLAS with oneDNN here (%v)", err)
		}
		t.Fatalf("blas with oneDNN under auto: %v, on trial %v", err, err == nil && kernels.OnTrial(auto))
	}
	auto.Close()
	cfg := cnnCfg()
	cfg.Epochs = 1
	var out strings.Builder
	res, errs := runTrainers(t, 3, cfg, Checkpointing{}, func(c *local.Comm, tr *Trainer) {
		if c.Rank() == 0 {
			tr.Out = &out
		}
		if c.Rank() != 1 { // rank 1 keeps the cpu backend: no library
			be, err := blas.Open(kernels.Options{})
			if err != nil {
				t.Error(err)
				return
			}
			tr.Backend = be
		}
	})
	noErrs(t, errs)
	finalParams(t, res)
	if n := strings.Count(out.String(), "convolutions (--kernels auto, measured per shape"); n != 1 {
		t.Errorf("the choice said %d times, want once:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "(conv1: ") || !strings.Contains(out.String(), ", conv2: ") {
		t.Errorf("the choice line lacks the layers' times:\n%s", out.String())
	}
}

// TestProvidersCompared: a rank whose backend loaded other providers than
// rank 0's (a library missing on its node) says so, with its own, and
// rank 0 names it; ranks that agree say nothing.
func TestProvidersCompared(t *testing.T) {
	for _, mixed := range []bool{false, true} {
		w := local.NewWorld(2)
		w.SetTimeout(20 * time.Second)
		var warn [2]bytes.Buffer
		cfg := cnnCfg()
		cfg.MaxSteps = 1
		errs := w.Run(func(c *local.Comm) error {
			be := kernelstest.NewReversedCPU()
			if mixed && c.Rank() == 1 {
				be = cpu.New()
			}
			tr := &Trainer{Comm: c, Backend: be, Warnings: &warn[c.Rank()]}
			_, err := tr.Run(cfg)
			return err
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("mixed %v: rank %d: %v", mixed, r, err)
			}
		}
		w0, w1 := warn[0].String(), warn[1].String()
		if !mixed {
			if strings.Contains(w0+w1, "providers") {
				t.Errorf("the same providers, yet: %q %q", w0, w1)
			}
			continue
		}
		if !strings.Contains(w0, "ranks [1] run other kernel providers than rank 0's") || !strings.Contains(w1, "rank 1 runs other kernel providers than rank 0") || !strings.Contains(w1, "no library") {
			t.Errorf("rank 0 warned %q, rank 1 %q; want rank 1 named and its providers said", w0, w1)
		}
	}
}
