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
		maxPool22(yd, xd, planes, h, w, oh, ow, nil, nil)
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

// maxPool22 is the 2×2, stride-2 pool (LeNet's, and most nets'): it
// writes the maxima into y, or, with dy, routes dy to them in dx (already
// zeroed). The maximum is taken with the builtin max, without branches
// (after a ReLU, half the values tie at 0 and branches mispredict); a
// window whose maximum is NaN, where the builtin and argmaxWindow's rule
// differ, goes through argmaxWindow.
func maxPool22(y, x []float32, planes, h, w, oh, ow int, dx, dy []float32) {
	for p := range planes {
		xp := x[p*h*w : (p+1)*h*w]
		for oy := range oh {
			r0 := xp[2*oy*w : 2*oy*w+w]
			r1 := xp[(2*oy+1)*w : (2*oy+1)*w+w]
			o := (p*oh + oy) * ow
			for ox := range ow {
				j := 2 * ox
				a, b, c, d := r0[j], r0[j+1], r1[j], r1[j+1]
				m := max(max(a, b), max(c, d))
				if m != m { // a NaN: the exact rule
					best := argmaxWindow(xp, w, 2*oy, j, 2)
					if dy == nil {
						y[o+ox] = xp[best]
					} else {
						dx[p*h*w+best] += dy[o+ox]
					}
					continue
				}
				if dy == nil {
					y[o+ox] = m
					continue
				}
				// The first of the four equal to the maximum.
				best := (2*oy+1)*w + j + 1
				if c == m {
					best = (2*oy+1)*w + j
				}
				if b == m {
					best = 2*oy*w + j + 1
				}
				if a == m {
					best = 2*oy*w + j
				}
				dx[p*h*w+best] += dy[o+ox]
			}
		}
	}
}

// argmaxWindow is the index in plane x (width w) of the first maximum of
// the k×k window at (y0, x0); NaNs lose to any number.
// maxPoolGrad22 is MaxPoolGrad of the 2×2, stride-2 pool. Its windows do
// not overlap, so each writes its four pixels of dx — the gradient (plus
// +0, as the scatter into a cleared dx added it) at the first maximum, +0
// at the others — without a scatter or a clear first; the pixels no
// window covers (an odd last row or column) are cleared.
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
			for ox, gv := range dy[(p*oh+oy)*ow : (p*oh+oy+1)*ow] {
				j := 2 * ox
				a, b, c, d := r0[j], r0[j+1], r1[j], r1[j+1]
				m := max(max(a, b), max(c, d))
				g := gv + 0
				if m != m { // a NaN: the exact rule
					d0[j], d0[j+1], d1[j], d1[j+1] = 0, 0, 0, 0
					dp[argmaxWindow(xp, w, 2*oy, j, 2)] = g
					continue
				}
				// The first maximum in row-major order takes g, by masks
				// rather than branches (ties at 0 after a ReLU make
				// branches mispredict): the compiler sets each flag with a
				// conditional move.
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
	}
}

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
	best, bv := -1, float32(math.Inf(-1))
	for i := y0; i < y0+k; i++ {
		for j := x0; j < x0+k; j++ {
			if v := x[i*w+j]; best < 0 && !math.IsNaN(float64(v)) || v > bv {
				best, bv = i*w+j, v
			}
		}
	}
	if best < 0 { // all NaN
		best = y0*w + x0
	}
	return best
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
