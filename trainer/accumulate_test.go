package trainer

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/config"
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

// TestAccumulateEveryStrategy: under the parameter server (bsp on two
// workers, ssp and asp on one, whose order is then fixed; sparse pulls and
// pushes of an embedding's rows, whose keys are every micro-batch's) and
// D-PSGD, --accumulate 3 at batch 5 trains the weights of batch 15 within
// float32 rounding, pushing or averaging once a step; without it they
// differ. AD-PSGD's pairings follow timing: there it trains, its steps
// --max-steps' exactly.
func TestAccumulateEveryStrategy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks int
		set   func(*Config)
	}{
		{"ps-bsp", 3, func(c *Config) { c.Sync, c.PS.Servers = SyncPS, 1 }},
		{"ps-ssp", 2, func(c *Config) { c.Sync, c.PS.Servers, c.PS.Consistency, c.PS.Staleness = SyncPS, 1, ps.SSP, 2 }},
		{"ps-asp", 2, func(c *Config) { c.Sync, c.PS.Servers, c.PS.Consistency = SyncPS, 1, ps.ASP }},
		{"dpsgd", 2, func(c *Config) { c.Sync = SyncDPSGD }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acc := synthCfg()
			tc.set(&acc)
			acc.Batch, acc.Accumulate = 5, 3
			big := acc
			big.Batch, big.Accumulate = 15, 0
			got, want := mustRun(t, tc.ranks, acc), mustRun(t, tc.ranks, big)
			last := tc.ranks - 1 // a worker
			if d := numtest.MaxRelDiff(got[last].Params, want[last].Params); d > 2e-5 {
				t.Errorf("weights differ from batch 15 by %.3g", d)
			}
			if g, w := got[last].Epochs[0].Loss, want[last].Epochs[0].Loss; abs(g-w) > 1e-5 {
				t.Errorf("epoch loss %v, batch 15's %v", g, w)
			}
			if g, w := got[last].Epochs[0].Steps, want[last].Epochs[0].Steps; g != w {
				t.Errorf("%d steps in the first epoch, batch 15's %d", g, w)
			}
			small := acc
			small.Accumulate = 0
			if d := numtest.MaxRelDiff(mustRun(t, tc.ranks, small)[last].Params, got[last].Params); d < 1e-4 {
				t.Errorf("batch 5 without accumulation trained the same weights (%.3g)", d)
			}
		})
	}
	t.Run("ps-sparse-rows", func(t *testing.T) {
		acc := sparseTableCfg(t, ps.BSP)
		acc.Opt.Kind, acc.Opt.LR, acc.Opt.WeightDecay = optim.SGD, 0.05, 0
		acc.Batch, acc.Accumulate, acc.Epochs = 4, 3, 1
		acc.PS.SparseRows = config.SparseOn
		big := acc
		big.Batch, big.Accumulate = 12, 0
		ranks := acc.PS.Servers + 2
		got, want := mustRun(t, ranks, acc), mustRun(t, ranks, big)
		if d := numtest.MaxRelDiff(got[ranks-1].Params, want[ranks-1].Params); d > 2e-5 {
			t.Errorf("weights differ from batch 12 by %.3g", d)
		}
	})
	t.Run("adpsgd", func(t *testing.T) {
		// Its pairings and its steps per epoch follow timing: the
		// exact --max-steps total, and training that moves the loss.
		acc := synthCfg()
		acc.Sync, acc.Batch, acc.Accumulate, acc.Epochs, acc.MaxSteps = SyncADPSGD, 5, 3, 3, 17
		res := mustRun(t, 2, acc)
		for r, rr := range res {
			if rr.Steps != 17 {
				t.Errorf("rank %d: %d steps, want --max-steps' 17", r, rr.Steps)
			}
			if l := rr.Epochs[len(rr.Epochs)-1].Loss; !(l < rr.Epochs[0].Loss*1.5) {
				t.Errorf("rank %d: the loss went from %v to %v", r, rr.Epochs[0].Loss, l)
			}
		}
	})
}

