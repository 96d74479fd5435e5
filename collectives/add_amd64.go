package collectives

import "golang.org/x/sys/cpu"

//go:noescape
func addAVX2(dst, src *float32, n int)

var haveAVX2 = cpu.X86.HasAVX2

// addVec adds src into dst with AVX2 when the CPU has it; ok is false
// when it does not (the caller falls back to portable code).
func addVec(dst, src []float32) (ok bool) {
	if !haveAVX2 {
		return false
	}
	if len(dst) > 0 {
		addAVX2(&dst[0], &src[0], len(dst))
	}
	return true
}
