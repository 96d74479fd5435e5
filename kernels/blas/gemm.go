package blas

import (
	"fmt"
	"math/bits"

	"golang.org/x/sys/cpu"
	"gonum.org/v1/gonum/blas"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/onednn"
)

// oneDNNGemmMin is the product size (m·n·k multiply-adds) from which
// oneDNN's sgemm serves the blas backend's Gemm, OpenBLAS below it.
// Measured on an Intel Xeon with AVX-512, one thread, each shape 20
// times, the two alternating: oneDNN 10–30% faster from 2^20 up (the
// MLP's 64×512×784 layer 342 against 422 µs, LeNet-5's 64×120×400 45
// against 56), mixed between 2^18 and 2^20, and OpenBLAS ahead below
// (16×16×16 0.1 against 0.4 µs, a call's overhead).
var oneDNNGemmMin = 1 << 20

// oneDNNGemmAuto is whether --kernels auto puts oneDNN's sgemm in front:
// only where it was measured to win, AVX-512 CPUs (on AVX2 alone,
// OpenBLAS's kernels are not known to lose).
var oneDNNGemmAuto = cpu.X86.HasAVX512F

// gemmRoute is the blas backend's Sgemm with oneDNN: products of at least
// min multiply-adds on oneDNN, the rest (and any call oneDNN refuses, which
// dml's checked arguments never are) on OpenBLAS. The rule is fixed, not
// measured, so every rank and every run picks alike.
type gemmRoute struct {
	small   openblas
	min     int
	version string
}

func (g gemmRoute) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m*n*k >= g.min {
		if onednn.Sgemm(tA != blas.NoTrans, tB != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == nil {
			return
		}
	}
	g.small.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Provided: see cpu.GemmProvider.
func (g gemmRoute) Provided() kernels.Provided {
	return kernels.Provided{Ops: "gemm", Provider: fmt.Sprintf("onednn %s from 2^%d multiply-adds, openblas below", g.version, bits.Len(uint(g.min))-1)}
}
