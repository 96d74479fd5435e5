package ps

import (
	"math"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
)

// TestUpdaterMatchesNaiveLoops runs the server's updater (dense and per key)
// against naive loops over the PyTorch formulas in float64.
func TestUpdaterMatchesNaiveLoops(t *testing.T) {
	for _, opt := range optim.Kinds {
		t.Run(opt.String(), func(t *testing.T) {
			cfg := Config{Optimizer: opt, LR: 0.05, Momentum: 0.8, WeightDecay: 0.01, Eps: 1e-8, Beta1: 0.9, Beta2: 0.999, TrustCoef: 0.02}.withDefaults()
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
			state := make([]float64, 2*n)
			dense, sparse := newUpdater(cfg, wd), newUpdater(cfg, ws)
			keys := make([]int64, n) // every key, pushed sparse
			for i := range keys {
				keys[i] = int64(i)
			}
			for step := 0; step < 5; step++ {
				g := make([]float32, n)
				for i := range g {
					g[i] = float32((i*7+step*3)%5) - 2 + 0.25*float32(step)
				}
				dense.cfg.Step, sparse.cfg.Step = step+1, step+1
				// LARS: the 9 weights one tensor; its trust ratio from
				// the norms before the step.
				var sw, sg float64
				for i := range g {
					sw += ref[i] * ref[i]
					sg += float64(g[i]) * float64(g[i])
				}
				trust := 0.02 * math.Sqrt(sw) / (math.Sqrt(sg) + 0.01*math.Sqrt(sw))
				dense.dense(0, g)
				sparse.keys(keys, 0, g)
				for i := range g {
					gp := float64(g[i]) + float64(cfg.WeightDecay)*ref[i]
					switch opt {
					case optim.Adam, optim.AdamW:
						lr, wdk := 0.05, 0.01
						if opt == optim.AdamW {
							ref[i] *= 1 - lr*wdk
							gp = float64(g[i])
						}
						m, v := &state[2*i], &state[2*i+1]
						*m = 0.9**m + 0.1*gp
						*v = 0.999**v + 0.001*gp*gp
						t := float64(step + 1)
						ref[i] -= lr * (*m / (1 - math.Pow(0.9, t))) / (math.Sqrt(*v/(1-math.Pow(0.999, t))) + 1e-8)
					case optim.SGD:
						ref[i] -= float64(cfg.LR) * gp
					case optim.Momentum:
						state[i] = float64(cfg.Momentum)*state[i] + gp
						ref[i] -= float64(cfg.LR) * state[i]
					case optim.Adagrad:
						state[i] += gp * gp
						ref[i] -= float64(cfg.LR) * gp / (math.Sqrt(state[i]) + float64(cfg.Eps))
					case optim.LARS:
						state[i] = float64(cfg.Momentum)*state[i] + 0.05*trust*gp
						ref[i] -= state[i]
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
