//go:build cuda

package cuda

import (
	"math"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/ptx"
)

// Gemm computes C = alpha·op(A)·op(B) + beta·C (row-major; see
// kernels.Backend) with cublasSgemm where cuBLAS serves (TF32 tensor-core
// math for Precision TF32), else with one of the four dml_sgemm kernels, or their TF32
// tensor-core versions when the backend was opened with Precision TF32 on
// a device of compute capability ≥ 8.0. ptx.PickGemm chooses the kernel
// (128×128 tiles, 64×64 for products of few tiles, or TF32) and its grid:
// one block per tile of C (kernels/ptx/abi.go).
func (be *Backend) Gemm(transA, transB bool, m, n, k int, alpha float32, a, b kernels.Buffer, beta float32, c kernels.Buffer) error {
	const op = "Gemm"
	ad, bd, cd := be.buf(a), be.buf(b), be.buf(c)
	if err := be.usable(op); err != nil {
		return err
	}
	if m < 0 || n < 0 || k < 0 || !matrixOK(ad.n, m, k) || !matrixOK(bd.n, k, n) || !matrixOK(cd.n, m, n) {
		return be.shapeErr(op, "m=%d n=%d k=%d transA=%v transB=%v: A has %d elements, B %d, C %d",
			m, n, k, transA, transB, ad.n, bd.n, cd.n)
	}
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 || alpha == 0 {
		// C = beta·C, A and B unread (the BLAS convention); beta == 0
		// overwrites (NaN does not survive).
		if beta == 0 {
			return be.done(op, be.q.memset32(cd.ptr, 0, cd.n), m, n, k)
		}
		if beta == 1 {
			return nil
		}
		return be.done(op, be.launch1D(be.dev.k.scale, cd.n, ptr(cd), i64(cd.n), f32(beta)), m, n, k)
	}
	ap, bp := ad.ptr, bd.ptr
	var err error
	if ap, err = be.rounded(op, 0, ap, ad.n); err != nil {
		return err
	}
	if bp, err = be.rounded(op, 1, bp, bd.n); err != nil {
		return err
	}
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	if be.libs.blas != nil && m <= maxInt32 && n <= maxInt32 && k <= maxInt32 {
		// Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ:
		// the operands swap, each keeps its transposition and leading
		// dimension.
		return be.done(op, blasSgemm(be.q, be.libs.blas, transB, transA, n, m, k, alpha, bp, ldb, ap, lda, beta, cd.ptr, n),
			m, n, k, btoi(transA)*2+btoi(transB))
	}
	g := ptx.PickGemm(transA, transB, be.tf32, m, n, k, be.dev.SMs)
	fns := be.dev.k.gemm
	if g.TF32 {
		fns = be.tf32Gemm
	}
	f, ok := fns[g.Name]
	if !ok {
		panic("cuda: no kernel " + g.Name) // lookup checked every name PickGemm returns
	}
	// The grid's y is clamped to MaxGridY; the kernels loop over the rest.
	gx, gy := g.Grid(m, n)
	if gx > math.MaxInt32 {
		return be.shapeErr(op, "m=%d n=%d k=%d: %d column tiles exceed one launch's grid", m, n, k, gx)
	}
	return be.done(op, be.launch(f, gx, gy, g.Threads,
		i64(m), i64(n), i64(k), f32(alpha), ptrAt(ap), i64(lda), ptrAt(bp), i64(ldb), f32(beta), ptr(cd), i64(n)),
		m, n, k, btoi(transA)*2+btoi(transB))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
