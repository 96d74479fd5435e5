package cpu

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.LRNOps = (*Backend)(nil)

// LRN: see kernels.LRNOps. Each value in float64, rounded once.
func (be *Backend) LRN(y, s, x kernels.Buffer, n, c, hw, size int, alpha, beta, k float32) error {
	yd, sd, xd := be.raw(y), be.raw(s), be.data(x)
	if err := kernels.CheckLRN("cpu.LRN", len(xd), n, c, hw, size, len(yd), len(sd)); err != nil {
		return err
	}
	be.output(yd)
	be.output(sd)
	a, b, kk := float64(alpha)/float64(size), float64(beta), float64(k)
	for i := range n {
		for ch := range c {
			lo, hi := max(ch-size/2, 0), min(ch+(size-1)/2, c-1)
			for p := range hw {
				var sum float64
				for q := lo; q <= hi; q++ {
					v := float64(xd[(i*c+q)*hw+p])
					sum += v * v
				}
				at := (i*c+ch)*hw + p
				sc := kk + a*sum
				sd[at] = float32(sc)
				yd[at] = float32(float64(xd[at]) * math.Pow(sc, -b))
			}
		}
	}
	return nil
}

// LRNGrad: see kernels.LRNOps. s is taken as LRN wrote it (float32).
func (be *Backend) LRNGrad(dx, dy, x, s kernels.Buffer, n, c, hw, size int, alpha, beta, k float32) error {
	dxd, dyd, xd, sd := be.raw(dx), be.data(dy), be.data(x), be.data(s)
	if err := kernels.CheckLRN("cpu.LRNGrad", len(xd), n, c, hw, size, len(dxd), len(dyd), len(sd)); err != nil {
		return err
	}
	be.output(dxd)
	b := float64(beta)
	f := 2 * float64(alpha) * b / float64(size)
	for i := range n {
		for ch := range c {
			// The channels whose window holds ch.
			lo, hi := max(ch-(size-1)/2, 0), min(ch+size/2, c-1)
			for p := range hw {
				var sum float64
				for q := lo; q <= hi; q++ {
					at := (i*c+q)*hw + p
					sum += float64(dyd[at]) * float64(xd[at]) * math.Pow(float64(sd[at]), -b-1)
				}
				at := (i*c+ch)*hw + p
				dxd[at] = float32(float64(dyd[at])*math.Pow(float64(sd[at]), -b) - f*float64(xd[at])*sum)
			}
		}
	}
	return nil
}
