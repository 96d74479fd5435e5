package ps

import (
	"math"
	"testing"
)

// TestUpdateRulesByHand checks one step of each rule against numbers worked
// out by hand (as torch.optim computes them).
func TestUpdateRulesByHand(t *testing.T) {
	// SGD: w=1, g=0.5, wd=0.1: g'=0.6; w = 1 - 0.1*0.6 = 0.94.
	w := []float32{1}
	SGDStep(w, []float32{0.5}, 0.1, 0.1)
	assertClose(t, "sgd", w, []float32{0.94}, 0, 1e-6)

	// Momentum mu=0.9, two steps of g=1, lr=0.1, wd=0:
	// v1 = 1, w1 = 1 - 0.1 = 0.9; v2 = 0.9*1 + 1 = 1.9, w2 = 0.9 - 0.19 = 0.71.
	w, v := []float32{1}, []float32{0}
	MomentumStep(w, v, []float32{1}, 0.1, 0.9, 0)
	MomentumStep(w, v, []float32{1}, 0.1, 0.9, 0)
	assertClose(t, "momentum w", w, []float32{0.71}, 0, 1e-6)
	assertClose(t, "momentum v", v, []float32{1.9}, 0, 1e-6)

	// Adagrad lr=1, eps=0: g=3: h=9, w = 1 - 3/3 = 0; g=4: h=25, w = 0 - 4/5 = -0.8.
	w, h := []float32{1}, []float32{0}
	AdagradStep(w, h, []float32{3}, 1, 0, 0)
	AdagradStep(w, h, []float32{4}, 1, 0, 0)
	assertClose(t, "adagrad w", w, []float32{-0.8}, 0, 1e-6)
	assertClose(t, "adagrad h", h, []float32{25}, 0, 1e-6)
}

// TestUpdaterMatchesNaiveLoops runs the server's updater (dense and per key)
// against naive loops over the PyTorch formulas in float64.
func TestUpdaterMatchesNaiveLoops(t *testing.T) {
	for _, opt := range []Optimizer{SGD, Momentum, Adagrad} {
		t.Run(opt.String(), func(t *testing.T) {
			cfg := Config{Optimizer: opt, LR: 0.05, Momentum: 0.8, WeightDecay: 0.01, Eps: 1e-8}.withDefaults()
			n := 9
			wd := make([]float32, n) // dense updater's weights
			for i := range wd {
				wd[i] = float32(i) - 4
			}
			ws := append([]float32(nil), wd...) // per-key updater's weights
			ref := make([]float64, n)
			for i := range ref {
				ref[i] = float64(wd[i])
			}
			state := make([]float64, n)
			dense, sparse := newUpdater(cfg, wd), newUpdater(cfg, ws)
			for step := 0; step < 5; step++ {
				g := make([]float32, n)
				for i := range g {
					g[i] = float32((i*7+step*3)%5) - 2 + 0.25*float32(step)
				}
				dense.dense(0, g)
				for i := range g {
					sparse.at(i, g[i])
					gp := float64(g[i]) + float64(cfg.WeightDecay)*ref[i]
					switch opt {
					case SGD:
						ref[i] -= float64(cfg.LR) * gp
					case Momentum:
						state[i] = float64(cfg.Momentum)*state[i] + gp
						ref[i] -= float64(cfg.LR) * state[i]
					case Adagrad:
						state[i] += gp * gp
						ref[i] -= float64(cfg.LR) * gp / (math.Sqrt(state[i]) + float64(cfg.Eps))
					}
				}
			}
			want := make([]float32, n)
			for i := range want {
				want[i] = float32(ref[i])
			}
			assertClose(t, "dense", wd, want, 1e-6, 1e-5)
			assertClose(t, "per key", ws, wd, 0, 0) // same float32 operations
		})
	}
}
