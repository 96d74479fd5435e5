package cpu

import (
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
)

// The update rules are package optim's, the same code the parameter server
// runs; these methods only check shapes.

// SGD sets w -= lr·(g + wd·w).
func (be *Backend) SGD(w, g kernels.Buffer, lr, wd float32) error {
	wv, gv := be.data(w), be.data(g)
	if err := checkLen("SGD", "g", len(gv), len(wv)); err != nil {
		return err
	}
	optim.SGDUpdate(wv, gv, lr, wd)
	return nil
}

// Momentum is PyTorch's heavy-ball SGD: v = mu·v + (g + wd·w); w -= lr·v.
func (be *Backend) Momentum(w, g, v kernels.Buffer, lr, mu, wd float32) error {
	wv, gv, vv := be.data(w), be.data(g), be.data(v)
	if err := firstError(
		checkLen("Momentum", "g", len(gv), len(wv)),
		checkLen("Momentum", "v", len(vv), len(wv)),
	); err != nil {
		return err
	}
	optim.MomentumUpdate(wv, gv, vv, lr, mu, wd)
	return nil
}

// Adagrad is PyTorch's form: g' = g + wd·w; h += g'²; w -= lr·g'/(√h + eps).
func (be *Backend) Adagrad(w, g, h kernels.Buffer, lr, eps, wd float32) error {
	wv, gv, hv := be.data(w), be.data(g), be.data(h)
	if err := firstError(
		checkLen("Adagrad", "g", len(gv), len(wv)),
		checkLen("Adagrad", "h", len(hv), len(wv)),
	); err != nil {
		return err
	}
	optim.AdagradUpdate(wv, gv, hv, lr, eps, wd)
	return nil
}

// Adam is PyTorch's Adam or AdamW with one update's constants a (optim's
// rule); s holds m and v interleaved, twice as long as w.
func (be *Backend) Adam(w, g, s kernels.Buffer, a optim.AdamStep) error {
	wv, gv, sv := be.data(w), be.data(g), be.data(s)
	if err := firstError(
		checkLen("Adam", "g", len(gv), len(wv)),
		checkLen("Adam", "s", len(sv), 2*len(wv)),
	); err != nil {
		return err
	}
	optim.AdamUpdate(wv, gv, sv, a)
	return nil
}

// LARS applies one LARS step (optim's rule) to the tensor w with velocity
// v: the trust ratio from w's and g's norms, then the element-wise step.
func (be *Backend) LARS(w, g, v kernels.Buffer, s optim.LARSStep) error {
	wv, gv, vv := be.data(w), be.data(g), be.data(v)
	if err := firstError(
		checkLen("LARS", "g", len(gv), len(wv)),
		checkLen("LARS", "v", len(vv), len(wv)),
	); err != nil {
		return err
	}
	optim.LARSUpdate(wv, gv, vv, s)
	return nil
}
