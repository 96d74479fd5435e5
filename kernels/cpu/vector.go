package cpu

import "github.com/dml-project/dml/kernels"

// Axpy sets y += alpha·x; x may alias y.
func (be *Backend) Axpy(alpha float32, x, y kernels.Buffer) error {
	xd, yd := be.raw(x), be.raw(y)
	if err := checkLen("Axpy", "x", len(xd), len(yd)); err != nil {
		return err
	}
	be.unify(yd, xd) // y keeps its layout, in which x is read
	// The gradient sums of a step: y + 1·x is y + x, bit for bit, on
	// addTo's vectors, which take x as y itself or apart from it (a
	// partial overlap keeps the loop's element order).
	if alpha == 1 && !partOverlap(xd, yd) {
		addTo(yd, xd)
		return nil
	}
	yd = yd[:len(xd)]
	for i, v := range xd {
		yd[i] += alpha * v
	}
	return nil
}

// Scale sets x *= alpha, in whatever layout x is (the same in any).
func (be *Backend) Scale(alpha float32, x kernels.Buffer) error {
	scale(alpha, be.raw(x))
	return nil
}

// scale sets x *= alpha.
func scale(alpha float32, x []float32) {
	for i := range x {
		x[i] *= alpha
	}
}

// Sum sets dst = Σ srcs element-wise, adding in the order given; with no
// srcs it zeroes dst. dst may be srcs[0] or srcs[1] (so Sum(acc, acc, g)
// accumulates), but no later src.
func (be *Backend) Sum(dst kernels.Buffer, srcs ...kernels.Buffer) error {
	dd := be.raw(dst)
	sd := make([][]float32, len(srcs))
	for i, s := range srcs {
		if sd[i] = be.raw(s); len(sd[i]) != len(dd) {
			return shapeError("Sum", "srcs[%d] has %d elements, want %d", i, len(sd[i]), len(dd))
		}
	}
	l := be.unify(sd...)
	be.output(dd)
	defer be.setLayout(dd, l)
	switch len(srcs) {
	case 0:
		clear(dd)
		return nil
	case 1:
		copy(dd, sd[0])
		return nil
	}
	// dd = a + b through addTo (a + b and b + a are the same bits).
	a, b := sd[0][:len(dd)], sd[1][:len(dd)]
	switch {
	case sameSpan(dd, sd[:1]):
		addTo(dd, b)
	case sameSpan(dd, sd[1:2]):
		addTo(dd, a)
	default:
		copy(dd, a)
		addTo(dd, b)
	}
	for _, s := range sd[2:] {
		for i, v := range s[:len(dd)] {
			dd[i] += v
		}
	}
	return nil
}

// Dot returns Σ x·y accumulated in float64; the float32 products are exact
// in float64, so only the additions round.
func (be *Backend) Dot(x, y kernels.Buffer) (float64, error) {
	xd, yd := be.data(x), be.data(y)
	if err := checkLen("Dot", "x", len(xd), len(yd)); err != nil {
		return 0, err
	}
	yd = yd[:len(xd)]
	var sum float64
	for i, v := range xd {
		sum += float64(v) * float64(yd[i])
	}
	return sum, nil
}

// NonFinite returns the index of the first NaN or ±Inf in x, or -1.
func (be *Backend) NonFinite(x kernels.Buffer) (int, error) {
	return nonFinite(be.data(x)), nil
}
