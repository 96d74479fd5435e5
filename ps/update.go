package ps

import (
	"github.com/dml-project/dml/internal/hugemem"
	"github.com/dml-project/dml/kernels/optim"
)

// The server-side update rule is kernels/optim's, the same maths the
// workers' optimizers use (every optim.Kind: PyTorch's SGD, momentum,
// Adagrad, Adam and AdamW, and LARS; float32 throughout); the server applies it to whole ranges (dense pushes, BSP
// rounds) or key by key (sparse pushes), which computes the same per key.

// optimConfig is cfg's update rule as an optim.Config.
func (c Config) optimConfig() optim.Config {
	return optim.Config{Kind: c.Optimizer, LR: c.LR, Momentum: c.Momentum, WeightDecay: c.WeightDecay, Eps: c.Eps, Beta1: c.Beta1, Beta2: c.Beta2,
		TrustCoef: c.TrustCoef}
}

// updater holds a server's weights for its range and the optimizer state.
type updater struct {
	cfg   optim.Config
	w     []float32 // weights of the server's range
	state []float32 // the rule's state, Kind.StatePer() floats a key; nil for SGD
	// The tables that hold w and state: large ones are on huge pages
	// (internal/hugemem: a sparse push's random keys then cost no TLB
	// misses), freed when the updater goes.
	tables  []*hugemem.Table
	scratch []float32 // StepKeys's first pass
	// starts are the first keys of LARS's tensors in the range, relative
	// to it, ascending from 0 (Config.TensorStarts cut to the range).
	starts []int
}

// setTensors cuts the model's tensor starts (Config.TensorStarts) to the
// range that begins at key lo: LARS's tensors on this server.
func (u *updater) setTensors(starts []int, lo int) {
	u.starts = append(u.starts[:0], 0)
	for _, s := range starts {
		if s > lo && s < lo+len(u.w) {
			u.starts = append(u.starts, s-lo)
		}
	}
}

// larsDense is dense for LARS: per tensor of the range that the push
// [off, off+len(g)) reaches, the trust ratio from the norms of the
// tensor's weights on this server and of the pushed gradient (in
// optim.SumSquares's order, serially), then the element-wise step (split
// over cores when long). With a push of the whole range and the range's
// tensors whole, it is the workers' Optimizer's update bit for bit.
func (u *updater) larsDense(off int, g []float32) {
	s := optim.NewLARSStep(u.cfg)
	starts := u.starts
	if len(starts) == 0 {
		starts = []int{0}
	}
	for t, a := range starts {
		b := len(u.w)
		if t+1 < len(starts) {
			b = starts[t+1]
		}
		x, y := max(a, off), min(b, off+len(g))
		if x >= y {
			continue
		}
		gt := g[x-off : y-off]
		rate := s.Rate(optim.SumSquares(u.w[a:b]), optim.SumSquares(gt))
		w, v := u.w[x:y], u.state[x:y]
		if len(gt) < parallelMin {
			optim.LARSApply(w, gt, v, rate, s.Momentum, s.WeightDecay)
			continue
		}
		parallelFor(len(gt), func(lo, hi int) {
			optim.LARSApply(w[lo:hi], gt[lo:hi], v[lo:hi], rate, s.Momentum, s.WeightDecay)
		})
	}
}

// newUpdater updates w in place.
func newUpdater(cfg Config, w []float32) *updater {
	u := &updater{cfg: cfg.optimConfig(), w: w}
	if per := u.cfg.Kind.StatePer(); per > 0 {
		u.state = u.table(per * len(w))
	}
	return u
}

// newUpdaterCopy updates a copy of initial, in a table of its own: the
// range of keys from lo.
func newUpdaterCopy(cfg Config, initial []float32, lo int) *updater {
	t := hugemem.Floats(len(initial))
	copy(t.F, initial)
	u := newUpdater(cfg, t.F)
	u.setTensors(cfg.TensorStarts, lo)
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
	if u.cfg.Kind == optim.LARS {
		u.larsDense(off, g)
		return
	}
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
// the range's first) for every i: a sparse push (optim.StepKeys); runs:
// the keys are mostly consecutive (they came as runs), and their long
// runs are stepped as ranges.
func (u *updater) keys(keys []int64, off int, g []float32, runs bool) {
	if u.cfg.Kind == optim.LARS {
		// Per tensor: ‖w‖ of the whole part on this server, ‖g‖ of the
		// pushed keys' gradients.
		optim.LARSKeys(optim.NewLARSStep(u.cfg), u.w, u.state, u.starts, keys, off, g)
		return
	}
	if !runs {
		u.stepKeys(keys, off, g)
		return
	}
	// Runs of runMin consecutive keys or more (a dense model's push less
	// the embedding rows its batch did not touch) go as dense steps, the
	// rest key by key: the same arithmetic (the vector rules are the
	// scalar ones bit for bit), at the dense loop's speed.
	from := 0 // keys[from:i] are still to step key by key
	for i := 0; i < len(keys); {
		j := runEnd(keys, i)
		if j-i >= runMin {
			u.stepKeys(keys[from:i], off, g[from:i])
			u.dense(int(keys[i])-off, g[i:j])
			from = j
		}
		i = j
	}
	u.stepKeys(keys[from:], off, g[from:])
}

// runMin is the shortest run of keys that keys steps as a dense range.
const runMin = 64

// stepKeys is optim.StepKeys on the range's table.
func (u *updater) stepKeys(keys []int64, off int, g []float32) {
	if len(keys) == 0 {
		return
	}
	if cap(u.scratch) < len(keys) {
		u.scratch = make([]float32, len(keys))
	}
	optim.StepKeys(u.cfg, u.w, u.state, keys, off, g, u.scratch[:len(keys)])
}

// denseSerial is dense on the calling goroutine (for callers that split
// the work themselves; not LARS, whose trust ratios need whole tensors).
func (u *updater) denseSerial(off int, g []float32) {
	var state []float32
	if per := u.cfg.Kind.StatePer(); u.state != nil {
		state = u.state[per*off : per*(off+len(g))]
	}
	optim.Step(u.cfg, u.w[off:off+len(g)], g, state)
}
