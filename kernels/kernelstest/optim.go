package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
)

// optimLen is the number of weights each optimizer check updates.
const optimLen = 37

// optimCase is one optimizer setting: step applies one update to the
// backend buffers (w, g, state), ref the same update to float64 copies.
type optimCase struct {
	name string
	step func(be kernels.Backend, w, g, state kernels.Buffer) error
	ref  func(w, g, state []float64)
	per  int // state floats per weight (0: 1)
}

// runOptim starts from random weights and a zero state, applies optimSteps
// updates with fresh random gradients to the backend and to a float64
// reference, and compares weights and state after every step within
// optimAbs or optimRel. Gradients must be left alone.
func runOptim(t *testing.T, be kernels.Backend, seed uint64, c optimCase) {
	t.Helper()
	r := newRand(seed)
	w0 := normals(r, optimLen, 1)
	per := max(c.per, 1)
	wb, sb := loadGuarded(t, be, w0), loadGuarded(t, be, make([]float32, per*optimLen))
	w, state := widen(w0), make([]float64, per*optimLen)
	for step := range optimSteps {
		g := normals(r, optimLen, 1)
		gb := load(t, be, g)
		name := fmt.Sprintf("%s step %d", c.name, step+1)
		ok(t, name, c.step(be, wb.buf, gb, sb.buf))
		c.ref(w, widen(g), state)
		checkAbsOrRel(t, name+": w", wb.read(t, name+": w"), w, optimAbs, optimRel)
		checkAbsOrRel(t, name+": state", sb.read(t, name+": state"), state, optimAbs, optimRel)
		checkExact(t, name+": g after", read(t, be, gb), g)
	}
}

// testSGD checks w -= lr·(g + wd·w), with and without weight decay.
func testSGD(t *testing.T, be kernels.Backend) {
	for _, wd := range []float32{0, 0.05} {
		lr := float32(0.1)
		runOptim(t, be, 16, optimCase{
			name: fmt.Sprintf("lr=%v,wd=%v", lr, wd),
			step: func(be kernels.Backend, w, g, _ kernels.Buffer) error {
				return be.Optimize(w, g, nil, optim.NewUpdate(optim.Config{Kind: optim.SGD, LR: lr, WeightDecay: wd}))
			},
			ref: func(w, g, _ []float64) {
				for i := range w {
					w[i] -= float64(lr) * (g[i] + float64(wd)*w[i])
				}
			},
		})
	}
}

// testMomentum checks v = mu·v + (g + wd·w); w -= lr·v.
func testMomentum(t *testing.T, be kernels.Backend) {
	for _, wd := range []float32{0, 0.05} {
		lr, mu := float32(0.1), float32(0.9)
		runOptim(t, be, 17, optimCase{
			name: fmt.Sprintf("lr=%v,mu=%v,wd=%v", lr, mu, wd),
			step: func(be kernels.Backend, w, g, v kernels.Buffer) error {
				return be.Optimize(w, g, v, optim.NewUpdate(optim.Config{Kind: optim.Momentum, LR: lr, Momentum: mu, WeightDecay: wd}))
			},
			ref: func(w, g, v []float64) {
				for i := range w {
					v[i] = float64(mu)*v[i] + g[i] + float64(wd)*w[i]
					w[i] -= float64(lr) * v[i]
				}
			},
		})
	}
}

// testAdagrad checks g' = g + wd·w; h += g'²; w -= lr·g'/(√h + eps), with an
// eps large enough (0.1) to tell √h + eps from √(h + eps).
func testAdagrad(t *testing.T, be kernels.Backend) {
	for _, eps := range []float32{1e-6, 0.1} {
		for _, wd := range []float32{0, 0.05} {
			lr := float32(0.1)
			runOptim(t, be, 18, optimCase{
				name: fmt.Sprintf("lr=%v,eps=%v,wd=%v", lr, eps, wd),
				step: func(be kernels.Backend, w, g, h kernels.Buffer) error {
					return be.Optimize(w, g, h, optim.NewUpdate(optim.Config{Kind: optim.Adagrad, LR: lr, Eps: eps, WeightDecay: wd}))
				},
				ref: func(w, g, h []float64) {
					for i := range w {
						gi := g[i] + float64(wd)*w[i]
						h[i] += gi * gi
						w[i] -= float64(lr) * gi / (math.Sqrt(h[i]) + float64(eps))
					}
				},
			})
		}
	}
}

