package cpu

import "github.com/dml-project/dml/kernels"

// AddBias adds bias[j] to every x[i, j] of the rows×cols matrix x, in place.
func (be *Backend) AddBias(x, bias kernels.Buffer, rows, cols int) error {
	xd, bd := be.data(x), be.data(bias)
	if err := firstError(
		checkMatrix("AddBias", "x", len(xd), rows, cols),
		checkLen("AddBias", "bias", len(bd), cols),
	); err != nil {
		return err
	}
	for i := range rows {
		addTo(xd[i*cols:(i+1)*cols], bd)
	}
	return nil
}

// SumRows sets dst[j] = beta·dst[j] + Σ_i x[i, j] for the rows×cols matrix x;
// beta == 0 overwrites dst without reading it. dst must not overlap x.
func (be *Backend) SumRows(dst, x kernels.Buffer, rows, cols int, beta float32) error {
	dd, xd := be.data(dst), be.data(x)
	if err := firstError(
		checkMatrix("SumRows", "x", len(xd), rows, cols),
		checkLen("SumRows", "dst", len(dd), cols),
	); err != nil {
		return err
	}
	scaleOrZero(dd, beta)
	for i := range rows {
		addTo(dd, xd[i*cols:(i+1)*cols])
	}
	return nil
}
