package collectives

import (
	"gonum.org/v1/gonum/blas/blas32"
)

// addInto sets dst[i] += src[i] (len(src) ≥ len(dst)). On amd64 with AVX2
// it runs an assembly loop (add_amd64.s), elsewhere gonum's AXPY with
// alpha 1 (SSE on amd64); BenchmarkAddInto compares them with a plain loop.
// All three round identically: each element gets one IEEE addition.
func addInto(dst, src []float32) {
	n := len(dst)
	if n == 0 {
		return
	}
	src = src[:n]
	if addVec(dst, src) {
		return
	}
	addIntoAxpy(dst, src)
}

func addIntoAxpy(dst, src []float32) {
	blas32.Axpy(1, blas32.Vector{N: len(dst), Inc: 1, Data: src}, blas32.Vector{N: len(dst), Inc: 1, Data: dst})
}

// addIntoLoop is the plain loop addInto replaced; kept for the benchmark.
func addIntoLoop(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

// scale sets x[i] *= a.
func scale(x []float32, a float32) {
	if len(x) == 0 || a == 1 {
		return
	}
	blas32.Scal(a, blas32.Vector{N: len(x), Inc: 1, Data: x})
}
