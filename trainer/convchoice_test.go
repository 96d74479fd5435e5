package trainer

import (
	"os"
	"strings"
	"testing"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/blas"
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
