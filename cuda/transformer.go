//go:build cuda

package cuda

import "github.com/dml-project/dml/kernels"

// The transformer layers' ops (kernels/cu/transformer.cu; ABI.md, module
// transformer): our kernels, the CPU backend's reference maths (each
// value in float64, sums in a fixed order; the CPU's erf-form GELU is
// float32, within 1e-6). Shapes are checked with the CPU
// backend's function (kernels.CheckLayerNorm) before anything is queued.

var _ kernels.TransformerOps = (*Backend)(nil)

// Gelu: see kernels.TransformerOps.
func (be *Backend) Gelu(y, x kernels.Buffer, tanh bool) error {
	return be.gelu("Gelu", be.dev.k.gelu, be.buf(y), nil, be.buf(x), tanh)
}

// GeluGrad: see kernels.TransformerOps.
func (be *Backend) GeluGrad(dx, dy, x kernels.Buffer, tanh bool) error {
	return be.gelu("GeluGrad", be.dev.k.geluGrad, be.buf(dx), be.buf(dy), be.buf(x), tanh)
}

// gelu queues f over x's elements: y = GELU(x) (dy nil) or dx = dy·GELU′(x).
func (be *Backend) gelu(op string, f function, out, dy, x *Buffer, tanh bool) error {
	if err := be.usable(op); err != nil {
		return err
	}
	if out.n != x.n || dy != nil && dy.n != x.n {
		return be.shapeErr(op, "the buffers have %d and %d elements, x %d", out.n, dyLen(dy, x), x.n)
	}
	if x.n == 0 {
		return nil
	}
	form := i64(0)
	if tanh {
		form = i64(1)
	}
	if dy == nil {
		return be.done(op, be.launch1D(f, x.n, ptr(out), ptr(x), i64(x.n), form), x.n)
	}
	return be.done(op, be.launch1D(f, x.n, ptr(out), ptr(dy), ptr(x), i64(x.n), form), x.n)
}

func dyLen(dy, x *Buffer) int {
	if dy == nil {
		return x.n
	}
	return dy.n
}

// LayerNorm: see kernels.TransformerOps. A warp per row.
func (be *Backend) LayerNorm(y, mean, invstd, x, gamma, beta kernels.Buffer, rows, cols int, eps float32) error {
	const op = "LayerNorm"
	yd, md, id, xd, gd, bd := be.buf(y), be.buf(mean), be.buf(invstd), be.buf(x), be.buf(gamma), be.buf(beta)
	if err := be.layerNormCheck(op, xd, rows, cols, []*Buffer{md, id}, []*Buffer{gd, bd}, yd); err != nil {
		return err
	}
	if rows == 0 {
		return be.record(op, rows, cols)
	}
	return be.done(op, be.launch(be.dev.k.layerNorm, min(ceilDiv(rows, warpRows), maxRowBlocks), 1, threads, ptr(yd), ptr(md), ptr(id), ptr(xd), ptr(gd), ptr(bd),
		i64(rows), i64(cols), f32(eps)), rows, cols)
}

// LayerNormGrad: see kernels.TransformerOps. The column sums first (they
// read dy, which dx may be), then a warp per row.
func (be *Backend) LayerNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma kernels.Buffer, rows, cols int) error {
	const op = "LayerNormGrad"
	dd, dg, db, gy, xd, md, id, gd := be.buf(dx), be.buf(dgamma), be.buf(dbeta), be.buf(dy), be.buf(x), be.buf(mean), be.buf(invstd), be.buf(gamma)
	if err := be.layerNormCheck(op, xd, rows, cols, []*Buffer{md, id}, []*Buffer{gd, dg, db}, gy, dd); err != nil {
		return err
	}
	k := &be.dev.k
	// The column sums first (they read dy, which dx may be), over slices
	// of about 64 rows (at most 256 slices; the shape alone decides).
	slices := max(1, min(256, ceilDiv(rows, 64)))
	part, err := be.scratch(op, 4*slices*cols, rows, cols) // 2·slices·cols float64
	if err != nil {
		return err
	}
	defer be.release(part)
	colBlocks := max(1, ceilDiv(cols, sumCols)) // 32 columns × 8 lanes a block
	if err := be.launch(k.layerNormColsPartial, colBlocks, min(slices, 65535), threads, ptrAt(part.ptr), ptr(gy), ptr(xd), ptr(md), ptr(id),
		i64(rows), i64(cols), i64(slices)); err != nil {
		return be.deviceErr(op, dimsString([]int{rows, cols}), err)
	}
	if err := be.launch(k.layerNormColsFinish, colBlocks, 1, threads, ptr(dg), ptr(db), ptrAt(part.ptr), i64(cols), i64(slices)); err != nil {
		return be.deviceErr(op, dimsString([]int{rows, cols}), err)
	}
	if rows == 0 {
		return be.record(op, rows, cols)
	}
	return be.done(op, be.launch(k.layerNormGradRows, min(ceilDiv(rows, warpRows), maxRowBlocks), 1, threads, ptr(dd), ptr(gy), ptr(xd), ptr(md), ptr(id), ptr(gd),
		i64(rows), i64(cols)), rows, cols)
}

// layerNormCheck validates a layer norm's buffers: x of rows·cols, the
// per-row and per-column ones, and those as long as x.
func (be *Backend) layerNormCheck(op string, x *Buffer, rows, cols int, perRow, perCol []*Buffer, same ...*Buffer) error {
	if err := be.usable(op); err != nil {
		return err
	}
	lens := func(bs []*Buffer) []int {
		l := make([]int, len(bs))
		for i, b := range bs {
			l[i] = b.n
		}
		return l
	}
	if err := kernels.CheckLayerNorm("cuda."+op, x.n, rows, cols, lens(perRow), lens(perCol)); err != nil {
		return err
	}
	for _, b := range same {
		if b.n != x.n {
			return be.shapeErr(op, "a buffer has %d elements, x %d", b.n, x.n)
		}
	}
	return nil
}

// maxRowBlocks caps a row kernel's grid (its blocks stride over the rest).
const maxRowBlocks = 1 << 16

// Dropout: see kernels.TransformerOps.
func (be *Backend) Dropout(y, x, keys kernels.Buffer, rows, cols int, salt, threshold uint32, scale float32) error {
	const op = "Dropout"
	yd, xd, kd := be.buf(y), be.buf(x), be.buf(keys)
	if err := be.usable(op); err != nil {
		return err
	}
	if rows < 0 || cols < 0 || xd.n != rows*cols || yd.n != xd.n || kd.n != rows {
		return be.shapeErr(op, "x %d, y %d and keys %d elements for %d rows × %d cols", xd.n, yd.n, kd.n, rows, cols)
	}
	if xd.n == 0 {
		return nil
	}
	return be.done(op, be.launch1D(be.dev.k.dropout, xd.n, ptr(yd), ptr(xd), ptr(kd), i64(rows), i64(cols),
		uint64(salt), uint64(threshold), f32(scale)), rows, cols)
}
