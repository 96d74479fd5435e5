package trainer

import (
	"errors"
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
)

// TestLossScaling trains at FP16 on 2 ranks from a loss scale so large
// that the first steps' gradients overflow half precision's products: those
// steps are skipped on both ranks alike (the same weights, bit for bit),
// the scale comes down, and the run learns as well as at FP32. At a
// static scale the same overflow ends the run as diverged. With
// --loss-scale and FP32 products no step overflows, and the weights are
// those of unscaled training up to rounding (the scale is a power of
// two: dividing by it is exact, only the products' roundings move).
func TestLossScaling(t *testing.T) {
	fp16 := func(int) kernels.Backend { be := cpu.New(); be.SetPrecision(kernels.FP16); return be }
	cfg := synthCfg()
	cfg.Epochs = 4
	cfg.LossScale = "dynamic:16777216" // 2^24: the loss's gradient alone is ~2^21
	res, errs := runWorldWith(t, 2, cfg, fp16)
	noErrs(t, errs)
	if !slices.Equal(res[0].Params, res[1].Params) {
		t.Fatal("the ranks' weights differ: a skip was not agreed")
	}
	skipped := 0
	for _, e := range res[0].Epochs {
		if e.LossScale == nil {
			t.Fatalf("epoch %d: no loss scale reported", e.Epoch)
		}
		skipped += e.SkippedSteps
	}
	last := res[0].Epochs[len(res[0].Epochs)-1]
	if skipped == 0 || *last.LossScale >= 1<<24 {
		t.Fatalf("%d steps skipped, scale %v at the end: the overflow was not caught", skipped, *last.LossScale)
	}
	plain := synthCfg()
	plain.Epochs = 4
	ref := mustRun(t, 2, plain)
	if got, want := res[0].TestAcc, ref[0].TestAcc; got < want-0.05 {
		t.Errorf("fp16 with loss scaling: test accuracy %.3f, fp32 %.3f", got, want)
	}
	t.Logf("fp16: %d steps skipped, scale 2^24 → %g; test accuracy %.3f (fp32 %.3f)", skipped, *last.LossScale, res[0].TestAcc, ref[0].TestAcc)

	static := cfg
	static.LossScale = "16777216"
	_, errs = runWorldWith(t, 2, static, fp16)
	for r, err := range errs {
		if !errors.Is(err, ErrNonFinite) {
			t.Errorf("rank %d at a static scale that overflows: %v, want ErrNonFinite", r, err)
		}
	}

	scaled := plain
	scaled.LossScale = "1024"
	got := mustRun(t, 2, scaled)
	for i, w := range got[0].Params {
		if d := w - ref[0].Params[i]; d > 1e-4 || d < -1e-4 {
			t.Fatalf("weight %d: %v with a loss scale at FP32, %v without", i, w, ref[0].Params[i])
		}
	}
}
