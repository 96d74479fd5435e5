package cpu

import (
	"gonum.org/v1/gonum/blas"

	"github.com/dml-project/dml/kernels"
)

// Gemm computes C = alpha·op(A)·op(B) + beta·C with op(A) m×k, op(B) k×n and
// C m×n, all row-major and contiguous; transA means A is stored k×m, transB
// that B is stored n×k. As in BLAS, beta == 0 overwrites C without reading
// it, and alpha == 0 or k == 0 reads neither A nor B. C must not overlap A
// or B.
func (be *Backend) Gemm(transA, transB bool, m, n, k int, alpha float32, a, b kernels.Buffer, beta float32, c kernels.Buffer) error {
	ad, bd, cd := be.data(a), be.data(b), be.data(c)
	if err := firstError(
		checkMatrix("Gemm", "a", len(ad), m, k),
		checkMatrix("Gemm", "b", len(bd), k, n),
		checkMatrix("Gemm", "c", len(cd), m, n),
	); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 || alpha == 0 {
		// gonum wants lda >= 1 and a non-empty A even when k == 0; the
		// answer is only the scaling of C anyway.
		scaleOrZero(cd, beta)
		return nil
	}
	tA, lda := blas.NoTrans, k
	if transA {
		tA, lda = blas.Trans, m
	}
	tB, ldb := blas.NoTrans, n
	if transB {
		tB, ldb = blas.Trans, k
	}
	be.blas.Sgemm(tA, tB, m, n, k, alpha, be.rounded(0, ad), lda, be.rounded(1, bd), ldb, beta, cd, n)
	return nil
}

// scaleOrZero sets x = beta·x, with beta == 0 meaning x = 0 whatever x held.
func scaleOrZero(x []float32, beta float32) {
	switch beta {
	case 1:
	case 0:
		clear(x)
	default:
		scale(beta, x)
	}
}
