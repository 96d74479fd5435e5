package collectives

import "golang.org/x/sys/cpu"

var haveF16C = cpu.X86.HasAVX && cpu.X86.HasF16C

//go:noescape
func encodeF16AVX(dst *uint16, src *float32, n int, scale float32)

//go:noescape
func decodeF16AVX(dst *float32, src *uint16, n int, inv float32, add bool)

// encodeF16Vec converts the first multiple of 8 of src with F16C (the same
// rounding as f32ToF16) and returns how many it did.
func encodeF16Vec(dst []uint16, src []float32, scale float32) int {
	n := len(src) &^ 7
	if !haveF16C || n == 0 {
		return 0
	}
	encodeF16AVX(&dst[0], &src[0], n, scale)
	return n
}

// decodeF16Vec is encodeF16Vec's inverse (exact), times inv, added to
// dst with add.
func decodeF16Vec(dst []float32, src []uint16, inv float32, add bool) int {
	n := len(dst) &^ 7
	if !haveF16C || n == 0 {
		return 0
	}
	decodeF16AVX(&dst[0], &src[0], n, inv, add)
	return n
}
