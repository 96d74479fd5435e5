package cpu

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.ConvOps = (*Backend)(nil)

// Im2col: see kernels.ConvOps.
func (be *Backend) Im2col(cols, x kernels.Buffer, n, c, h, w, k, stride, pad int) error {
	cd, xd := be.data(cols), be.data(x)
	if err := kernels.CheckConv("cpu.Im2col", len(xd), len(cd), n, c, h, w, k, stride, pad); err != nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	// Row r of channel ci's k·k rows is cols[(ci·k·k + r)·rs:], rs = n·oh·ow;
	// sample s's part of it starts s·oh·ow further.
	hw, plane := h*w, oh*ow
	rs := n * plane
	for ci := range c {
		for s := range n {
			p := s*c + ci
			im2colPlane(cd[ci*k*k*rs+s*plane:], xd[p*hw:(p+1)*hw], rs, h, w, k, stride, pad, oh, ow)
		}
	}
	return nil
}

// Col2im: see kernels.ConvOps.
func (be *Backend) Col2im(dx, cols kernels.Buffer, n, c, h, w, k, stride, pad int) error {
	dd, cd := be.data(dx), be.data(cols)
	if err := kernels.CheckConv("cpu.Col2im", len(dd), len(cd), n, c, h, w, k, stride, pad); err != nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	hw, plane := h*w, oh*ow
	rs := n * plane
	for ci := range c {
		for s := range n {
			p := s*c + ci
			col2imPlane(dd[p*hw:(p+1)*hw], cd[ci*k*k*rs+s*plane:], rs, h, w, k, stride, pad, oh, ow)
		}
	}
	return nil
}

// validCols is the range [lo, hi) of output columns ox whose input column
// ox·stride + kj − pad lies inside a row of w.
func validCols(ow, w, kj, stride, pad int) (lo, hi int) {
	// ox·stride ≥ pad − kj  and  ox·stride ≤ w − 1 + pad − kj.
	if stride == 1 { // without the divisions
		lo, hi = max(pad-kj, 0), min(ow, w+pad-kj)
		if hi < 0 {
			return 0, 0
		}
		return min(lo, hi), hi
	}
	if d := pad - kj; d > 0 {
		lo = (d + stride - 1) / stride
	}
	top := w - 1 + pad - kj
	if top < 0 {
		return 0, 0
	}
	hi = min(ow, top/stride+1)
	return min(lo, hi), hi
}

// MaxPool: see kernels.ConvOps.
func (be *Backend) MaxPool(y, x kernels.Buffer, planes, h, w, k, stride int) error {
	yd, xd := be.data(y), be.data(x)
	if err := kernels.CheckPool("cpu.MaxPool", len(xd), len(yd), planes, h, w, k, stride); err != nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, 0)
	if k == 2 && stride == 2 {
		maxPool22(yd, xd, planes, h, w, oh, ow)
		return nil
	}
	for p := range planes {
		xp := xd[p*h*w : (p+1)*h*w]
		for oy := range oh {
			for ox := range ow {
				yd[(p*oh+oy)*ow+ox] = xp[argmaxWindow(xp, w, oy*stride, ox*stride, k)]
			}
		}
	}
	return nil
}

// maxPool22 is the 2×2, stride-2 pool (LeNet's, and most nets'): each
// window's first maximum (row-major), as argmaxWindow picks it. Rows of 8
// outputs or more go 8 at a time through maxPool22x8 (AVX2; a row's last
// block overlaps the one before it rather than running short), rows of 4
// to 7 4 at a time through maxPool22x4; narrower rows, and a block with
// a NaN, through maxPool22Span.
func maxPool22(y, x []float32, planes, h, w, oh, ow int) {
	for p := range planes {
		xp := x[p*h*w : (p+1)*h*w]
		for oy := range oh {
			r0, r1 := xp[2*oy*w:2*oy*w+w], xp[(2*oy+1)*w:(2*oy+1)*w+w]
			yr := y[(p*oh+oy)*ow : (p*oh+oy+1)*ow]
			switch {
			case !useAVX2 || ow < 4:
				maxPool22Span(yr, r0, r1, xp, w, oy, 0, ow)
			case ow < 8:
				for x0 := 0; x0 < ow; x0 += 4 {
					x0 = min(x0, ow-4)
					if !maxPool22x4(&yr[x0], &r0[2*x0], &r1[2*x0]) {
						maxPool22Span(yr, r0, r1, xp, w, oy, x0, x0+4)
					}
				}
			default:
				for x0 := 0; x0 < ow; x0 += 8 {
					x0 = min(x0, ow-8)
					if !maxPool22x8(&yr[x0], &r0[2*x0], &r1[2*x0]) {
						maxPool22Span(yr, r0, r1, xp, w, oy, x0, x0+8)
					}
				}
			}
		}
	}
}

