package trainer

import (
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/allreduce"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// TestLocalSGD:
//   - on one rank local SGD is plain SGD, bit for bit (averaging one model
//     is the model);
//   - averaging after every step is synchronous training, up to rounding
//     (each rank's batch mean, then the mean of the models; equal batches);
//   - with --local-steps 3 on 3 ranks every rank ends with the same model,
//     the epoch averages ⌈steps/3⌉ times, sends a third of the bytes per
//     step of synchronous training, and learns about as well.
func TestLocalSGD(t *testing.T) {
	for _, kind := range []optim.Kind{optim.SGD, optim.Momentum} {
		cfg := synthCfg()
		cfg.Epochs, cfg.Opt.Kind = 4, kind
		cfg.Data.Samples = 192 // whole batches on both ranks: the mean of the means is the mean
		one := cfg
		sync := mustRun(t, 1, one)
		one.LocalSteps = 3
		local := mustRun(t, 1, one)
		if !slices.Equal(local[0].Params, sync[0].Params) {
			t.Fatalf("%v: one rank: local SGD's weights differ by %.3g from SGD's", kind, numtest.MaxRelDiff(local[0].Params, sync[0].Params))
		}

		sync = mustRun(t, 2, cfg)
		allreduce.LocalSGDTest = true
		every := mustRun(t, 2, cfg)
		allreduce.LocalSGDTest = false
		if d := numtest.MaxRelDiff(every[0].Params, sync[0].Params); d > 1e-4 {
			t.Fatalf("%v: averaging every step differs by %.3g from synchronous training", kind, d)
		}
	}

	cfg := synthCfg()
	cfg.Epochs = 4
	sync := mustRun(t, 3, cfg)
	cfg.LocalSteps = 3
	res := mustRun(t, 3, cfg)
	for r := 1; r < 3; r++ {
		if !slices.Equal(res[r].Params, res[0].Params) {
			t.Fatalf("rank %d's final model differs from rank 0's", r)
		}
	}
	for i, e := range res[0].Epochs {
		if want := (e.Steps + 2) / 3; e.GossipStats == nil || e.Averagings != want {
			t.Fatalf("epoch %d: %+v averagings, want %d", i+1, e.GossipStats, want)
		}
		s := sync[0].Epochs[i]
		if e.BytesPerStep == nil || s.BytesPerStep == nil {
			t.Fatalf("epoch %d: no bytes per step", i+1)
		}
		if ratio := *e.BytesPerStep / *s.BytesPerStep; ratio > 0.4 || ratio < 0.3 {
			t.Errorf("epoch %d: %.0f bytes per step, synchronous %.0f", i+1, *e.BytesPerStep, *s.BytesPerStep)
		}
	}
	if res[0].TestAcc < sync[0].TestAcc-0.1 {
		t.Errorf("test accuracy %.4f, synchronous %.4f", res[0].TestAcc, sync[0].TestAcc)
	}
}
