package cpu

import (
	"sync"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.DirectConvOps = (*Backend)(nil)

// ConvSupports: see kernels.DirectConvOps. Any stride-1 convolution
// whose padding is less than its kernel (so that its input gradient, the
// convolution of dY at padding k−1−pad, is one too), on a CPU with AVX2
// and FMA3.
func (be *Backend) ConvSupports(c, h, w, o, k, pad int) bool {
	oh, ow := kernels.DirectOut(h, w, k, pad)
	return useDirect && c > 0 && h > 0 && w > 0 && o > 0 && k > 0 && pad >= 0 && pad < k && oh > 0 && ow > 0
}

// DirectISA: see kernels.DirectISAReporter. The k×k kernels' instruction
// set ("k×k on AVX-512": the 3×3 tiles are AVX2's either way), or "" where
// the direct convolutions do not run.
func (be *Backend) DirectISA() string {
	switch {
	case useZ:
		return "k×k on AVX-512"
	case useDirect:
		return "AVX2"
	}
	return ""
}

// tiled3x3 reports whether the 3×3 micro-kernels run the shape: 3×3
// kernels at padding 1, 4 output channels × 16 pixels of a row or 8 × 8,
// and the weight gradient 4 output channels × 3 taps over rows of 8; rows
// a multiple of 8 wide, output channels a multiple of 4 (rows of 16, 32,
// …) or 8. Other shapes run on the k×k kernels (directk.go).
func tiled3x3(h, w, o, k, pad int) bool {
	return k == 3 && pad == 1 && w%8 == 0 && o%4 == 0 && (w%16 == 0 || o%8 == 0)
}

// direct is the slices of a direct op's buffers after its checks; db is
// nil when the bias is.
func (be *Backend) direct(op string, y, x, wt, bias kernels.Buffer, n, c, h, w, o, k, pad int) (yd, xd, wd, bd []float32, err error) {
	yd, xd, wd = be.data(y), be.data(x), be.data(wt)
	bLen := -1
	if bias != nil {
		bd = be.data(bias)
		bLen = len(bd)
	}
	if err := kernels.CheckDirectConv(op, len(yd), len(xd), len(wd), bLen, n, c, h, w, o, k, pad); err != nil {
		return nil, nil, nil, nil, err
	}
	if !be.ConvSupports(c, h, w, o, k, pad) {
		return nil, nil, nil, nil, kernels.UnsupportedConv(op, c, h, w, o, k, pad)
	}
	return yd, xd, wd, bd, nil
}

// Conv: see kernels.DirectConvOps. 3×3 kernels at padding 1 of the shapes
// tiled3x3 accepts run on the 3×3 micro-kernels (the bias added after);
// every other shape on the k×k ones.
func (be *Backend) Conv(y, x, wt, bias kernels.Buffer, n, c, h, w, o, k, pad int) error {
	yd, xd, wd, bd, err := be.direct("cpu.Conv", y, x, wt, bias, n, c, h, w, o, k, pad)
	if err != nil {
		return err
	}
	xd, wd = be.rounded(0, xd), be.rounded(1, wd)
	if !tiled3x3(h, w, o, k, pad) {
		convTaps(yd, xd, wd, bd, n, c, h, w, o, k, pad)
		return nil
	}
	conv3x3(yd, xd, wd, n, c, h, w, o)
	if bd != nil {
		for s := range n {
			for oc, b := range bd {
				plane := yd[(s*o+oc)*h*w : (s*o+oc+1)*h*w]
				for i := range plane {
					plane[i] += b
				}
			}
		}
	}
	return nil
}

// ConvFilter: see kernels.DirectConvOps. The bias gradient is each
// channel's sum over a sample's plane (sum8), then over the samples in
// order.
func (be *Backend) ConvFilter(dw, db, x, dy kernels.Buffer, n, c, h, w, o, k, pad int) error {
	dyd, xd, dwd, dbd, err := be.direct("cpu.ConvFilter", dy, x, dw, db, n, c, h, w, o, k, pad)
	if err != nil {
		return err
	}
	dyd, xd = be.rounded(0, dyd), be.rounded(1, xd)
	if tiled3x3(h, w, o, k, pad) {
		conv3x3Filter(dwd, xd, dyd, n, c, h, w, o)
	} else {
		convTapsFilter(dwd, xd, dyd, n, c, h, w, o, k, pad)
	}
	if dbd != nil {
		biasGrad(dbd, dyd, n, o, len(dyd)/max(1, n*o))
	}
	return nil
}

// biasGrad sets dbd[oc] to the sum over the samples, in order, of sum8
// of dy's planes of p floats for channel oc; four planes at a time on the
// assembly loop (the same partial sums, so the same bits; where two NaNs
// meet, either's payload, as simd.go says).
func biasGrad(dbd, dyd []float32, n, o, p int) {
	clear(dbd)
	planes, i := n*o, 0
	var lanes [32]float32
	for ; i+4 <= planes; i += 4 {
		done := lanes8x4(&lanes, dyd[i*p:(i+4)*p], p)
		if done == 0 {
			break
		}
		for k := range 4 {
			dbd[(i+k)%o] += sum8From(lanes[k*8:k*8+8], dyd[(i+k)*p+done:(i+k+1)*p])
		}
	}
	for ; i < planes; i++ {
		dbd[i%o] += sum8(dyd[i*p : (i+1)*p])
	}
}

// sum8 is the sum of v in 8 interleaved partial sums (v[i] into sum i
// mod 8, in order; the tail's v[i] into sum i−start), added in laneSum's
// tree. The partial sums are separate variables, so that they stay in
// registers.
func sum8(v []float32) float32 {
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(v); i += 8 {
		c := v[i : i+8 : i+8]
		s0 += c[0]
		s1 += c[1]
		s2 += c[2]
		s3 += c[3]
		s4 += c[4]
		s5 += c[5]
		s6 += c[6]
		s7 += c[7]
	}
	return sum8From([]float32{s0, s1, s2, s3, s4, s5, s6, s7}, v[i:])
}

// sum8From is sum8's end: the tail's v[j] into partial sum j of s (8
// floats, changed), then laneSum.
func sum8From(s, tail []float32) float32 {
	for j, x := range tail {
		s[j] += x
	}
	return laneSum(s)
}

// padded holds zero-padded images (a sample's, or a chunk of samples')
// between calls.
var padded = sync.Pool{New: func() any { return new([]float32) }}

// conv3x3 is Conv on the 3×3 micro-kernels. Each sample is copied into a
// zero-padded image ((h+2)×(w+2) per channel), then every tile of the
// output is one micro-kernel call, which sums over the input channels and
// the 9 taps, in that order, with fused multiply-adds.
func conv3x3(yd, xd, wd []float32, n, c, h, w, o int) {
	pw, ph := w+2, h+2
	xp, done := paddedImage(c * ph * pw)
	defer done()
	tileO, tileW, kern := 4, 16, conv3x3o4w16
	if w%16 != 0 { // then o is a multiple of 8 (tiled3x3)
		tileO, tileW, kern = 8, 8, conv3x3o8w8
	}
	for s := range n {
		padInto(xp, xd[s*c*h*w:(s+1)*c*h*w], c, h, w, 1)
		ys := yd[s*o*h*w : (s+1)*o*h*w]
		for o0 := 0; o0 < o; o0 += tileO {
			for r := range h {
				for x0 := 0; x0 < w; x0 += tileW {
					kern(&ys[(o0*h+r)*w+x0], h*w, &xp[r*pw+x0], pw, ph*pw, &wd[o0], o, c)
				}
			}
		}
	}
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
// (h+2·pad)×(w+2·pad) whose borders stay 0.
func padInto(xp, xs []float32, c, h, w, pad int) {
	pw, ph := w+2*pad, h+2*pad
	for ci := range c {
		copyRows(xp[(ci*ph+pad)*pw+pad:], pw, xs[ci*h*w:], w, h, w)
	}
}

// conv3x3Filter is ConvFilter's weight gradient on the 3×3
// micro-kernel. The batch is copied, a chunk of samples at a time, into
// zero-padded images; then for each block of 4 output channels, input
// channel and kernel row one micro-kernel call sums dy·x over the chunk's
// samples and planes into 8 lanes for each of the 4×3 taps; the lanes are
// added in a fixed tree (laneSum), the chunks in order.
func conv3x3Filter(dwd, xd, dyd []float32, n, c, h, w, o int) {
	clear(dwd)
	if n == 0 {
		return
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
			padInto(xp[s*img:(s+1)*img], xd[(s0+s)*c*h*w:(s0+s+1)*c*h*w], c, h, w, 1)
		}
		for o0 := 0; o0 < o; o0 += 4 {
			for ci := range c {
				for ky := range 3 {
					conv3x3dw(&acc[0], &dyd[(s0*o+o0)*h*w], h*w, &xp[(ci*ph+ky)*pw], pw, h, w, k, o*h*w, img)
					for j := range 4 {
						for kx := range 3 {
							dwd[((o0+j)*c+ci)*9+ky*3+kx] += laneSum(acc[(j*3+kx)*8:])
						}
					}
				}
			}
		}
	}
}

// laneSum adds a micro-kernel's 8 lanes a[:8] in a fixed tree.
func laneSum(a []float32) float32 {
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}
