package collectives

import (
	"fmt"
	"unsafe"

	"github.com/dml-project/dml/internal/half"
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
// between x before and after is what error feedback keeps. A scale of 0
// means 1, as Allreducer.Scale's does.
func Round(w Wire, x []float32, scale float32) {
	if w == WireF32 || len(x) == 0 {
		return
	}
	if scale == 0 {
		scale = 1
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
			dst[i] = half.Float32ToFloat16(src[i] * scale)
		}
		return
	}
	for i, v := range src {
		dst[i] = half.Float32ToBFloat16(v)
	}
}

// decode writes (or with add, adds) src's values times inv into dst.
func decode(w Wire, dst []float32, src []uint16, inv float32, add bool) {
	src = src[:len(dst)]
	if w == WireF16 {
		done := decodeF16Vec(dst, src, inv, add)
		for i := done; i < len(dst); i++ {
			v := half.Float16ToFloat32(src[i]) * inv
			if add {
				v += dst[i]
			}
			dst[i] = v
		}
		return
	}
	if add {
		for i, h := range src {
			dst[i] += half.BFloat16ToFloat32(h)
		}
		return
	}
	for i, h := range src {
		dst[i] = half.BFloat16ToFloat32(h)
	}
}
