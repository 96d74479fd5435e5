package cpu

// The per-(sample, channel) loops of Im2col and Col2im. The planes of the
// presets are small (8×8 to 32×32), so each image row of a cols row is
// only 8 to 32 floats: these loops avoid a memmove or memclr call per
// image row where a plain loop or one larger call is cheaper, copy a
// stride-1 "same" convolution's rows whole (one copy, then zeros over the
// padding), skip the divisions at stride 1, and gather Col2im's 3×3 sums
// in registers, writing each pixel once. They move and add exactly what
// the plain loops did, in the same order (a pixel's terms in increasing
// (ki, kj) order, from +0), so the results are the same bit for bit.

// im2colPlane writes the k·k rows (of oh·ow each, rs apart) of one
// sample's channel xc (h×w) into rows.
func im2colPlane(rows, xc []float32, rs, h, w, k, stride, pad, oh, ow int) {
	plane := oh * ow
	for ki := range k {
		// The output rows oy whose image row oy·stride + ki − pad exists.
		oyLo, oyHi := validCols(oh, h, ki, stride, pad)
		for kj := range k {
			row := rows[(ki*k+kj)*rs : (ki*k+kj)*rs+plane]
			lo, hi := validCols(ow, w, kj, stride, pad)
			if lo >= hi || oyLo >= oyHi {
				clear(row)
				continue
			}
			zeroFloats(row[:oyLo*ow])
			zeroFloats(row[oyHi*ow:])
			off := kj - pad
			switch {
			case stride == 1 && ow == w:
				// row[p] = xc[p + d] for every valid entry: one copy of
				// the valid rows, then zeros over the columns that fall
				// outside the image (where the copy took a neighbouring
				// row's edge). A p whose p + d is outside xc is such a
				// column.
				d := (ki-pad)*w + off
				a, b := max(oyLo*ow, -d), min(oyHi*ow, len(xc)-d)
				if a < b {
					copyFloats(row[a:b], xc[a+d:b+d])
				}
				if lo > 0 || hi < ow {
					for oy := oyLo; oy < oyHi; oy++ {
						r := row[oy*ow : oy*ow+ow]
						zeroSmall(r[:lo])
						zeroSmall(r[hi:])
					}
				}
			case stride == 1:
				for oy := oyLo; oy < oyHi; oy++ {
					iy := oy + ki - pad
					r := row[oy*ow : oy*ow+ow]
					zeroSmall(r[:lo])
					zeroSmall(r[hi:])
					copy(r[lo:hi], xc[iy*w+lo+off:iy*w+hi+off])
				}
			default: // the plain loop: at stride 2 it beat the variants tried
				for oy := oyLo; oy < oyHi; oy++ {
					iy := oy*stride + ki - pad
					dst, src := row[oy*ow:(oy+1)*ow], xc[iy*w:(iy+1)*w]
					clear(dst[:lo])
					clear(dst[hi:])
					for ox := lo; ox < hi; ox++ {
						dst[ox] = src[ox*stride+off]
					}
				}
			}
		}
	}
}

// col2imPlane sets xc (h×w, one sample's channel) to the sum of the k·k
// rows (of oh·ow each, rs apart) of rows scattered back, adding to each
// pixel in increasing (ki, kj) order from +0.
func col2imPlane(xc, rows []float32, rs, h, w, k, stride, pad, oh, ow int) {
	if k == 3 && stride == 1 {
		col2im3x3(xc, rows, rs, h, w, pad, oh, ow)
		return
	}
	plane := oh * ow
	clear(xc)
	for ki := range k {
		oyLo, oyHi := validCols(oh, h, ki, stride, pad)
		for kj := range k {
			row := rows[(ki*k+kj)*rs : (ki*k+kj)*rs+plane]
			lo, hi := validCols(ow, w, kj, stride, pad)
			if lo >= hi {
				continue
			}
			off := kj - pad
			for oy := oyLo; oy < oyHi; oy++ {
				iy := oy*stride + ki - pad
				src := row[oy*ow+lo : oy*ow+hi]
				if stride == 1 {
					dst := xc[iy*w+lo+off : iy*w+hi+off]
					dst = dst[:len(src)]
					for i, v := range src {
						dst[i] += v
					}
					continue
				}
				dst := xc[iy*w+lo*stride+off : iy*w+(hi-1)*stride+off+1]
				if stride == 2 {
					for i, v := range src {
						dst[2*i] += v
					}
					continue
				}
				for i, v := range src {
					dst[i*stride] += v
				}
			}
		}
	}
}

