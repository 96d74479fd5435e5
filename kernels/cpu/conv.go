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
	img, plane := c*h*w, oh*ow
	o := 0
	for s := range n {
		xs := xd[s*img : (s+1)*img]
		for ci := range c {
			xc := xs[ci*h*w : (ci+1)*h*w]
			for ki := range k {
				for kj := range k {
					row := cd[o : o+plane]
					o += plane
					lo, hi := validCols(ow, w, kj, stride, pad)
					for oy := range oh {
						iy := oy*stride + ki - pad
						dst := row[oy*ow : (oy+1)*ow]
						if iy < 0 || iy >= h || lo >= hi {
							clear(dst)
							continue
						}
						src := xc[iy*w : (iy+1)*w]
						clear(dst[:lo])
						clear(dst[hi:])
						if stride == 1 {
							copy(dst[lo:hi], src[lo+kj-pad:hi+kj-pad])
							continue
						}
						for ox := lo; ox < hi; ox++ {
							dst[ox] = src[ox*stride+kj-pad]
						}
					}
				}
			}
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
	img, plane := c*h*w, oh*ow
	clear(dd)
	o := 0
	for s := range n {
		xs := dd[s*img : (s+1)*img]
		for ci := range c {
			xc := xs[ci*h*w : (ci+1)*h*w]
			for ki := range k {
				for kj := range k {
					row := cd[o : o+plane]
					o += plane
					lo, hi := validCols(ow, w, kj, stride, pad)
					for oy := range oh {
						iy := oy*stride + ki - pad
						if iy < 0 || iy >= h || lo >= hi {
							continue
						}
						dst := xc[iy*w : (iy+1)*w]
						src := row[oy*ow : (oy+1)*ow]
						if stride == 1 {
							d := dst[lo+kj-pad : hi+kj-pad]
							for j, v := range src[lo:hi] {
								d[j] += v
							}
							continue
						}
						for ox := lo; ox < hi; ox++ {
							dst[ox*stride+kj-pad] += src[ox]
						}
					}
				}
			}
		}
	}
	return nil
}

// validCols is the range [lo, hi) of output columns ox whose input column
// ox·stride + kj − pad lies inside a row of w.
func validCols(ow, w, kj, stride, pad int) (lo, hi int) {
	// ox·stride ≥ pad − kj  and  ox·stride ≤ w − 1 + pad − kj.
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
	clear(dxd)
	if k == 2 && stride == 2 {
		maxPool22(nil, xd, planes, h, w, oh, ow, dxd, dyd)
		return nil
	}
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
