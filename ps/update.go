package ps

import (
	"github.com/dml-project/dml/internal/hugemem"
	"github.com/dml-project/dml/kernels/optim"
)

// The server-side update rule is kernels/optim's, the same maths the
// workers' optimizers use (PyTorch's SGD, momentum and Adagrad, float32
// throughout); the server applies it to whole ranges (dense pushes, BSP
// rounds) or key by key (sparse pushes), which computes the same per key.

// optimConfig is cfg's update rule as an optim.Config.
func (c Config) optimConfig() optim.Config {
	return optim.Config{Kind: c.Optimizer, LR: c.LR, Momentum: c.Momentum, WeightDecay: c.WeightDecay, Eps: c.Eps, Beta1: c.Beta1, Beta2: c.Beta2}
}

// updater holds a server's weights for its range and the optimizer state.
type updater struct {
	cfg   optim.Config
	w     []float32 // weights of the server's range
	state []float32 // momentum buffer or Adagrad sum; nil for SGD
	// The tables that hold w and state: large ones are on huge pages
	// (internal/hugemem: a sparse push's random keys then cost no TLB
	// misses), freed when the updater goes.
	tables  []*hugemem.Table
	scratch []float32 // StepKeys's first pass
}

// newUpdater updates w in place.
func newUpdater(cfg Config, w []float32) *updater {
	u := &updater{cfg: cfg.optimConfig(), w: w}
	if per := u.cfg.Kind.StatePer(); per > 0 {
		u.state = u.table(per * len(w))
	}
	return u
}

// newUpdaterCopy updates a copy of initial, in a table of its own.
func newUpdaterCopy(cfg Config, initial []float32) *updater {
	t := hugemem.Floats(len(initial))
	copy(t.F, initial)
	u := newUpdater(cfg, t.F)
	u.tables = append(u.tables, t)
	return u
}

func (u *updater) table(n int) []float32 {
	t := hugemem.Floats(n)
	u.tables = append(u.tables, t)
	return t.F
}

// dense applies gradient g to the keys [off, off+len(g)) of the range.
// Large ranges are split over cores (the rules are element-wise).
func (u *updater) dense(off int, g []float32) {
	w := u.w[off : off+len(g)]
	per := u.cfg.Kind.StatePer()
	var state []float32
	if u.state != nil {
		state = u.state[per*off : per*(off+len(g))]
	}
	if len(g) < parallelMin {
		optim.Step(u.cfg, w, g, state)
		return
	}
	parallelFor(len(g), func(lo, hi int) {
		var st []float32
		if state != nil {
			st = state[per*lo : per*hi]
		}
		optim.Step(u.cfg, w[lo:hi], g[lo:hi], st)
	})
}

// keys applies gradient g[i] to the key keys[i] (a key of the model; off is
// the range's first) for every i: a sparse push (optim.StepKeys).
func (u *updater) keys(keys []int64, off int, g []float32) {
	if cap(u.scratch) < len(keys) {
		u.scratch = make([]float32, len(keys))
	}
	optim.StepKeys(u.cfg, u.w, u.state, keys, off, g, u.scratch[:len(keys)])
}

// denseSerial is dense on the calling goroutine (for callers that split
// the work themselves).
func (u *updater) denseSerial(off int, g []float32) {
	var state []float32
	if per := u.cfg.Kind.StatePer(); u.state != nil {
		state = u.state[per*off : per*(off+len(g))]
	}
	optim.Step(u.cfg, u.w[off:off+len(g)], g, state)
}
