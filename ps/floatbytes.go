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
// It checks blocks without branching per value and searches only a block
// that has one (a float32 is not finite when its exponent bits are all ones).
func firstNonFinite(vs []float32) int {
	const block = 64
	for start := 0; start < len(vs); start += block {
		chunk := vs[start:min(start+block, len(vs))]
		bad := uint32(0)
		for _, v := range chunk {
			bad |= (math.Float32bits(v)>>23&0xff + 1) >> 8 // 1 iff exponent 0xff
		}
		if bad != 0 {
			for i, v := range chunk {
				if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
					return start + i
				}
			}
		}
	}
	return -1
}
