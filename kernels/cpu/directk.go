package cpu

// The direct stride-1 k×k convolution (any kernel, padding below it, any
// channel counts): what LeNet's 5×5 layers and a model file's 5×5 or 7×7
// ones run on. Over a zero-padded image whose rows are wp = w+2·pad wide,
// output pixel (r, q) reads tap (ci, ki, kj) at the flat offset
// r·wp+q + ci·plane + ki·wp + kj, so the "wide" output of oh rows of wp
// pixels (the wp−ow at each row's end discarded) is, for every tap, one
// run through memory: the micro-kernels (direct_amd64.s) take the taps'
// offsets from a table and compute 24 wide pixels × 4 output channels
// (forward), or 4 output channels × 3 taps over a run of wide pixels
// (weight gradient). Output channels are padded to a multiple of 4.

// tapOffsets is the byte offset of each tap (ci, ki, kj), in that order,
// in a padded image of c planes of plane floats, rows wp wide; its length
// is rounded up to a multiple of round by repeating the last tap.
func tapOffsets(c, k, wp, plane, round int) []int {
	taps := make([]int, 0, c*k*k+round)
	for ci := range c {
		for ki := range k {
			for kj := range k {
				taps = append(taps, 4*(ci*plane+ki*wp+kj))
			}
		}
	}
	for len(taps)%round != 0 {
		taps = append(taps, taps[len(taps)-1])
	}
	return taps
}

// roundUp is n rounded up to a multiple of m.
func roundUp(n, m int) int { return (n + m - 1) / m * m }

// wideGeometry is a k×k convolution's padded image and wide output: rows
// wp wide, planes of plane floats, npix wide pixels (oh·wp rounded up to
// a multiple of round), and img, the floats of one sample's padded image
// with the zeros the last tile's taps read past its planes.
func wideGeometry(c, h, w, k, pad, round int) (wp, plane, npix, img int) {
	hp := h + 2*pad
	wp = w + 2*pad
	oh := hp - k + 1
	plane = hp * wp
	npix = roundUp(oh*wp, round)
	img = c*plane + npix - oh*wp + k
	return wp, plane, npix, img
}

// convTaps is Conv on the k×k micro-kernel: each sample is copied into a
// padded image, each tile of 4 output channels × 24 wide pixels summed
// over the taps in (ci, ki, kj) order from the bias (or 0) with fused
// multiply-adds, and the valid pixels copied out.
func convTaps(yd, xd, wd, bd []float32, n, c, h, w, o, k, pad int) {
	wp, plane, npix, img := wideGeometry(c, h, w, k, pad, 24)
	oh, ow := h+2*pad-k+1, w+2*pad-k+1
	op := roundUp(o, 4)
	taps := tapOffsets(c, k, wp, plane, 1)
	wt := wd
	if op != o { // the weights with zero output channels up to op
		wt = make([]float32, len(taps)*op)
		for t := range taps {
			copy(wt[t*op:t*op+o], wd[t*o:(t+1)*o])
		}
	}
	bias := make([]float32, op) // the bias, zero up to op
	copy(bias, bd)
	buf, done := paddedImage(img + op*npix)
	defer done()
	xp, yw := buf[:img], buf[img:]
	for s := range n {
		padInto(xp, xd[s*c*h*w:(s+1)*c*h*w], c, h, w, pad)
		for o0 := 0; o0 < op; o0 += 4 {
			for p0 := 0; p0 < npix; p0 += 24 {
				convTapsO4W24(&yw[o0*npix+p0], npix, &xp[p0], &taps[0], len(taps), &wt[o0], op, &bias[o0])
			}
		}
		ys := yd[s*o*oh*ow : (s+1)*o*oh*ow]
		for oc := range o {
			for r := range oh {
				copy(ys[(oc*oh+r)*ow:(oc*oh+r+1)*ow], yw[oc*npix+r*wp:])
			}
		}
	}
}

// convTapsFilter is ConvFilter's weight gradient on the k×k micro-kernel.
// A chunk of samples at a time, the images are copied into padded ones
// and dy into wide planes (zero at the discarded pixels, so they add
// nothing, unless the pixel of x they meet is an Inf or a NaN: 0·Inf is
// NaN, see kernels.DirectConvOps); then for each block of 4 output channels and 3 taps one
// micro-kernel call sums dy·x over the chunk's samples and wide pixels
// into 8 lanes each; the lanes are added in a fixed tree (laneSum), the
// chunks in order.
func convTapsFilter(dwd, xd, dyd []float32, n, c, h, w, o, k, pad int) {
	clear(dwd)
	if n == 0 {
		return
	}
	wp, plane, npix, img := wideGeometry(c, h, w, k, pad, 8)
	oh, ow := h+2*pad-k+1, w+2*pad-k+1
	op := roundUp(o, 4)
	nt := c * k * k
	taps := tapOffsets(c, k, wp, plane, 3)
	// Samples in chunks whose 4 output channels of wide dy (ns·4·npix
	// floats) stay in the L2 cache while every tap reads them.
	ns := max(1, min(n, (64<<10)/(4*npix)))
	buf, done := paddedImage(ns * (img + op*npix))
	defer done()
	xp, dyw := buf[:ns*img], buf[ns*img:]
	var acc [96]float32
	for s0 := 0; s0 < n; s0 += ns {
		kc := min(ns, n-s0)
		for s := range kc {
			padInto(xp[s*img:(s+1)*img], xd[(s0+s)*c*h*w:(s0+s+1)*c*h*w], c, h, w, pad)
			for oc := range o {
				for r := range oh {
					src := dyd[(((s0+s)*o+oc)*oh+r)*ow:][:ow]
					copy(dyw[(s*op+oc)*npix+r*wp:], src)
				}
			}
		}
		for o0 := 0; o0 < op; o0 += 4 {
			for t0 := 0; t0 < nt; t0 += 3 {
				convTapsDW(&acc[0], &dyw[o0*npix], npix, &xp[0], &taps[t0], npix, kc, op*npix, img)
				for j := range min(4, o-o0) {
					for t := range min(3, nt-t0) {
						dwd[(o0+j)*nt+t0+t] += laneSum(acc[(j*3+t)*8:])
					}
				}
			}
		}
	}
}
