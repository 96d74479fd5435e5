package collectives

import (
	"fmt"
	"math"
	"unsafe"
)

// Wire is how an AllReduce's messages carry the values: as they are
// (float32) or rounded to 16 bits, two to a float32 word (Allreducer.Wire).
// The sums are always float32: a rank adds a 16-bit message into its
// float32 buffer, and rounds again only to send. Where rounding happens in
// the ring (Allreducer.Wire):
//
//   - each partial sum as it is sent on in the reduce-scatter (n−1 hops:
//     the first is a rank's own values);
//   - each chunk's final sum once, before the all-gather; its owner keeps
//     the rounded value too, so every rank ends with the same bits.
//
// Error feedback, if wanted, is the caller's (Round gives the rounding of
// a rank's own values; the later hops' rounding of partial sums is not
// fed back).
type Wire uint8

const (
	// WireF32 sends the float32 values themselves.
	WireF32 Wire = iota
	// WireF16 sends IEEE binary16, round to nearest even, after multiplying
	// by the Allreducer's Scale (a power of two, exact), which moves
	// gradients into fp16's range (5.96e-8 to 65504) as loss scaling does;
	// a value beyond the range becomes ±Inf, which the trainer's finite
	// check reports.
	WireF16
	// WireBF16 sends bfloat16 (float32's top 16 bits, round to nearest
	// even): float32's range, 8 bits of precision.
	WireBF16
)

var wireNames = [...]string{WireF32: "fp32", WireF16: "fp16", WireBF16: "bf16"}

func (w Wire) String() string {
	if int(w) < len(wireNames) {
		return wireNames[w]
	}
	return fmt.Sprintf("Wire(%d)", uint8(w))
}

// ParseWire reads "fp32" (or "none"), "fp16" or "bf16".
func ParseWire(s string) (Wire, error) {
	switch s {
	case "fp32", "none":
		return WireF32, nil
	case "fp16":
		return WireF16, nil
	case "bf16":
		return WireBF16, nil
	}
	return 0, fmt.Errorf("%q: want none, fp16 or bf16", s)
}

// Round rounds x to w's precision in place (x·scale rounded, then divided
// by scale): what the wire carries of a rank's own values. The difference
// between x before and after is what error feedback keeps.
func Round(w Wire, x []float32, scale float32) {
	if w == WireF32 || len(x) == 0 {
		return
	}
	var tmp [512]uint16
	inv := 1 / scale
	for lo := 0; lo < len(x); lo += len(tmp) {
		hi := min(lo+len(tmp), len(x))
		encode(w, tmp[:hi-lo], x[lo:hi], scale)
		decode(w, x[lo:hi], tmp[:hi-lo], inv, false)
	}
}

// halves views the float32 words p as twice as many uint16s (little
// endian: word k holds elements 2k, low half, and 2k+1).
func halves(p []float32) []uint16 {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(p))), 2*len(p))
}

// encode writes src·scale rounded to w into dst (len(dst) == len(src)).
func encode(w Wire, dst []uint16, src []float32, scale float32) {
	dst = dst[:len(src)]
	if w == WireF16 {
		done := encodeF16Vec(dst, src, scale)
		for i := done; i < len(src); i++ {
			dst[i] = f32ToF16(src[i] * scale)
		}
		return
	}
	for i, v := range src {
		dst[i] = f32ToBF16(v)
	}
}

// decode writes (or with add, adds) src's values times inv into dst.
func decode(w Wire, dst []float32, src []uint16, inv float32, add bool) {
	src = src[:len(dst)]
	if w == WireF16 {
		done := decodeF16Vec(dst, src, inv, add)
		for i := done; i < len(dst); i++ {
			v := f16ToF32(src[i]) * inv
			if add {
				v += dst[i]
			}
			dst[i] = v
		}
		return
	}
	if add {
		for i, h := range src {
			dst[i] += math.Float32frombits(uint32(h) << 16)
		}
		return
	}
	for i, h := range src {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}

// f32ToF16 is IEEE binary16 rounding to nearest even, as F16C's
// VCVTPS2PH with imm 0 (NaNs quieted, their payload's top bits kept).
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b >> 23 & 0xff)
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // a subnormal half, or zero
		if e < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint(14 - e)
		half := uint32(1) << (shift - 1)
		rem, r := man&(1<<shift-1), man>>shift
		if rem > half || rem == half && r&1 == 1 {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | man>>13
	if rem := man & 0x1fff; rem > 0x1000 || rem == 0x1000 && r&1 == 1 {
		r++ // a carry into the exponent is right, up to Inf
	}
	return sign | uint16(r)
}

// f16ToF32 is exact.
func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// f32ToBF16 keeps float32's top 16 bits, rounding to nearest even (NaNs
// quieted).
func f32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
