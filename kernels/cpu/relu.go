package cpu

import "github.com/dml-project/dml/kernels"

// Relu sets y = max(x, 0); y may alias x. NaN stays NaN.
func (be *Backend) Relu(y, x kernels.Buffer) error {
	yd, xd := be.data(y), be.data(x)
	if err := checkLen("Relu", "y", len(yd), len(xd)); err != nil {
		return err
	}
	relu(yd, xd)
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
	reluGrad(dxd, dyd, yd)
	return nil
}
