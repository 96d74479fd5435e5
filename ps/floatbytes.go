package ps

import (
	"math"
	"unsafe"
)

// Bulk float32 helpers for the wire: payload copies and finiteness checks.

// littleEndian is whether this machine stores a float32 in wire order, so
// that float32 payloads can be copied instead of converted one by one.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// float32Bytes views vs as its bytes (no copy).
func float32Bytes(vs []float32) []byte {
	if len(vs) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(vs))), 4*len(vs))
}

// firstNonFinite returns the index of the first NaN or ±Inf in vs, or -1.
// A float32 is not finite when its exponent bits are all ones: adding one
// to the exponent field then carries into bit 31. It checks two floats per
// uint64, 64 floats per block without a branch per value, and searches only
// a block that has one.
func firstNonFinite(vs []float32) int {
	if start := scanVec(vs); start > 0 { // AVX2: 32 floats a step (floatbytes_amd64.s)
		if i := firstNonFiniteSWAR(vs[start:]); i >= 0 {
			return start + i
		}
		return -1
	}
	return firstNonFiniteSWAR(vs)
}

// firstNonFiniteSWAR is firstNonFinite without vector instructions.
func firstNonFiniteSWAR(vs []float32) int {
	const block = 64
	n := len(vs) / block * block
	if n > 0 {
		words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(vs))), n/2)
		const exp, one, top = 0x7f8000007f800000, 0x0080000000800000, 0x8000000080000000
		for start := 0; start < n/2; start += block / 2 {
			// Four independent accumulators; bit 31 (63) of an OR is the OR
			// of the bits 31 (63), so the top bits are masked once.
			var b0, b1, b2, b3 uint64
			ws := words[start : start+block/2]
			for j := 0; j+4 <= len(ws); j += 4 {
				b0 |= ws[j]&exp + one
				b1 |= ws[j+1]&exp + one
				b2 |= ws[j+2]&exp + one
				b3 |= ws[j+3]&exp + one
			}
			if (b0|b1|b2|b3)&top != 0 {
				if i := firstNonFiniteSlow(vs[2*start : 2*start+block]); i >= 0 {
					return 2*start + i
				}
			}
		}
	}
	if i := firstNonFiniteSlow(vs[n:]); i >= 0 {
		return n + i
	}
	return -1
}

func firstNonFiniteSlow(vs []float32) int {
	for i, v := range vs {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return i
		}
	}
	return -1
}