// maxPool22Span is maxPool22 of outputs lo … hi−1 of output row oy (rows
// r0 and r1 of plane xp, w wide) into yr. The maximum is taken with the
// builtin max, without branches (after a ReLU, half the values tie at 0
// and branches mispredict); a window whose maximum is 0 (where the
// builtin's rule, +0 above −0, and the first maximum's may differ) takes
// the first of its zeros, and one whose maximum is NaN goes through
// argmaxWindow.
func maxPool22Span(yr, r0, r1, xp []float32, w, oy, lo, hi int) {
	for ox := lo; ox < hi; ox++ {
		j := 2 * ox
		a, b, c, d := r0[j], r0[j+1], r1[j], r1[j+1]
		m := max(max(a, b), max(c, d))
		switch {
		case m == 0: // every value ≤ 0: the first that is 0
			m = d
			if c == 0 {
				m = c
			}
			if b == 0 {
				m = b
			}
			if a == 0 {
				m = a
			}
		case m != m:
			m = xp[argmaxWindow(xp, w, 2*oy, j, 2)]
		}
		yr[ox] = m
	}
}

// maxPoolGrad22 is MaxPoolGrad of the 2×2, stride-2 pool. Its windows do
// not overlap, so each writes its four pixels of dx — the gradient (plus
// +0, as the scatter into a cleared dx added it) at the first maximum, +0
// at the others — without a scatter or a clear first; the pixels no
// window covers (an odd last row or column) are cleared. Rows go 8 or 4
// outputs at a time through maxPoolGrad22x8 and x4, as in maxPool22.
func maxPoolGrad22(dx, dy, x []float32, planes, h, w, oh, ow int) {
	for p := range planes {
		xp, dp := x[p*h*w:(p+1)*h*w], dx[p*h*w:(p+1)*h*w]
		clear(dp[2*oh*w:])
		for oy := range oh {
			r0, r1 := xp[2*oy*w:2*oy*w+w], xp[(2*oy+1)*w:(2*oy+1)*w+w]
			d0, d1 := dp[2*oy*w:2*oy*w+w], dp[(2*oy+1)*w:(2*oy+1)*w+w]
			if w > 2*ow {
				d0[w-1], d1[w-1] = 0, 0
			}
			dyr := dy[(p*oh+oy)*ow : (p*oh+oy+1)*ow]
			switch {
			case !useAVX2 || ow < 4:
				maxPoolGrad22Span(d0, d1, r0, r1, dyr, 0, ow)
			case ow < 8:
				for x0 := 0; x0 < ow; x0 += 4 {
					x0 = min(x0, ow-4)
					if !maxPoolGrad22x4(&d0[2*x0], &d1[2*x0], &r0[2*x0], &r1[2*x0], &dyr[x0]) {
						maxPoolGrad22Span(d0, d1, r0, r1, dyr, x0, x0+4)
					}
				}
			default:
				for x0 := 0; x0 < ow; x0 += 8 {
					x0 = min(x0, ow-8)
					if !maxPoolGrad22x8(&d0[2*x0], &d1[2*x0], &r0[2*x0], &r1[2*x0], &dyr[x0]) {
						maxPoolGrad22Span(d0, d1, r0, r1, dyr, x0, x0+8)
					}
				}
			}
		}
	}
}

// maxPoolGrad22Span is maxPoolGrad22 of outputs lo … hi−1 of a row: dyr
// into the window rows d0 and d1 of dx, by the pixels of r0 and r1.
func maxPoolGrad22Span(d0, d1, r0, r1, dyr []float32, lo, hi int) {
	for ox := lo; ox < hi; ox++ {
		j := 2 * ox
		a, b, c, d := r0[j], r0[j+1], r1[j], r1[j+1]
		m := max(max(a, b), max(c, d))
		g := dyr[ox] + 0
		if m != m { // a NaN: the exact rule
			d0[j], d0[j+1], d1[j], d1[j+1] = 0, 0, 0, 0
			if best := argmaxPair(r0[j:j+2], r1[j:j+2]); best < 2 {
				d0[j+best] = g
			} else {
				d1[j+best-2] = g
			}
			continue
		}
		// The first maximum in row-major order takes g, by masks rather
		// than branches (ties at 0 after a ReLU make branches
		// mispredict): the compiler sets each flag with a conditional
		// move.
		var fa, fb, fc uint32
		if a == m {
			fa = 1
		}
		if b == m {
			fb = 1
		}
		if c == m {
			fc = 1
		}
		gbits := math.Float32bits(g)
		ga := math.Float32frombits(gbits & -fa)
		gb := math.Float32frombits(gbits & -(fb &^ fa))
		gc := math.Float32frombits(gbits & -(fc &^ (fa | fb)))
		gd := math.Float32frombits(gbits & -(1 &^ (fa | fb | fc)))
		d0[j], d0[j+1], d1[j], d1[j+1] = ga, gb, gc, gd
	}
}