// testAdam checks Adam and AdamW (PyTorch's): with g' = g + wd·w (Adam)
// or w ← w·(1 − lr·wd) first (AdamW), m = β1·m + (1−β1)·g',
// v = β2·v + (1−β2)·g'², w -= lr/(1−β1^t) · m/(√v/√(1−β2^t) + eps), the
// step's count t from 1; m and v interleaved in the state.
func testAdam(t *testing.T, be kernels.Backend) {
	for _, k := range []optim.Kind{optim.Adam, optim.AdamW} {
		for _, wd := range []float32{0, 0.05} {
			cfg := optim.Config{Kind: k, LR: 0.01, WeightDecay: wd, Eps: 1e-3, Beta1: 0.9, Beta2: 0.99}
			var n, nr int // the steps taken, by the backend and the reference
			runOptim(t, be, 19, optimCase{
				name: fmt.Sprintf("%v,wd=%v", k, wd),
				per:  2,
				step: func(be kernels.Backend, w, g, s kernels.Buffer) error {
					n++
					c := cfg
					c.Step = n
					return be.Optimize(w, g, s, optim.NewUpdate(c))
				},
				ref: func(w, g, s []float64) {
					nr++
					lr, b1, b2, eps, d := 0.01, 0.9, 0.99, 1e-3, float64(wd)
					for i := range w {
						gi := g[i]
						if k == optim.AdamW {
							w[i] *= 1 - lr*d
						} else {
							gi += d * w[i]
						}
						s[2*i] = b1*s[2*i] + (1-b1)*gi
						s[2*i+1] = b2*s[2*i+1] + (1-b2)*gi*gi
						mh := s[2*i] / (1 - math.Pow(b1, float64(nr)))
						vh := s[2*i+1] / (1 - math.Pow(b2, float64(nr)))
						w[i] -= lr * mh / (math.Sqrt(vh) + eps)
					}
				},
			})
		}
	}
}

// testLARS checks LARS (You et al.'s Algorithm 1, optim.LARS) on one
// tensor: trust = η·‖w‖/(‖g‖ + wd·‖w‖) (1 where ‖w‖ or ‖g‖ is 0),
// g' = g + wd·w, v = mu·v + lr·trust·g', w -= v, against a float64
// reference; then, unlike the other reductions, bit for bit against the
// host rule (optim.LARSUpdate) on tensors longer than optim.NormChunk and
// on zero weights: the norms' order is fixed (optim.SumSquares), so a
// device that keeps it computes the same trust ratio.
func testLARS(t *testing.T, be kernels.Backend) {
	for _, wd := range []float32{0, 0.05} {
		cfg := optim.Config{Kind: optim.LARS, LR: 0.1, Momentum: 0.9, WeightDecay: wd, TrustCoef: 0.02}
		runOptim(t, be, 20, optimCase{
			name: fmt.Sprintf("lars,wd=%v", wd),
			step: func(be kernels.Backend, w, g, v kernels.Buffer) error {
				return be.Optimize(w, g, v, optim.NewUpdate(cfg))
			},
			ref: func(w, g, v []float64) {
				var sw, sg float64
				for i := range w {
					sw += w[i] * w[i]
					sg += g[i] * g[i]
				}
				d := float64(wd)
				trust := 0.02 * math.Sqrt(sw) / (math.Sqrt(sg) + d*math.Sqrt(sw))
				for i := range w {
					v[i] = 0.9*v[i] + 0.1*trust*(g[i]+d*w[i])
					w[i] -= v[i]
				}
			},
		})
	}
	r := newRand(21)
	for _, c := range []struct {
		name string
		n    int
		zero bool
	}{{"1", 1, false}, {"NormChunk+1", optim.NormChunk + 1, false}, {"5000", 5000, false}, {"zero weights", 3000, true}} {
		cfg := optim.Config{Kind: optim.LARS, LR: 0.1, Momentum: 0.9, WeightDecay: 1e-3, TrustCoef: 0.001}
		u := optim.NewUpdate(cfg)
		w := normals(r, c.n, 1)
		if c.zero {
			clear(w)
		}
		v := normals(r, c.n, 0.01)
		wb, vb := load(t, be, w), load(t, be, v)
		for step := range 2 {
			g := normals(r, c.n, 0.1)
			gb := load(t, be, g)
			name := fmt.Sprintf("lars n=%s step %d", c.name, step+1)
			ok(t, name, be.Optimize(wb, gb, vb, u))
			u.Apply(w, g, v)
			checkExact(t, name+": w", read(t, be, wb), w)
			checkExact(t, name+": v", read(t, be, vb), v)
			checkExact(t, name+": g after", read(t, be, gb), g)
		}
	}
}
