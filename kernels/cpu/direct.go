package cpu

import (
	"sync"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.DirectConvOps = (*Backend)(nil)

// Conv3x3Supports: see kernels.DirectConvOps. The micro-kernels compute 4
// output channels × 16 pixels of a row, or 8 × 8: rows a multiple of 8
// wide, output channels a multiple of 4 (rows of 16, 32, …) or 8.
func (be *Backend) Conv3x3Supports(c, h, w, o int) bool {
	return useDirect && c > 0 && h > 0 && w > 0 && w%8 == 0 && (w%16 == 0 && o%4 == 0 || o%8 == 0) && o > 0
}

// padded holds one sample's zero-padded image between calls.
var padded = sync.Pool{New: func() any { return new([]float32) }}

// Conv3x3: see kernels.DirectConvOps. Each sample is copied into a
// zero-padded image ((h+2)×(w+2) per channel), then every tile of the
// output is one micro-kernel call, which sums over the input channels and
// the 9 taps, in that order, with fused multiply-adds.
func (be *Backend) Conv3x3(y, x, wt kernels.Buffer, n, c, h, w, o int) error {
	yd, xd, wd := be.data(y), be.data(x), be.data(wt)
	if err := kernels.CheckConv3x3("cpu.Conv3x3", len(yd), len(xd), len(wd), n, c, h, w, o); err != nil {
		return err
	}
	if !be.Conv3x3Supports(c, h, w, o) {
		return kernels.Unsupported3x3("cpu.Conv3x3", c, h, w, o)
	}
	pw, ph := w+2, h+2
	pp := padded.Get().(*[]float32)
	defer padded.Put(pp)
	if cap(*pp) < c*ph*pw {
		*pp = make([]float32, c*ph*pw)
	}
	xp := (*pp)[:c*ph*pw]
	clear(xp)
	tileO, tileW, kern := 4, 16, conv3x3o4w16
	if w%16 != 0 || o%4 != 0 {
		tileO, tileW, kern = 8, 8, conv3x3o8w8
	}
	for s := range n {
		xs := xd[s*c*h*w : (s+1)*c*h*w]
		for ci := range c {
			for r := range h {
				copy(xp[(ci*ph+r+1)*pw+1:(ci*ph+r+1)*pw+1+w], xs[(ci*h+r)*w:(ci*h+r+1)*w])
			}
		}
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
