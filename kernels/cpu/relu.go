package cpu

import "github.com/dml-project/dml/kernels"

// Relu sets y = max(x, 0); y may alias x. NaN stays NaN. y takes x's
// layout.
func (be *Backend) Relu(y, x kernels.Buffer) error {
	yd, xd := be.raw(y), be.raw(x)
	if err := checkLen("Relu", "y", len(yd), len(xd)); err != nil {
		return err
	}
	l := be.unify(xd)
	be.output(yd)
	relu(yd, xd)
	be.setLayout(yd, l)
	return nil
}

// ReluGrad sets dx = dy where y > 0, else 0; dx may alias dy. dy and y
// are brought to one layout (layout.go), dx takes it.
func (be *Backend) ReluGrad(dx, dy, y kernels.Buffer) error {
	dxd, dyd, yd := be.raw(dx), be.raw(dy), be.raw(y)
	if err := firstError(
		checkLen("ReluGrad", "dy", len(dyd), len(yd)),
		checkLen("ReluGrad", "dx", len(dxd), len(yd)),
	); err != nil {
		return err
	}
	l := be.unify(dyd, yd)
	be.output(dxd)
	reluGrad(dxd, dyd, yd)
	be.setLayout(dxd, l)
	return nil
}
