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
					for oy := range oh {
						iy := oy*stride + ki - pad
						dst := row[oy*ow : (oy+1)*ow]
						if iy < 0 || iy >= h {
							clear(dst)
							continue
						}
						src := xc[iy*w : (iy+1)*w]
						for ox := range ow {
							if ix := ox*stride + kj - pad; ix >= 0 && ix < w {
								dst[ox] = src[ix]
							} else {
								dst[ox] = 0
							}
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
					for oy := range oh {
						iy := oy*stride + ki - pad
						if iy < 0 || iy >= h {
							continue
						}
						dst := xc[iy*w : (iy+1)*w]
						src := row[oy*ow : (oy+1)*ow]
						for ox := range ow {
							if ix := ox*stride + kj - pad; ix >= 0 && ix < w {
								dst[ix] += src[ox]
							}
						}
					}
				}
			}
		}
	}
	return nil
}

// MaxPool: see kernels.ConvOps.
func (be *Backend) MaxPool(y, x kernels.Buffer, planes, h, w, k, stride int) error {
	yd, xd := be.data(y), be.data(x)
	if err := kernels.CheckPool("cpu.MaxPool", len(xd), len(yd), planes, h, w, k, stride); err != nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, 0)
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

// argmaxWindow is the index in plane x (width w) of the first maximum of
// the k×k window at (y0, x0); NaNs lose to any number.
func argmaxWindow(x []float32, w, y0, x0, k int) int {
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
