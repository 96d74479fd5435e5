package cpu

import (
	"sync"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.DirectConvOps = (*Backend)(nil)

// Conv3x3Supports: see kernels.DirectConvOps. The micro-kernels compute 4
// output channels × 16 pixels of a row, or 8 × 8, and the weight gradient
// 4 output channels × 3 taps over rows of 8: rows a multiple of 8 wide,
// output channels a multiple of 4 (rows of 16, 32, …) or 8.
func (be *Backend) Conv3x3Supports(c, h, w, o int) bool {
	return useDirect && c > 0 && h > 0 && w > 0 && o > 0 && w%8 == 0 && o%4 == 0 && (w%16 == 0 || o%8 == 0)
}

// check3x3 checks the direct ops' lengths (y or dy, x, the weights) and
// that the shape is one they run.
func (be *Backend) check3x3(op string, yLen, xLen, wLen, n, c, h, w, o int) error {
	if err := kernels.CheckConv3x3(op, yLen, xLen, wLen, n, c, h, w, o); err != nil {
		return err
	}
	if !be.Conv3x3Supports(c, h, w, o) {
		return kernels.Unsupported3x3(op, c, h, w, o)
	}
	return nil
}

// padded holds zero-padded images (a sample's, or a chunk of samples')
// between calls.
var padded = sync.Pool{New: func() any { return new([]float32) }}

// Conv3x3: see kernels.DirectConvOps. Each sample is copied into a
// zero-padded image ((h+2)×(w+2) per channel), then every tile of the
// output is one micro-kernel call, which sums over the input channels and
// the 9 taps, in that order, with fused multiply-adds.
func (be *Backend) Conv3x3(y, x, wt kernels.Buffer, n, c, h, w, o int) error {
	yd, xd, wd := be.data(y), be.data(x), be.data(wt)
	if err := be.check3x3("cpu.Conv3x3", len(yd), len(xd), len(wd), n, c, h, w, o); err != nil {
		return err
	}
	pw, ph := w+2, h+2
	xp, done := paddedImage(c * ph * pw)
	defer done()
	tileO, tileW, kern := 4, 16, conv3x3o4w16
	if w%16 != 0 { // then o is a multiple of 8 (Conv3x3Supports)
		tileO, tileW, kern = 8, 8, conv3x3o8w8
	}
	for s := range n {
		padInto(xp, xd[s*c*h*w:(s+1)*c*h*w], c, h, w)
		ys := yd[s*o*h*w : (s+1)*o*h*w]
		for o0 := 0; o0 < o; o0 += tileO {
			for r := range h {
				for x0 := 0; x0 < w; x0 += tileW {
					kern(&ys[(o0*h+r)*w+x0], h*w, &xp[r*pw+x0], pw, ph*pw, &wd[o0], o, c)
				}
			}
		}
	}
	return nil
}

// paddedImage is a zeroed slice of n floats for padded images, from a
// pool; done gives it back.
func paddedImage(n int) (xp []float32, done func()) {
	pp := padded.Get().(*[]float32)
	if cap(*pp) < n {
		*pp = make([]float32, n)
	}
	xp = (*pp)[:n]
	clear(xp)
	return xp, func() { padded.Put(pp) }
}

// padInto copies the c×h×w image xs into the interior of xp, c planes of
// (h+2)×(w+2) whose borders stay 0.
func padInto(xp, xs []float32, c, h, w int) {
	pw, ph := w+2, h+2
	for ci := range c {
		for r := range h {
			copy(xp[(ci*ph+r+1)*pw+1:(ci*ph+r+1)*pw+1+w], xs[(ci*h+r)*w:(ci*h+r+1)*w])
		}
	}
}

// Conv3x3Filter: see kernels.DirectConvOps. The batch is copied, a chunk
// of samples at a time, into zero-padded images; then for each block of
// 4 output channels, input channel and kernel row one micro-kernel call
// sums dy·x over the chunk's samples and planes into 8 lanes for each of
// the 4×3 taps; the lanes are added in a fixed tree, the chunks in order.
func (be *Backend) Conv3x3Filter(dw, x, dy kernels.Buffer, n, c, h, w, o int) error {
	dwd, xd, dyd := be.data(dw), be.data(x), be.data(dy)
	if err := be.check3x3("cpu.Conv3x3Filter", len(dyd), len(xd), len(dwd), n, c, h, w, o); err != nil {
		return err
	}
	clear(dwd)
	if n == 0 {
		return nil
	}
	pw, ph := w+2, h+2
	img := c * ph * pw
	// Samples in chunks whose 4 output channels of dy (ns·4·h·w floats)
	// stay in the L2 cache while every input channel and kernel row reads
	// them.
	ns := max(1, min(n, (64<<10)/(4*h*w)))
	xp, done := paddedImage(ns * img)
	defer done()
	var acc [96]float32
	for s0 := 0; s0 < n; s0 += ns {
		k := min(ns, n-s0)
		for s := range k {
			padInto(xp[s*img:(s+1)*img], xd[(s0+s)*c*h*w:(s0+s+1)*c*h*w], c, h, w)
		}
		for o0 := 0; o0 < o; o0 += 4 {
			for ci := range c {
				for ky := range 3 {
					conv3x3dw(&acc[0], &dyd[(s0*o+o0)*h*w], h*w, &xp[(ci*ph+ky)*pw], pw, h, w, k, o*h*w, img)
					for j := range 4 {
						for kx := range 3 {
							a := acc[(j*3+kx)*8 : (j*3+kx+1)*8]
							dwd[((o0+j)*c+ci)*9+ky*3+kx] += ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
						}
					}
				}
			}
		}
	}
	return nil
}