// col2im3x3 is col2imPlane for a 3×3 kernel at stride 1: each pixel sums
// its (up to) nine terms in registers, in (ki, kj) order, and is written
// once.
func col2im3x3(xc, rows []float32, rs, h, w, pad, oh, ow int) {
	// Pixel (iy, ix) takes row (ki, kj) at oy = iy + pad − ki, ox = ix +
	// pad − kj. All nine exist for iy in [pad−... ] where oy is in range for
	// ki = 0 and 2, likewise for ix.
	yLo, yHi := max(2-pad, 0), min(oh-pad, h) // iy+pad−2 ≥ 0, iy+pad ≤ oh−1
	xLo, xHi := max(2-pad, 0), min(ow-pad, w)
	if yLo >= yHi || xLo >= xHi {
		for iy := range h {
			for ix := range w {
				xc[iy*w+ix] = col2imPixel(rows, rs, iy, ix, 3, pad, oh, ow)
			}
		}
		return
	}
	for iy := range h {
		d := xc[iy*w : iy*w+w]
		if iy < yLo || iy >= yHi {
			for ix := range d {
				d[ix] = col2imPixel(rows, rs, iy, ix, 3, pad, oh, ow)
			}
			continue
		}
		for ix := 0; ix < xLo; ix++ {
			d[ix] = col2imPixel(rows, rs, iy, ix, 3, pad, oh, ow)
		}
		for ix := xHi; ix < w; ix++ {
			d[ix] = col2imPixel(rows, rs, iy, ix, 3, pad, oh, ow)
		}
		// Row (ki, kj) at pixel ix = xLo: (iy + pad − ki)·ow + xLo + pad − kj.
		n := xHi - xLo
		at := func(ki, kj int) []float32 {
			o := (ki*3+kj)*rs + (iy+pad-ki)*ow + xLo + pad - kj
			return rows[o : o+n]
		}
		r00, r01, r02 := at(0, 0), at(0, 1), at(0, 2)
		r10, r11, r12 := at(1, 0), at(1, 1), at(1, 2)
		r20, r21, r22 := at(2, 0), at(2, 1), at(2, 2)
		dst := d[xLo:xHi]
		r00, r01, r02 = r00[:len(dst)], r01[:len(dst)], r02[:len(dst)]
		r10, r11, r12 = r10[:len(dst)], r11[:len(dst)], r12[:len(dst)]
		r20, r21, r22 = r20[:len(dst)], r21[:len(dst)], r22[:len(dst)]
		for i := range dst {
			var s float32
			s += r00[i]
			s += r01[i]
			s += r02[i]
			s += r10[i]
			s += r11[i]
			s += r12[i]
			s += r20[i]
			s += r21[i]
			s += r22[i]
			dst[i] = s
		}
	}
}

// col2imPixel is the sum, from +0 in (ki, kj) order, of the terms of a
// stride-1 k×k Col2im at pixel (iy, ix).
func col2imPixel(rows []float32, rs, iy, ix, k, pad, oh, ow int) float32 {
	var s float32
	for ki := range k {
		oy := iy + pad - ki
		if oy < 0 || oy >= oh {
			continue
		}
		for kj := range k {
			ox := ix + pad - kj
			if ox < 0 || ox >= ow {
				continue
			}
			s += rows[(ki*k+kj)*rs+oy*ow+ox]
		}
	}
	return s
}

// copyFloats copies s into d (as long; they must not overlap), in blocks
// of 8 without a call for short lengths.
func copyFloats(d, s []float32) {
	n := len(d)
	s = s[:n]
	if n >= 64 {
		copy(d, s)
		return
	}
	if n < 8 {
		for i := range d {
			d[i] = s[i]
		}
		return
	}
	i := 0
	for ; i+8 <= n; i += 8 {
		v := *(*[8]float32)(s[i:]) // through a local: no overlap, no memmove
		*(*[8]float32)(d[i:]) = v
	}
	if i < n { // the last 8, overlapping what is done
		v := *(*[8]float32)(s[n-8:])
		*(*[8]float32)(d[n-8:]) = v
	}
}

// zeroFloats sets d to +0, without a call for short lengths.
func zeroFloats(d []float32) {
	n := len(d)
	if n >= 64 {
		clear(d)
		return
	}
	if n < 8 {
		zeroSmall(d)
		return
	}
	i := 0
	for ; i+8 <= n; i += 8 {
		*(*[8]float32)(d[i:]) = [8]float32{}
	}
	if i < n {
		*(*[8]float32)(d[n-8:]) = [8]float32{}
	}
}

// zeroSmall sets the few elements of d to +0 one by one (a loop the
// compiler does not turn into a memclr call).
func zeroSmall(d []float32) {
	for i := len(d) - 1; i >= 0; i-- {
		d[i] = 0
	}
}