// argmaxPair is argmaxWindow of the 2×2 window whose rows are r0[:2] and
// r1[:2], as 0 … 3 in row-major order.
func argmaxPair(r0, r1 []float32) int {
	v := [4]float32{r0[0], r0[1], r1[0], r1[1]}
	return argmaxWindow(v[:], 2, 0, 0, 2)
}

// argmaxWindow is the index in plane x (width w) of the first maximum of
// the k×k window at (y0, x0); NaNs lose to any number.
func argmaxWindow(x []float32, w, y0, x0, k int) int {
	if k == 2 { // LeNet's and most nets' pools, unrolled
		i := y0*w + x0
		best, bv := i, x[i]
		for _, j := range [3]int{i + 1, i + w, i + w + 1} {
			if v := x[j]; v > bv || bv != bv && v == v {
				best, bv = j, v
			}
		}
		return best
	}
	if k == 3 { // AlexNet's overlapping pools: the same rule, unrolled
		i := y0*w + x0
		best, bv := i, x[i]
		for _, j := range [8]int{i + 1, i + 2, i + w, i + w + 1, i + w + 2, i + 2*w, i + 2*w + 1, i + 2*w + 2} {
			if v := x[j]; v > bv || bv != bv && v == v {
				best, bv = j, v
			}
		}
		return best
	}
	return argmaxPadWindow(x, len(x)/w, w, y0, x0, k) // the window lies inside: no cell is clipped
}

// MaxPoolGrad: see kernels.ConvOps.
func (be *Backend) MaxPoolGrad(dx, dy, x kernels.Buffer, planes, h, w, k, stride int) error {
	dxd, dyd, xd := be.data(dx), be.data(dy), be.data(x)
	if err := firstError(
		kernels.CheckPool("cpu.MaxPoolGrad", len(xd), len(dyd), planes, h, w, k, stride),
		checkLen("MaxPoolGrad", "dx", len(dxd), len(xd)),
	); err != nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, 0)
	if k == 2 && stride == 2 {
		maxPoolGrad22(dxd, dyd, xd, planes, h, w, oh, ow)
		return nil
	}
	clear(dxd)
	for p := range planes {
		xp, dp := xd[p*h*w:(p+1)*h*w], dxd[p*h*w:(p+1)*h*w]
		for oy := range oh {
			for ox := range ow {
				dp[argmaxWindow(xp, w, oy*stride, ox*stride, k)] += dyd[(p*oh+oy)*ow+ox]
			}
		}
	}
	return nil
}

// AvgPool: see kernels.ConvOps.
func (be *Backend) AvgPool(y, x kernels.Buffer, planes, h, w, k, stride int) error {
	yd, xd := be.data(y), be.data(x)
	if err := kernels.CheckPool("cpu.AvgPool", len(xd), len(yd), planes, h, w, k, stride); err != nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, 0)
	inv := 1 / float32(k*k)
	for p := range planes {
		xp := xd[p*h*w : (p+1)*h*w]
		for oy := range oh {
			for ox := range ow {
				var s float32
				for i := oy * stride; i < oy*stride+k; i++ {
					for _, v := range xp[i*w+ox*stride : i*w+ox*stride+k] {
						s += v
					}
				}
				yd[(p*oh+oy)*ow+ox] = s * inv
			}
		}
	}
	return nil
}

// AvgPoolGrad: see kernels.ConvOps.
func (be *Backend) AvgPoolGrad(dx, dy kernels.Buffer, planes, h, w, k, stride int) error {
	dxd, dyd := be.data(dx), be.data(dy)
	if err := kernels.CheckPool("cpu.AvgPoolGrad", len(dxd), len(dyd), planes, h, w, k, stride); err != nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, 0)
	inv := 1 / float32(k*k)
	clear(dxd)
	for p := range planes {
		dp := dxd[p*h*w : (p+1)*h*w]
		for oy := range oh {
			for ox := range ow {
				g := dyd[(p*oh+oy)*ow+ox] * inv
				for i := oy * stride; i < oy*stride+k; i++ {
					for j := ox * stride; j < ox*stride+k; j++ {
						dp[i*w+j] += g
					}
				}
			}
		}
	}
	return nil
}
