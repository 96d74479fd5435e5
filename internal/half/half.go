// Package half converts between float32 and the two 16-bit formats dml
// sends: IEEE 754 binary16 and bfloat16 (the parameter server's fp16 and
// bf16 push filters, and the AllReduce's 16-bit wire in collectives, whose
// F16C code gives the same bits as Float32ToFloat16).
package half

import "math"

// IEEE 754 binary16 ("float16": 1 sign, 5 exponent, 10 mantissa bits) and
// bfloat16 (1 sign, 8 exponent, 7 mantissa bits: the top half of a float32).
// Both conversions from float32 round to nearest, ties to even; overflow
// gives ±Inf, NaN stays NaN (made quiet, sign kept).

// Float16Max is the largest finite float16, 65504.
const Float16Max = 65504

// Float32ToFloat16 converts f to the nearest float16 (ties to even).
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00 // ±Inf
		}
		return sign | 0x7e00 | uint16(mant>>13) // quiet NaN, top payload bits kept
	}
	e := exp - 127 + 15 // float16 biased exponent
	if e >= 0x1f {
		return sign | 0x7c00 // too large even before rounding
	}
	if e >= 1 {
		// Normal float16: drop 13 mantissa bits with round to nearest even.
		// A carry out of the mantissa bumps the exponent, and from the
		// largest exponent to 0x7c00 = Inf, which is the correct overflow.
		// Branch-free: add just under half an ulp, plus one when the kept
		// part is odd (ties to even), then drop the 13 bits.
		x := uint32(e)<<23 | mant
		x += 0xfff + (x>>13)&1
		return sign | uint16(x>>13)
	}
	// Subnormal float16 (or zero): the value is m * 2^(exp-150) with the
	// implicit bit restored; in units of the float16 subnormal step 2^-24
	// that is m >> shift with shift = 126 - exp.
	if exp == 0 {
		return sign // float32 subnormals are far below 2^-25
	}
	m := mant | 0x800000
	shift := uint(126 - exp) // >= 14 here
	if shift > 24 {
		return sign // below half the smallest subnormal
	}
	h := m >> shift
	rest := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rest > half || (rest == half && h&1 == 1) {
		h++ // may carry into the smallest normal, 0x0400: correct
	}
	return sign | uint16(h)
}

// Float16ToFloat32 converts h exactly (every float16 is a float32).
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1f
	m := uint32(h & 0x3ff)
	switch {
	case e == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | m<<13)
	case e == 0 && m == 0:
		return math.Float32frombits(sign)
	case e == 0:
		// Subnormal: m * 2^-24; normalise into a float32 normal.
		e32 := uint32(127 - 14)
		for m&0x400 == 0 {
			m <<= 1
			e32--
		}
		return math.Float32frombits(sign | e32<<23 | (m&0x3ff)<<13)
	default:
		return math.Float32frombits(sign | (e+127-15)<<23 | m<<13)
	}
}

// Float32ToBFloat16 converts f to the nearest bfloat16 (ties to even).
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7f800000 == 0x7f800000 && b&0x7fffff != 0 {
		return uint16(b>>16) | 0x40 // NaN: keep sign and payload top, make quiet
	}
	b += 0x7fff + (b>>16)&1 // round to nearest even; overflow carries to Inf
	return uint16(b >> 16)
}

// BFloat16ToFloat32 converts h exactly.
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
