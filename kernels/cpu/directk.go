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
// (weight gradient). Output channels are padded to a multiple of 4. On
// AVX-512 (useZ) the forward tile is 6 output channels × 32 wide pixels
// (channels a multiple of 6) or 4 × 48, and the weight gradient's block 8
// or 6 output channels (padded to a multiple of it): the same sums, so the
// same bits (directz_amd64.s).

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
// padded image, each tile of 4 output channels × 24 wide pixels (on
// AVX-512: 6 × 32 where the channels are a multiple of 6, else 4 × 48)
// summed over the taps in (ci, ki, kj) order from the bias (or 0) with
// fused multiply-adds, and the valid pixels copied out.
func convTaps(yd, xd, wd, bd []float32, n, c, h, w, o, k, pad int) {
	ob, tile, kern := 4, 24, convTapsO4W24
	switch {
	case useZ && o%6 == 0:
		ob, tile, kern = 6, 32, convTapsO6W32
	case useZ:
		tile, kern = 48, convTapsO4W48
	}
	wp, plane, npix, img := wideGeometry(c, h, w, k, pad, tile)
	oh, ow := h+2*pad-k+1, w+2*pad-k+1
	op := roundUp(o, ob)
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
		for o0 := 0; o0 < op; o0 += ob {
			for p0 := 0; p0 < npix; p0 += tile {
				kern(&yw[o0*npix+p0], npix, &xp[p0], &taps[0], len(taps), &wt[o0], op, &bias[o0])
			}
		}
		ys := yd[s*o*oh*ow : (s+1)*o*oh*ow]
		for oc := range o {
			copyRows(ys[oc*oh*ow:], ow, yw[oc*npix:], wp, oh, ow)
		}
	}
}

// convTapsFilter is ConvFilter's weight gradient on the k×k micro-kernel.
// A chunk of samples at a time, the images are copied into padded ones
// and dy into wide planes (zero at the discarded pixels, so they add
// nothing, unless the pixel of x they meet is an Inf or a NaN: 0·Inf is
// NaN, see kernels.DirectConvOps); then the micro-kernels sum dy·x over
// the chunk's samples and wide pixels into 8 lanes for each output
// channel and tap (filterChunk, or filterChunkZ on AVX-512); the lanes are
// added in a fixed tree (laneSum), the chunks in order.
func convTapsFilter(dwd, xd, dyd []float32, n, c, h, w, o, k, pad int) {
	clear(dwd)
	if n == 0 {
		return
	}
	g := filterGeometry(n, c, h, w, o, k, pad)
	buf, done := paddedImage(g.ns*(g.img+g.op*g.npix) + g.accLen())
	defer done()
	xp, dyw, acc := buf[:g.ns*g.img], buf[g.ns*g.img:g.ns*(g.img+g.op*g.npix)], buf[g.ns*(g.img+g.op*g.npix):]
	oh, ow := h+2*pad-k+1, w+2*pad-k+1
	chunk := filterChunk
	if g.z {
		chunk = filterChunkZ
	}
	for s0 := 0; s0 < n; s0 += g.ns {
		kc := min(g.ns, n-s0)
		for s := range kc {
			padInto(xp[s*g.img:(s+1)*g.img], xd[(s0+s)*c*h*w:(s0+s+1)*c*h*w], c, h, w, pad)
			for oc := range o {
				copyRows(dyw[(s*g.op+oc)*g.npix:], g.wp, dyd[((s0+s)*o+oc)*oh*ow:], ow, oh, ow)
			}
		}
		chunk(dwd, xp, dyw, acc, kc, o, &g)
	}
}

// wideFilter is a k×k weight gradient's geometry: wideGeometry's (rounded
// to 8 pixels), nt taps and their offsets (a multiple of 3), ns samples a
// chunk, and on AVX-512 (z, useZ read once) the kernel's: zb output
// channels a block (8, or 6 for 5×5 kernels over a multiple of 6
// channels) and group taps a call: 5 on 5×5 kernels (a kernel row; rows
// holds each row's first tap's offset), else 3. op is the output channels
// padded to a multiple of the block (4 on AVX2).
type wideFilter struct {
	wp, npix, img, op, nt, ns int
	z                         bool
	zb, group                 int
	taps, rows                []int
}

