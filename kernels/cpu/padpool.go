package cpu

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.PadPoolOps = (*Backend)(nil)

// MaxPoolPad: see kernels.PadPoolOps.
func (be *Backend) MaxPoolPad(y, x kernels.Buffer, planes, h, w, k, stride, pad int) error {
	yd, xd := be.data(y), be.data(x)
	if err := kernels.CheckPadPool("cpu.MaxPoolPad", len(xd), len(yd), planes, h, w, k, stride, pad); err != nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	for p := range planes {
		xp := xd[p*h*w : (p+1)*h*w]
		for oy := range oh {
			for ox := range ow {
				yd[(p*oh+oy)*ow+ox] = xp[argmaxPadWindow(xp, h, w, oy*stride-pad, ox*stride-pad, k)]
			}
		}
	}
	return nil
}

// MaxPoolPadGrad: see kernels.PadPoolOps.
func (be *Backend) MaxPoolPadGrad(dx, dy, x kernels.Buffer, planes, h, w, k, stride, pad int) error {
	dxd, dyd, xd := be.data(dx), be.data(dy), be.data(x)
	if err := firstError(
		kernels.CheckPadPool("cpu.MaxPoolPadGrad", len(xd), len(dyd), planes, h, w, k, stride, pad),
		checkLen("MaxPoolPadGrad", "dx", len(dxd), len(xd)),
	); err != nil {
		return err
	}
	oh, ow := kernels.ConvOut(h, w, k, stride, pad)
	clear(dxd)
	for p := range planes {
		xp, dp := xd[p*h*w:(p+1)*h*w], dxd[p*h*w:(p+1)*h*w]
		for oy := range oh {
			for ox := range ow {
				dp[argmaxPadWindow(xp, h, w, oy*stride-pad, ox*stride-pad, k)] += dyd[(p*oh+oy)*ow+ox]
			}
		}
	}
	return nil
}

// argmaxPadWindow is argmaxWindow over the cells of the k×k window at
// (y0, x0) that lie inside the h×w image (y0, x0 may be negative).
func argmaxPadWindow(x []float32, h, w, y0, x0, k int) int {
	best, bv := -1, float32(math.Inf(-1))
	for i := max(y0, 0); i < min(y0+k, h); i++ {
		for j := max(x0, 0); j < min(x0+k, w); j++ {
			if v := x[i*w+j]; best < 0 && !math.IsNaN(float64(v)) || v > bv {
				best, bv = i*w+j, v
			}
		}
	}
	if best < 0 { // all NaN
		best = max(y0, 0)*w + max(x0, 0)
	}
	return best
}
