//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly loops; the tests turn it off to compare.
var useAVX2 = cpu.X86.HasAVX2

// The assembly loops (simd_amd64.s) take n, a multiple of 8, elements.

//go:noescape
func addToAVX2(dst, src *float32, n int)

//go:noescape
func reluAVX2(y, x *float32, n int)

//go:noescape
func reluGradAVX2(dx, dy, y *float32, n int)

// addToVec runs addTo's assembly loop over the longest multiple of 8
// elements and returns how many it did.
func addToVec(dst, src []float32) int {
	n := len(dst) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	addToAVX2(&dst[0], &src[0], n)
	return n
}

func reluVec(y, x []float32) int {
	n := len(x) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	reluAVX2(&y[0], &x[0], n)
	return n
}

func reluGradVec(dx, dy, y []float32) int {
	n := len(y) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	reluGradAVX2(&dx[0], &dy[0], &y[0], n)
	return n
}
