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
				sparse.keys(keys, 0, g, step%2 == 1)
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

// TestUpdaterKeysRuns: a push whose keys hold long runs (stepped as dense
// ranges) and scattered keys, repeats among them, leaves every weight and
// state bit for bit where optim.StepKeys key by key leaves them, under
// every rule but LARS (per tensor: LARSKeys).
func TestUpdaterKeysRuns(t *testing.T) {
	const n, off = 5000, 100
	var keys []int64
	for k := int64(off); k < off+n; k++ {
		switch {
		case k < off+700: // a run of 700
		case k < off+2000 && k%3 == 0: // scattered
		case k >= off+3000 && k < off+3000+runMin: // a run of runMin
		case k >= off+3100 && k < off+3100+runMin-1: // one key short of it
		case k > off+4000: // a run to the end
		default:
			continue
		}
		keys = append(keys, k)
	}
	keys = append(keys, off+5, off+6, off+4500) // repeats, after their runs
	for _, opt := range optim.Kinds {
		if opt.PerTensor() {
			continue
		}
		cfg := Config{Optimizer: opt, LR: 0.05, Momentum: 0.8, WeightDecay: 0.01, Eps: 1e-8, Beta1: 0.9, Beta2: 0.999}.withDefaults()
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(i%17)/8 - 1
		}
		ref := append([]float32(nil), w...)
		u := newUpdater(cfg, w)
		var refState []float32
		if per := opt.StatePer(); per > 0 {
			refState = make([]float32, per*n)
		}
		for step := 1; step <= 3; step++ {
			g := make([]float32, len(keys))
			for i := range g {
				g[i] = float32((i*7+step*3)%11)/4 - 1.2
			}
			u.cfg.Step = step
			rc := u.cfg
			u.keys(keys, off, g, true)
			optim.StepKeys(rc, ref, refState, keys, off, g, nil)
		}
		for i := range w {
			if math.Float32bits(w[i]) != math.Float32bits(ref[i]) {
				t.Fatalf("%v: w[%d] = %v, StepKeys key by key %v", opt, i, w[i], ref[i])
			}
		}
		for i := range refState {
			if math.Float32bits(u.state[i]) != math.Float32bits(refState[i]) {
				t.Fatalf("%v: state[%d] = %v, StepKeys key by key %v", opt, i, u.state[i], refState[i])
			}
		}
	}
}
