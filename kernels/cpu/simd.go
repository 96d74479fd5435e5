package cpu

import "github.com/dml-project/dml/kernels/vec"

// The element-wise loops the training step runs on every layer (bias add,
// bias gradient, ReLU and its gradient), written once here in Go and, on
// amd64 with AVX2, also in assembly (simd_amd64.s) for whole blocks of 8
// floats; the Go loops then do the tail. Each assembly loop performs the
// same IEEE operation per element as the Go loop (an add, a compare and a
// mask), so the results are the same bit for bit; simd_test.go checks that,
// special values included. (Two NaN operands of one add may give either
// NaN's payload; no op here adds two buffers that both hold NaN in a
// training step that goes on.)

// addTo sets dst[i] += src[i]; src must be as long as dst and must not
// overlap it.
func addTo(dst, src []float32) {
	src = src[:len(dst)]
	done := addToVec(dst, src)
	src = src[done:]
	for i := range dst[done:] {
		dst[done+i] += src[i]
	}
}

// relu sets y[i] = x[i], or +0 where x[i] < 0 (NaN and -0 stay); y is as
// long as x and may be x.
func relu(y, x []float32) {
	y = y[:len(x)]
	done := reluVec(y, x)
	for i, v := range x[done:] {
		if v < 0 {
			v = 0
		}
		y[done+i] = v
	}
}

// reluGrad sets dx[i] = dy[i] where y[i] > 0, else +0; dx and dy are as
// long as y and dx may be dy.
func reluGrad(dx, dy, y []float32) {
	dx, dy = dx[:len(y)], dy[:len(y)]
	done := reluGradVec(dx, dy, y)
	for i, v := range y[done:] {
		g := dy[done+i]
		if !(v > 0) {
			g = 0
		}
		dx[done+i] = g
	}
}

// nonFinite returns the index of the first NaN or ±Inf in x, or -1.
func nonFinite(x []float32) int { return vec.FirstNonFinite(x) }

// copyRows copies rows rows of width floats from src, rows srcStride
// floats apart, to dst, rows dstStride apart (the rows of an image into
// a padded or wide one, and back): one call for what would be a copy per
// row, which costs more than its bytes on rows as short as a small
// convolution's.
func copyRows(dst []float32, dstStride int, src []float32, srcStride, rows, width int) {
	if rows <= 0 || width <= 0 {
		return
	}
	dst = dst[:(rows-1)*dstStride+width]
	src = src[:(rows-1)*srcStride+width]
	if copyRowsVec(dst, dstStride, src, srcStride, rows, width) {
		return
	}
	for r := range rows {
		copy(dst[r*dstStride:r*dstStride+width], src[r*srcStride:r*srcStride+width])
	}
}
