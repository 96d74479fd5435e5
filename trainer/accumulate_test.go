package trainer

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dml-project/dml/trainer/internal/numtest"
)

// TestAccumulate: --accumulate N at batch b trains the weights of batch
// N·b (the same rows per step, one exchange), within float32 rounding, on
// 1 and 2 ranks, an MLP and a CNN with dropout, with the AllReduce after
// the backward pass and overlapped with it, and with epochs whose last
// step is partial (203 samples); the same flags without --accumulate
// differ (the check is not vacuous).
func TestAccumulate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func() Config
	}{{"mlp", synthCfg}, {"dropout-net", dropoutCfg}} {
		for _, ranks := range []int{1, 2} {
			for _, overlap := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/ranks=%d/overlap=%v", tc.name, ranks, overlap), func(t *testing.T) {
					acc := tc.cfg()
					acc.Batch, acc.Accumulate, acc.Overlap = 5, 3, overlap
					big := acc
					big.Batch, big.Accumulate = 15, 0
					got, want := mustRun(t, ranks, acc), mustRun(t, ranks, big)
					for r := range got {
						if d := numtest.MaxRelDiff(got[r].Params, want[r].Params); d > 2e-5 {
							t.Errorf("rank %d: weights differ from batch 15 by %.3g", r, d)
						}
					}
					if abs(got[0].Epochs[0].Loss-want[0].Epochs[0].Loss) > 1e-5 {
						t.Errorf("epoch loss %v, batch 15's %v", got[0].Epochs[0].Loss, want[0].Epochs[0].Loss)
					}
					small := acc
					small.Accumulate = 0
					if d := numtest.MaxRelDiff(mustRun(t, ranks, small)[0].Params, got[0].Params); d < 1e-4 {
						t.Errorf("batch 5 without accumulation trained the same weights (%.3g)", d)
					}
				})
			}
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestAccumulateRefused: --accumulate is allreduce's, without local SGD.
func TestAccumulateRefused(t *testing.T) {
	for _, set := range []func(*Config){
		func(c *Config) { c.Sync, c.PS.Servers = SyncPS, 1 },
		func(c *Config) { c.Sync = SyncDPSGD },
		func(c *Config) { c.LocalSteps = 4 },
		func(c *Config) { c.Accumulate = -1 },
	} {
		cfg := synthCfg()
		cfg.Accumulate = 2
		set(&cfg)
		var ce *ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != "Accumulate" {
			t.Errorf("%+v: %v, want a ConfigError on Accumulate", cfg.Sync, err)
		}
	}
}

// TestSyncBN: with SyncBatchNorm a batch-norm network on N ranks × batch
// b trains the weights of 1 rank × N·b (within float32 rounding), and
// without it (each rank its own statistics) it does not; the running
// statistics are every rank's too. Other strategies refuse it.
func TestSyncBN(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			cfg := bnCfg()
			// --overlap asked for: the buckets wait for the backward
			// pass's own collectives.
			cfg.SyncBN, cfg.Batch, cfg.Overlap = true, 6, n == 2
			got := checkOneRankEquivalent(t, n, cfg)
			one := cfg
			one.Batch = cfg.Batch * n
			ref := mustRun(t, 1, one)[0]
			if d := numtest.MaxRelDiff(got[0].ModelState, ref.ModelState); d > 2e-5 {
				t.Errorf("running statistics differ from 1 rank × batch %d by %.3g", one.Batch, d)
			}
			plain := cfg
			plain.SyncBN = false
			if d := numtest.MaxRelDiff(mustRun(t, n, plain)[0].Params, ref.Params); d < 1e-4 {
				t.Errorf("without SyncBN the weights are 1 rank's too (%.3g): the check proves nothing", d)
			}
		})
	}
	for _, set := range []func(*Config){
		func(c *Config) { c.Sync, c.PS.Servers = SyncPS, 1 },
		func(c *Config) { c.Sync = SyncDPSGD },
		func(c *Config) { c.Sync = SyncADPSGD },
		func(c *Config) { c.LocalSteps = 3 },
	} {
		cfg := bnCfg()
		cfg.SyncBN = true
		set(&cfg)
		var ce *ConfigError
		if err := cfg.Validate(); !errors.As(err, &ce) || ce.Field != "SyncBN" {
			t.Errorf("%v: %v, want a ConfigError on SyncBN", cfg.Sync, err)
		}
	}
}
