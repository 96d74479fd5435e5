package cpu

import "github.com/dml-project/dml/kernels"

// Relu sets y = max(x, 0); y may alias x. NaN stays NaN.
func (be *Backend) Relu(y, x kernels.Buffer) error {
	yd, xd := be.data(y), be.data(x)
	if err := checkLen("Relu", "y", len(yd), len(xd)); err != nil {
		return err
	}
	yd = yd[:len(xd)]
	for i, v := range xd {
		if v < 0 {
			v = 0
		}
		yd[i] = v
	}
	return nil
}

// ReluGrad sets dx = dy where y > 0, else 0; dx may alias dy.
func (be *Backend) ReluGrad(dx, dy, y kernels.Buffer) error {
	dxd, dyd, yd := be.data(dx), be.data(dy), be.data(y)
	if err := firstError(
		checkLen("ReluGrad", "dy", len(dyd), len(yd)),
		checkLen("ReluGrad", "dx", len(dxd), len(yd)),
	); err != nil {
		return err
	}
	dxd, dyd = dxd[:len(yd)], dyd[:len(yd)]
	for i, v := range yd {
		g := dyd[i]
		if !(v > 0) {
			g = 0
		}
		dxd[i] = g
	}
	return nil
}
