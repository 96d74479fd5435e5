package optim

import (
	"fmt"
	"math"
	"slices"
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

// adamAt applies Adam (or AdamW) to one weight and its moments.
func adamAt(w, m, v *float32, g float32, a *AdamStep) {
	wi := *w
	if a.Decoupled {
		wi = wi * a.Decay
	} else {
		g = g + a.WeightDecay*wi
	}
	mi := a.Beta1**m + a.OneMinusBeta1*g
	vi := a.Beta2**v + a.OneMinusBeta2*g*g
	*m, *v = mi, vi
	denom := float32(math.Sqrt(float64(vi)))/a.BiasCorrection2Sqrt + a.Eps
	*w = wi - a.StepSize*(mi/denom)
}

// AdamUpdate applies Adam or AdamW with the constants a to w, g and the
// interleaved moments s (m of weight i at 2i, v at 2i+1; 2·len(w) long).
func AdamUpdate(w, g, s []float32, a AdamStep) {
	g, s = g[:len(w)], s[:2*len(w)]
	for i := adamVec(w, g, s, &a); i < len(w); i++ {
		adamAt(&w[i], &s[2*i], &s[2*i+1], g[i], &a)
	}
}

// NormChunk is the block of SumSquares's fixed order.
const NormChunk = 1024

// SumSquares is Σ x[i]² in float64, in the one order every backend uses
// (LARS's norms): each block of NormChunk floats summed in index order
// from 0, then the block sums in block order from 0. A device computes
// the block sums in parallel and gets the same bits (a float32's square is
// exact in float64, so a fused multiply-add changes nothing either).
func SumSquares(x []float32) float64 {
	var s float64
	for lo := 0; lo < len(x); lo += NormChunk {
		var c float64
		for _, v := range x[lo:min(lo+NormChunk, len(x))] {
			d := float64(v)
			c += d * d
		}
		s += c
	}
	return s
}

// larsAt applies LARS's step with the tensor's rate (lr·trust) to one
// weight and its velocity.
func larsAt(w, v *float32, g, rate, mu, wd float32) {
	wi := *w
	vi := mu**v + rate*(g+wd*wi)
	*v = vi
	*w = wi - vi
}

// LARSApply sets g' = g + wd·w; v = mu·v + rate·g'; w -= v element-wise,
// rate the tensor's lr·trust (LARSStep.Rate). g and v must be as long as
// w.
func LARSApply(w, g, v []float32, rate, mu, wd float32) {
	g, v = g[:len(w)], v[:len(w)]
	for i := larsVec(w, g, v, rate, mu, wd); i < len(w); i++ {
		larsAt(&w[i], &v[i], g[i], rate, mu, wd)
	}
}

// LARSUpdate applies LARS to the tensor w (all of it one tensor: its
// trust ratio from ‖w‖ and ‖g‖) with velocity v.
func LARSUpdate(w, g, v []float32, s LARSStep) {
	g, v = g[:len(w)], v[:len(w)]
	LARSApply(w, g, v, s.Rate(SumSquares(w), SumSquares(g)), s.Momentum, s.WeightDecay)
}

// LARSKeys applies LARS to the weights w[keys[i]-off] with gradients
// g[i] in the order of keys (a sparse push), v the velocities (as long as
// w). starts are the first indices of w's tensors, ascending from 0 (nil:
// w is one tensor). Each tensor's trust ratio takes ‖w‖ over the whole
// tensor and ‖g‖ over the gradients the keys carry into it (the others
// are 0), summed in the order of keys (a key that repeats counts each
// time); every norm is of the weights before the step.
func LARSKeys(s LARSStep, w, v []float32, starts []int, keys []int64, off int, g []float32) {
	g = g[:len(keys)]
	if len(starts) == 0 {
		starts = []int{0}
	}
	tensor := func(j int) int { // the tensor that holds w[j]
		t, _ := slices.BinarySearch(starts, j+1)
		return t - 1
	}
	sg := make([]float64, len(starts))
	seen := make([]bool, len(starts))
	for i, k := range keys {
		t := tensor(int(k) - off)
		d := float64(g[i])
		sg[t] += d * d
		seen[t] = true
	}
	rate := make([]float32, len(starts))
	for t, ok := range seen {
		if ok {
			hi := len(w)
			if t+1 < len(starts) {
				hi = starts[t+1]
			}
			rate[t] = s.Rate(SumSquares(w[starts[t]:hi]), sg[t])
		}
	}
	mu, wd := s.Momentum, s.WeightDecay
	for i, k := range keys {
		j := int(k) - off
		larsAt(&w[j], &v[j], g[i], rate[tensor(j)], mu, wd)
	}
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

// Update is one update of a rule with its constants, computed on the host
// once per step (NewUpdate): the tagged step a backend's Optimize op
// takes, so that a backend has one optimizer op whatever the rule. Only the
// fields Kind's rule reads are set.
type Update struct {
	Kind Kind
	// LR, Momentum, WeightDecay and Eps are the settings as given (SGD,
	// Momentum, Adagrad).
	LR, Momentum, WeightDecay, Eps float32
	Adam                           AdamStep // Adam, AdamW
	LARS                           LARSStep // LARS
}

// NewUpdate is the update cfg describes: its update number cfg.Step's
// constants (Adam's bias corrections).
func NewUpdate(cfg Config) Update {
	u := Update{Kind: cfg.Kind, LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay, Eps: cfg.Eps}
	switch cfg.Kind {
	case Adam, AdamW:
		u.Adam = NewAdamStep(cfg)
	case LARS:
		u.LARS = NewLARSStep(cfg)
	}
	return u
}

// Apply applies the update to the weights w with gradient g and the rule's
// state for them (Kind.StatePer()·len(w) floats, ignored for SGD); a
// per-tensor rule (Kind.PerTensor) takes all of w as one tensor. A length
// mismatch or an undefined Kind is a programmer error (panic): a backend
// checks shapes before.
func (u *Update) Apply(w, g, state []float32) {
	if len(g) != len(w) || len(state) != u.Kind.StatePer()*len(w) && u.Kind.HasState() {
		panic(fmt.Sprintf("optim: %v update of %d weights with %d gradients, %d state", u.Kind, len(w), len(g), len(state)))
	}
	switch u.Kind {
	case SGD:
		SGDUpdate(w, g, u.LR, u.WeightDecay)
	case Momentum:
		MomentumUpdate(w, g, state, u.LR, u.Momentum, u.WeightDecay)
	case Adagrad:
		AdagradUpdate(w, g, state, u.LR, u.Eps, u.WeightDecay)
	case Adam, AdamW:
		AdamUpdate(w, g, state, u.Adam)
	case LARS:
		LARSUpdate(w, g, state, u.LARS)
	default:
		panic(fmt.Sprintf("optim: update by %v", u.Kind))
	}
}

// AppendScalars appends to dst the float32 parameters of the rule's
// device kernel (Kind.Kernel) after (w, g, state, n), in the kernel's order
// (kernels/cu/ABI.md): the values Apply computes with, so that the device
// computes the same bits. A per-tensor rule's kernel takes its rate
// (device memory, computed from the norms there) before these. It appends
// (into the caller's storage) rather than returning a new slice: the
// device runs it at every update.
func (u *Update) AppendScalars(dst []float32) []float32 {
	switch u.Kind {
	case SGD:
		return append(dst, u.LR, u.WeightDecay)
	case Momentum:
		return append(dst, u.LR, u.Momentum, u.WeightDecay)
	case Adagrad:
		return append(dst, u.LR, u.Eps, u.WeightDecay)
	case Adam, AdamW:
		a := &u.Adam
		var decoupled float32
		if a.Decoupled {
			decoupled = 1
		}
		return append(dst, a.Beta1, a.OneMinusBeta1, a.Beta2, a.OneMinusBeta2, a.StepSize,
			a.BiasCorrection2Sqrt, a.Eps, a.WeightDecay, a.Decay, decoupled)
	case LARS:
		return append(dst, u.LARS.Momentum, u.LARS.WeightDecay)
	}
	panic(fmt.Sprintf("optim: scalars of %v", u.Kind))
}

// Step applies the rule cfg.Kind with cfg's hyper-parameters to the
// weights w with gradient g (NewUpdate(cfg).Apply). cfg is not validated
// here.
func Step(cfg Config, w, g, state []float32) {
	u := NewUpdate(cfg)
	u.Apply(w, g, state)
}

// StepKeys applies the rule to the weights w[keys[i]-off] with gradients
// g[i], in the order of keys (a key may repeat: each occurrence is a step,
// as StepAt key by key would take), computing exactly what StepAt computes
// for each (LARS apart: w is one tensor whose trust ratio takes the
// gradients of all the keys, LARSKeys). It is the parameter server's sparse push: one loop per rule,
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
		if per := cfg.Kind.StatePer(); per > 0 {
			for i, k := range keys {
				scratch[i] += state[per*(int(k)-off)]
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
	case Adam, AdamW:
		a := NewAdamStep(cfg)
		for i, k := range keys {
			j := int(k) - off
			adamAt(&w[j], &state[2*j], &state[2*j+1], g[i], &a)
		}
	case LARS:
		LARSKeys(NewLARSStep(cfg), w, state, nil, keys, off, g)
	default:
		panic(fmt.Sprintf("optim.StepKeys: %v", cfg.Kind))
	}
}

// StepAt applies the rule to the single weight w[i] with gradient g (a
// sparse update: the parameter server's pushes of single keys). state is as
// long as w for Momentum and Adagrad and may be nil for SGD. It computes
// exactly what Step computes for that element (LARS: not so, the trust
// ratio is the whole of w's with a gradient of g at i alone: StepKeys with
// the one key).
func StepAt(cfg Config, w, state []float32, i int, g float32) {
	switch cfg.Kind {
	case SGD:
		sgdAt(&w[i], g, cfg.LR, cfg.WeightDecay)
	case Momentum:
		momentumAt(&w[i], &state[i], g, cfg.LR, cfg.Momentum, cfg.WeightDecay)
	case Adagrad:
		adagradAt(&w[i], &state[i], g, cfg.LR, cfg.Eps, cfg.WeightDecay)
	case Adam, AdamW:
		a := NewAdamStep(cfg)
		adamAt(&w[i], &state[2*i], &state[2*i+1], g, &a)
	case LARS:
		LARSKeys(NewLARSStep(cfg), w, state, nil, []int64{int64(i)}, 0, []float32{g})
	default:
		panic(fmt.Sprintf("optim.StepAt: %v", cfg.Kind))
	}
}
