//go:build !purego

package cpu

import "golang.org/x/sys/cpu"

// useFMA selects gelu_amd64.s's loops, which need AVX2 and FMA; the tests
// turn it off to compare with the Go loops.
var useFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func geluAVX2(y, x *float32, n int)

//go:noescape
func geluGradAVX2(dx, dy, x *float32, n int)

//go:noescape
func expAVX2(y, x *float32, n int)

// geluVec runs geluAVX2 over the longest multiple of 8 elements and
// returns how many it did (so do geluGradVec and expVec).
func geluVec(y, x []float32) int {
	n := len(x) &^ 7
	if !useFMA || n == 0 {
		return 0
	}
	geluAVX2(&y[0], &x[0], n)
	return n
}

func geluGradVec(dx, dy, x []float32) int {
	n := len(x) &^ 7
	if !useFMA || n == 0 {
		return 0
	}
	geluGradAVX2(&dx[0], &dy[0], &x[0], n)
	return n
}

func expVec(y, x []float32) int {
	n := len(x) &^ 7
	if !useFMA || n == 0 {
		return 0
	}
	expAVX2(&y[0], &x[0], n)
	return n
}
