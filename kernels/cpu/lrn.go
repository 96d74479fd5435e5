package cpu

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.LRNOps = (*Backend)(nil)

// LRN: see kernels.LRNOps. Per sample: the squares once, each channel's
// window summed over a plane at a time, s^−β once per value; float64,
// rounded once.
func (be *Backend) LRN(y, s, x kernels.Buffer, n, c, hw, size int, alpha, beta, k float32) error {
	yd, sd, xd := be.raw(y), be.raw(s), be.data(x)
	if err := kernels.CheckLRN("cpu.LRN", len(xd), n, c, hw, size, len(yd), len(sd)); err != nil {
		return err
	}
	be.output(yd)
	be.output(sd)
	a, b, kk := float64(alpha)/float64(size), float64(beta), float64(k)
	sq, acc := be.f64(0, c*hw), be.f64(1, hw)
	for i := range n {
		xs := xd[i*c*hw : (i+1)*c*hw]
		for j, v := range xs {
			sq[j] = float64(v) * float64(v)
		}
		for ch := range c {
			clear(acc)
			for q := max(ch-size/2, 0); q <= min(ch+(size-1)/2, c-1); q++ {
				for p, v := range sq[q*hw : (q+1)*hw] {
					acc[p] += v
				}
			}
			at := (i*c + ch) * hw
			for p := range hw {
				sc := kk + a*acc[p]
				sd[at+p] = float32(sc)
				yd[at+p] = float32(float64(xs[ch*hw+p]) * powNeg(sc, b))
			}
		}
	}
	return nil
}

// LRNGrad: see kernels.LRNOps. s is taken as LRN wrote it (float32); per
// sample, t = dy·x·s^(−β−1) once per value, then each channel's window of
// t summed over a plane at a time.
func (be *Backend) LRNGrad(dx, dy, x, s kernels.Buffer, n, c, hw, size int, alpha, beta, k float32) error {
	dxd, dyd, xd, sd := be.raw(dx), be.data(dy), be.data(x), be.data(s)
	if err := kernels.CheckLRN("cpu.LRNGrad", len(xd), n, c, hw, size, len(dxd), len(dyd), len(sd)); err != nil {
		return err
	}
	be.output(dxd)
	b := float64(beta)
	f := 2 * float64(alpha) * b / float64(size)
	pw, t, acc := be.f64(0, c*hw), be.f64(1, c*hw), be.f64(2, hw)
	for i := range n {
		off := i * c * hw
		for j := range c * hw {
			sc := float64(sd[off+j])
			pw[j] = powNeg(sc, b)
			t[j] = float64(dyd[off+j]) * float64(xd[off+j]) * pw[j] / sc
		}
		for ch := range c {
			// The channels whose window holds ch.
			clear(acc)
			for q := max(ch-(size-1)/2, 0); q <= min(ch+size/2, c-1); q++ {
				for p, v := range t[q*hw : (q+1)*hw] {
					acc[p] += v
				}
			}
			at := ch * hw
			for p := range hw {
				dxd[off+at+p] = float32(float64(dyd[off+at+p])*pw[at+p] - f*float64(xd[off+at+p])*acc[p])
			}
		}
	}
	return nil
}

// powNeg is s^−b, with the usual exponents (AlexNet's 0.75, and 0.5, 1)
// in square roots and a division rather than math.Pow.
func powNeg(s, b float64) float64 {
	switch b {
	case 0.75:
		r := math.Sqrt(s)
		return 1 / (r * math.Sqrt(r))
	case 0.5:
		return 1 / math.Sqrt(s)
	case 1:
		return 1 / s
	}
	return math.Pow(s, -b)
}

// f64 is the backend's float64 scratch slot i, at least n long (its
// contents are the last user's).
func (be *Backend) f64(i, n int) []float64 {
	if len(be.wide[i]) < n {
		be.wide[i] = make([]float64, n)
	}
	return be.wide[i][:n]
}
