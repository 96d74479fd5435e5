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

//go:noescape
func lanes8x4AVX2(out, v *float32, n, stride int)

//go:noescape
func copyRowsAVX2(dst *float32, dstStride int, src *float32, srcStride, rows, width int)

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

// lanes8x4 sets out[k*8:k*8+8] to sum8's partial sums over the longest
// multiple of 8 floats of each of the four planes of p floats at v[k*p],
// and returns how many floats of each it did (0 without AVX2).
func lanes8x4(out *[32]float32, v []float32, p int) int {
	n := p &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	_ = v[4*p-1]
	lanes8x4AVX2(&out[0], &v[0], n, p)
	return n
}

// copyRowsVec copies copyRows's rows on the assembly loop where rows are
// at least 8 floats wide, and reports whether it did.
func copyRowsVec(dst []float32, dstStride int, src []float32, srcStride, rows, width int) bool {
	if !useAVX2 || width < 8 {
		return false
	}
	copyRowsAVX2(&dst[0], dstStride, &src[0], srcStride, rows, width)
	return true
}