// TestAccumulateRefused: not with local SGD (each rank steps its own
// model: a larger --batch), nor sparse-logreg's workers; not below 1.
func TestAccumulateRefused(t *testing.T) {
	for _, set := range []func(*Config){
		func(c *Config) { c.LocalSteps = 4 },
		func(c *Config) { c.Accumulate = -1 },
		func(c *Config) {
			c.Model, c.Data.Name, c.Sync, c.PS.Servers = SparseLogreg, "synthetic-sparse", SyncPS, 1
		},
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
// statistics are every rank's too. Strategies whose ranks do not step
// together (ps under ssp, asp and dssp; adpsgd; local SGD) refuse it.
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
		func(c *Config) { c.Sync, c.PS.Servers, c.PS.Consistency = SyncPS, 1, ps.SSP },
		func(c *Config) { c.Sync, c.PS.Servers, c.PS.Consistency = SyncPS, 1, ps.ASP },
		func(c *Config) { c.Sync, c.PS.Servers, c.PS.Consistency = SyncPS, 1, ps.DSSP },
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

// TestSyncBNOtherStrategies: under the parameter server with bsp, SyncBN
// over 2 workers × batch 6 trains the weights of 1 worker × 12 (and its
// running statistics), where without it they differ; under D-PSGD every
// rank normalises with the statistics of every rank's batch, so that on 2
// ranks, each its own model, the batch norms' running statistics are the
// same on both and differ from a run without SyncBN.
func TestSyncBNOtherStrategies(t *testing.T) {
	cfg := bnCfg()
	cfg.Sync, cfg.PS.Servers, cfg.SyncBN, cfg.Batch = SyncPS, 1, true, 6
	got := mustRun(t, 3, cfg)[2]
	one := cfg
	one.Batch = 12
	ref := mustRun(t, 2, one)[1]
	if d := numtest.MaxRelDiff(got.Params, ref.Params); d > 2e-5 {
		t.Errorf("ps bsp: weights differ from 1 worker × batch 12 by %.3g", d)
	}
	if d := numtest.MaxRelDiff(got.ModelState, ref.ModelState); d > 2e-5 {
		t.Errorf("ps bsp: running statistics differ from 1 worker × batch 12 by %.3g", d)
	}
	plain := cfg
	plain.SyncBN = false
	if d := numtest.MaxRelDiff(mustRun(t, 3, plain)[2].Params, ref.Params); d < 1e-4 {
		t.Errorf("ps bsp without SyncBN: the weights are 1 worker's too (%.3g): the check proves nothing", d)
	}

	// D-PSGD's first step from the same weights: each rank steps by its
	// own batch's gradient after averaging (the same weights), so the
	// consensus is the step of the mean gradient: 1 rank × batch 12's,
	// where each batch norm saw all 12 rows.
	dp := bnCfg()
	dp.Sync, dp.SyncBN, dp.Batch, dp.MaxSteps = SyncDPSGD, true, 6, 1
	big := dp
	big.Sync, big.Batch = SyncAllreduce, 12
	want := mustRun(t, 1, big)[0]
	res := mustRun(t, 2, dp)
	if d := numtest.MaxRelDiff(res[0].Params, want.Params); d > 2e-5 {
		t.Errorf("dpsgd: the consensus after one step differs from 1 rank × batch 12 by %.3g", d)
	}
	plain = dp
	plain.SyncBN = false
	if d := numtest.MaxRelDiff(mustRun(t, 2, plain)[0].Params, want.Params); d < 1e-5 {
		t.Errorf("dpsgd without SyncBN: the same step (%.3g): the check proves nothing", d)
	}
	if d := numtest.MaxRelDiff(want.Params, want.Arch.InitParams(dp.Seed)); d < 1e-4 {
		t.Errorf("one step barely moved the weights (%.3g)", d)
	}
}

// TestSyncBNAccumulateUneven: under SyncBN every micro-batch sums its
// statistics over the ranks, so on an epoch's last step, where one rank
// has a micro-batch more than another (7 rows against 6 at micro-batches
// of 6), the other runs an empty one: allreduce, ps with bsp and dpsgd
// finish (they had failed on a length mismatch or waited for the
// server's timeout), every rank with the same weights where the strategy
// keeps one model; the empty micro-batches move no running statistic.
func TestSyncBNAccumulateUneven(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks int
		set   func(*Config)
	}{
		{"allreduce", 2, func(c *Config) {}},
		{"ps-bsp", 3, func(c *Config) { c.Sync, c.PS.Servers = SyncPS, 1 }},
		{"dpsgd", 2, func(c *Config) { c.Sync = SyncDPSGD }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := bnCfg()
			cfg.Data.Samples, cfg.Batch, cfg.Accumulate, cfg.SyncBN, cfg.Epochs = 205, 6, 2, true, 1
			cfg.Timeout = 20 * time.Second
			tc.set(&cfg)
			res := mustRun(t, tc.ranks, cfg)
			if tc.name == "allreduce" && numtest.MaxRelDiff(res[0].Params, res[1].Params) != 0 {
				t.Error("the ranks' weights differ")
			}
		})
	}
	// The empty micro-batches leave the running statistics as they are:
	// on one rank, where SyncBN's statistics are the rank's own, they
	// are those without SyncBN (num_batches_tracked exactly), on a last
	// step of 5 micro-batches padded to 8.
	cfg := bnCfg()
	cfg.Data.Samples, cfg.Batch, cfg.Accumulate, cfg.Epochs = 205, 6, 8, 1
	plain := mustRun(t, 1, cfg)[0]
	cfg.SyncBN = true
	synced := mustRun(t, 1, cfg)[0]
	if d := numtest.MaxRelDiff(synced.ModelState, plain.ModelState); d > 1e-4 {
		t.Errorf("one rank: the running statistics with SyncBN differ from those without by %.3g", d)
	}
}
