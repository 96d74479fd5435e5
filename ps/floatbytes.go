package ps

import (
	"unsafe"

	"github.com/dml-project/dml/kernels/vec"
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

// firstNonFinite returns the index of the first NaN or ±Inf in vs, or -1
// (kernels/vec: AVX2 where the CPU has it).
func firstNonFinite(vs []float32) int { return vec.FirstNonFinite(vs) }
