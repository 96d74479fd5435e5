package engine

import (
	"math"
	"testing"
)

// TestLRPlan: the rate at chosen points of each schedule, with and
// without warm-up and the linear scaling rule.
func TestLRPlan(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Epochs, cfg.Opt.LR = 10, 0.1
	for _, tc := range []struct {
		sched  string
		warmup float64
		scale  bool
		ranks  int
		at     []float64 // fractional epochs
		want   []float64
	}{
		{"", 0, false, 4, []float64{0, 5, 9.9}, []float64{0.1, 0.1, 0.1}},
		{"step:3,6:0.1", 0, false, 2, []float64{0, 2.99, 3, 5.5, 6, 9}, []float64{0.1, 0.1, 0.01, 0.01, 0.001, 0.001}},
		{"cosine", 0, false, 2, []float64{0, 5, 10}, []float64{0.1, 0.05, 0}},
		{"cosine", 2, false, 2, []float64{0, 1, 2, 6}, []float64{0, 0.05, 0.1, 0.05}},
		{"", 5, true, 4, []float64{0, 2.5, 5, 8}, []float64{0.1, 0.25, 0.4, 0.4}}, // Goyal: from η to kη
		{"", 0, true, 3, []float64{0, 7}, []float64{0.3, 0.3}},
	} {
		c := cfg
		c.LRSchedule, c.WarmupEpochs, c.LRScaleRanks = tc.sched, tc.warmup, tc.scale
		if err := c.Validate(); err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		p := NewLRPlan(c, tc.ranks)
		for i, e := range tc.at {
			if got := float64(p.At(e)); math.Abs(got-tc.want[i]) > 1e-6 {
				t.Errorf("%q warm-up %v scale %v on %d ranks: rate at epoch %v = %v, want %v", tc.sched, tc.warmup, tc.scale, tc.ranks, e, got, tc.want[i])
			}
		}
		if got := p.constant(); got != (tc.sched == "" && tc.warmup == 0 && !tc.scale) {
			t.Errorf("%+v: constant %v", tc, got)
		}
	}
}
