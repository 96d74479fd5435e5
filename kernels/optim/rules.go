package optim

import (
	"fmt"
	"math"
)

// The per-element rules below are the only place the arithmetic is written.
// Each is one expression per stored value, in the operation order that
// kernels/cpu/optim.go and ps/update.go used before this package existed
// (they agreed: g' = g + wd·w first, then the rule), so that training runs
// keep their weights bit for bit. Keep the shapes of these expressions as
// they are: Go may fuse a*b+c into one FMA on some targets, and the same
// expression must fuse the same way wherever it is used.

// sgdAt applies SGD to one weight.
func sgdAt(w *float32, g, lr, wd float32) {
	wi := *w
	*w = wi - lr*(g+wd*wi)
}

// momentumAt applies Momentum to one weight and its velocity.
func momentumAt(w, v *float32, g, lr, mu, wd float32) {
	wi := *w
	vi := mu**v + (g + wd*wi)
	*v = vi
	*w = wi - lr*vi
}

// adagradAt applies Adagrad to one weight and its sum of squares.
func adagradAt(w, h *float32, g, lr, eps, wd float32) {
	wi := *w
	gi := g + wd*wi
	hi := *h + gi*gi
	*h = hi
	*w = wi - lr*gi/(float32(math.Sqrt(float64(hi)))+eps)
}

// SGDUpdate sets w -= lr·(g + wd·w) element-wise. g must be as long as w.
func SGDUpdate(w, g []float32, lr, wd float32) {
	g = g[:len(w)]
	i := sgdVec(w, g, lr, wd) // 8 at a time where the CPU can (rules_amd64.s)
	for ; i < len(w); i++ {
		sgdAt(&w[i], g[i], lr, wd)
	}
}

// MomentumUpdate sets v = mu·v + (g + wd·w); w -= lr·v element-wise. g and
// v must be as long as w.
func MomentumUpdate(w, g, v []float32, lr, mu, wd float32) {
	g, v = g[:len(w)], v[:len(w)]
	i := momentumVec(w, g, v, lr, mu, wd)
	for ; i < len(w); i++ {
		momentumAt(&w[i], &v[i], g[i], lr, mu, wd)
	}
}

// AdagradUpdate sets g' = g + wd·w; h += g'²; w -= lr·g'/(√h + eps)
// element-wise. g and h must be as long as w.
func AdagradUpdate(w, g, h []float32, lr, eps, wd float32) {
	g, h = g[:len(w)], h[:len(w)]
	i := adagradVec(w, g, h, lr, eps, wd)
	for ; i < len(w); i++ {
		adagradAt(&w[i], &h[i], g[i], lr, eps, wd)
	}
}

// Step applies the rule cfg.Kind with cfg's hyper-parameters to the weights
// w with gradient g. state is the rule's state for these weights (as long
// as w; see Kind.HasState), ignored for SGD. cfg is not validated here. A
// length mismatch or an undefined Kind is a programmer error (panic).
func Step(cfg Config, w, g, state []float32) {
	if len(g) != len(w) || (cfg.Kind.HasState() && len(state) != len(w)) {
		panic(fmt.Sprintf("optim.Step(%v): %d weights, %d gradients, %d state", cfg.Kind, len(w), len(g), len(state)))
	}
	switch cfg.Kind {
	case SGD:
		SGDUpdate(w, g, cfg.LR, cfg.WeightDecay)
	case Momentum:
		MomentumUpdate(w, g, state, cfg.LR, cfg.Momentum, cfg.WeightDecay)
	case Adagrad:
		AdagradUpdate(w, g, state, cfg.LR, cfg.Eps, cfg.WeightDecay)
	default:
		panic(fmt.Sprintf("optim.Step: %v", cfg.Kind))
	}
}

// StepKeys applies the rule to the weights w[keys[i]-off] with gradients
// g[i], in the order of keys (a key may repeat: each occurrence is a step,
// as StepAt key by key would take), computing exactly what StepAt computes
// for each. It is the parameter server's sparse push: one loop per rule,
// with the rule inlined, where StepAt per key costs a call and a switch
// each. Before the updates a first pass reads every weight (and state)
// the keys name into scratch (at least len(keys) long; nil skips the pass):
// the loads are independent, so the processor has many cache misses in
// flight at once, and a table gone cold while the server waited for the
// request (another process ran) is brought back several times faster
// than by the update loop, whose iterations are longer. Measured on a
// 2-core KVM guest, 5,000 sorted random keys of 1,000,000 after a 300 µs
// sleep: 52–63 ns per key by StepAt, 16–18 by one tight loop, 12.7–13.1
// with the first pass.
func StepKeys(cfg Config, w, state []float32, keys []int64, off int, g, scratch []float32) {
	g = g[:len(keys)]
	if len(scratch) >= len(keys) {
		scratch = scratch[:len(keys)]
		for i, k := range keys {
			scratch[i] = w[int(k)-off]
		}
		if cfg.Kind != SGD {
			for i, k := range keys {
				scratch[i] += state[int(k)-off]
			}
		}
	}
	lr, wd := cfg.LR, cfg.WeightDecay
	switch cfg.Kind {
	case SGD:
		for i, k := range keys {
			sgdAt(&w[int(k)-off], g[i], lr, wd)
		}
	case Momentum:
		mu := cfg.Momentum
		for i, k := range keys {
			j := int(k) - off
			momentumAt(&w[j], &state[j], g[i], lr, mu, wd)
		}
	case Adagrad:
		eps := cfg.Eps
		for i, k := range keys {
			j := int(k) - off
			adagradAt(&w[j], &state[j], g[i], lr, eps, wd)
		}
	default:
		panic(fmt.Sprintf("optim.StepKeys: %v", cfg.Kind))
	}
}

// StepAt applies the rule to the single weight w[i] with gradient g (a
// sparse update: the parameter server's pushes of single keys). state is as
// long as w for Momentum and Adagrad and may be nil for SGD. It computes
// exactly what Step computes for that element.
func StepAt(cfg Config, w, state []float32, i int, g float32) {
	switch cfg.Kind {
	case SGD:
		sgdAt(&w[i], g, cfg.LR, cfg.WeightDecay)
	case Momentum:
		momentumAt(&w[i], &state[i], g, cfg.LR, cfg.Momentum, cfg.WeightDecay)
	case Adagrad:
		adagradAt(&w[i], &state[i], g, cfg.LR, cfg.Eps, cfg.WeightDecay)
	default:
		panic(fmt.Sprintf("optim.StepAt: %v", cfg.Kind))
	}
}
