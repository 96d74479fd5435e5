package cpu

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

// SGD sets w -= lr·(g + wd·w).
func (be *Backend) SGD(w, g kernels.Buffer, lr, wd float32) error {
	wv, gv := be.data(w), be.data(g)
	if err := checkLen("SGD", "g", len(gv), len(wv)); err != nil {
		return err
	}
	gv = gv[:len(wv)]
	for i, wi := range wv {
		wv[i] = wi - lr*(gv[i]+wd*wi)
	}
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
	gv, vv = gv[:len(wv)], vv[:len(wv)]
	for i, wi := range wv {
		vi := mu*vv[i] + (gv[i] + wd*wi)
		vv[i] = vi
		wv[i] = wi - lr*vi
	}
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
	gv, hv = gv[:len(wv)], hv[:len(wv)]
	for i, wi := range wv {
		gi := gv[i] + wd*wi
		hi := hv[i] + gi*gi
		hv[i] = hi
		wv[i] = wi - lr*gi/(float32(math.Sqrt(float64(hi)))+eps)
	}
	return nil
}
