package ps

import "math"

// The update rules, written to match PyTorch's torch.optim step for step
// (float32 throughout). With g' = g + wd*w (L2 weight decay folded into the
// gradient, as PyTorch's weight_decay does):
//
//	SGD:      w -= lr*g'
//	Momentum: v = mu*v + g';             w -= lr*v   (v starts at 0, so v1 = g')
//	Adagrad:  h += g'*g';                w -= lr*g'/(sqrt(h)+eps)
//
// The dense forms work over whole slices; the server also applies them at
// single keys (sparse pushes) through the same per-element functions.

// SGDStep applies w -= lr*(g + wd*w) element-wise. w and g have equal length.
func SGDStep(w, g []float32, lr, wd float32) {
	g = g[:len(w)]
	for i := range w {
		sgdAt(&w[i], g[i], lr, wd)
	}
}

// MomentumStep applies v = mu*v + (g + wd*w); w -= lr*v element-wise.
func MomentumStep(w, v, g []float32, lr, mu, wd float32) {
	v, g = v[:len(w)], g[:len(w)]
	for i := range w {
		momentumAt(&w[i], &v[i], g[i], lr, mu, wd)
	}
}

// AdagradStep applies h += g'^2; w -= lr*g'/(sqrt(h)+eps), g' = g + wd*w.
func AdagradStep(w, h, g []float32, lr, wd, eps float32) {
	h, g = h[:len(w)], g[:len(w)]
	for i := range w {
		adagradAt(&w[i], &h[i], g[i], lr, wd, eps)
	}
}

func sgdAt(w *float32, g, lr, wd float32) {
	g += wd * *w
	*w -= lr * g
}

func momentumAt(w, v *float32, g, lr, mu, wd float32) {
	g += wd * *w
	*v = mu**v + g
	*w -= lr * *v
}

func adagradAt(w, h *float32, g, lr, wd, eps float32) {
	g += wd * *w
	*h += g * g
	*w -= lr * g / (float32(math.Sqrt(float64(*h))) + eps)
}

// updater holds a server's weights for its range and the optimizer state.
type updater struct {
	opt           Optimizer
	lr, mu, wd, e float32
	w             []float32 // weights of the server's range
	state         []float32 // momentum buffer or Adagrad sum; nil for SGD
}

func newUpdater(cfg Config, w []float32) *updater {
	u := &updater{opt: cfg.Optimizer, lr: cfg.LR, mu: cfg.Momentum, wd: cfg.WeightDecay, e: cfg.Eps, w: w}
	if u.opt != SGD {
		u.state = make([]float32, len(w))
	}
	return u
}

// dense applies gradient g to the keys [off, off+len(g)) of the range.
func (u *updater) dense(off int, g []float32) {
	w := u.w[off : off+len(g)]
	switch u.opt {
	case SGD:
		SGDStep(w, g, u.lr, u.wd)
	case Momentum:
		MomentumStep(w, u.state[off:off+len(g)], g, u.lr, u.mu, u.wd)
	case Adagrad:
		AdagradStep(w, u.state[off:off+len(g)], g, u.lr, u.wd, u.e)
	}
}

// at applies gradient g to the key at offset i of the range.
func (u *updater) at(i int, g float32) {
	switch u.opt {
	case SGD:
		sgdAt(&u.w[i], g, u.lr, u.wd)
	case Momentum:
		momentumAt(&u.w[i], &u.state[i], g, u.lr, u.mu, u.wd)
	case Adagrad:
		adagradAt(&u.w[i], &u.state[i], g, u.lr, u.wd, u.e)
	}
}