// filterGeometry is the geometry of a weight gradient of n samples.
func filterGeometry(n, c, h, w, o, k, pad int) wideFilter {
	wp, plane, npix, img := wideGeometry(c, h, w, k, pad, 8)
	g := wideFilter{wp: wp, npix: npix, img: img, op: roundUp(o, 4), nt: c * k * k, taps: tapOffsets(c, k, wp, plane, 3)}
	if g.z = useZ; g.z {
		g.zb, g.group = 8, 3
		if k == 5 {
			g.group = 5
			g.rows = make([]int, g.nt/5)
			for r := range g.rows {
				g.rows[r] = g.taps[5*r]
			}
			if o%6 == 0 {
				g.zb = 6
			}
		}
		g.op = roundUp(o, g.zb)
	}
	// Samples in chunks whose 4 output channels of wide dy (ns·4·npix
	// floats) stay in the L2 cache while every tap reads them (the same
	// chunks on AVX-512: their order is the sums').
	g.ns = max(1, min(n, (64<<10)/(4*npix)))
	return g
}

// accLen is the floats of the kernel's lanes: 4 output channels × 3 taps
// × 8 lanes, or on AVX-512 a block's channels × all taps (in whole
// groups) × 8.
func (g *wideFilter) accLen() int {
	if g.z {
		return g.zb * roundUp(g.nt, g.group) * 8
	}
	return 96
}

// filterChunk adds to dwd the weight gradient of a chunk of kc samples
// (padded images xp, wide dy planes dyw) on the AVX2 kernel: for each
// block of 4 output channels and 3 taps one call sums over the chunk's
// samples and wide pixels.
func filterChunk(dwd, xp, dyw, acc []float32, kc, o int, g *wideFilter) {
	for o0 := 0; o0 < g.op; o0 += 4 {
		for t0 := 0; t0 < g.nt; t0 += 3 {
			convTapsDW(&acc[0], &dyw[o0*g.npix], g.npix, &xp[0], &g.taps[t0], g.npix, kc, g.op*g.npix, g.img)
			for j := range min(4, o-o0) {
				for t := range min(3, g.nt-t0) {
					dwd[(o0+j)*g.nt+t0+t] += laneSum(acc[(j*3+t)*8:])
				}
			}
		}
	}
}

// zRun is the wide pixels of a run filterChunkZ's kernels take at once: a
// block of output channels' gradients over it (8 KiB) stay in the L1
// cache while every tap reads them.
const zRun = 256

// filterChunkZ is filterChunk on the AVX-512 kernels, whose lanes add the
// same products in the same order: blocks of zb output channels, and for
// each sample in order and each run of zRun wide pixels in order, one call
// adds the run's products for every tap to their lanes (in groups of 3
// taps, or of a kernel row's 5).
func filterChunkZ(dwd, xp, dyw, acc []float32, kc, o int, g *wideFilter) {
	kern := func(acc, dy, x []float32, run int) {
		convTapsDW8(&acc[0], &dy[0], g.npix, &x[0], &g.taps[0], len(g.taps)/3, run)
	}
	if g.rows != nil {
		row := convRow5DW8
		if g.zb == 6 {
			row = convRow5DW6
		}
		kern = func(acc, dy, x []float32, run int) {
			row(&acc[0], &dy[0], g.npix, &x[0], &g.rows[0], len(g.rows), run)
		}
	}
	pairs := g.zb / 2
	for o0 := 0; o0 < g.op; o0 += g.zb {
		clear(acc)
		for s := range kc {
			for p0 := 0; p0 < g.npix; p0 += zRun {
				kern(acc, dyw[(s*g.op+o0)*g.npix+p0:], xp[s*g.img+p0:], min(zRun, g.npix-p0))
			}
		}
		for j := range min(g.zb, o-o0) {
			for t := range g.nt {
				dwd[(o0+j)*g.nt+t] += laneSum(acc[(t/g.group)*pairs*g.group*16+((j/2)*g.group+t%g.group)*16+(j%2)*8:])
			}
		}
	}
}
