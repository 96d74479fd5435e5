//go:build cuda

package cuda

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// Mixed precision (kernels.BF16, FP16) on the GPU: before each product —
// Gemm on cuBLAS or our kernels, a convolution on cuDNN — its operands are
// rounded to bfloat16 or half (dml_round) into scratch buffers, and the
// product runs on the copies with TF32 tensor-core math (cuBLAS's TF32
// mode, cuDNN's default math, our TF32 GEMMs on compute capability ≥ 8.0;
// below that our FP32 ones). A bfloat16 or half value has at most 11
// significant bits and an exponent TF32 holds, so the tensor cores take
// it exactly, and each product of two is exact in float32: the result is
// that of bf16/fp16 inputs with float32 accumulation (PyTorch's autocast
// for matrix products and convolutions), and the same bits as the CPU's
// emulation wherever the sums run in the same order.
//
// Departure from autocast, said in the docs: the buffers stay float32 —
// activations are stored at float32 and rounded again by each product
// that reads them — so memory traffic is fp32's, plus one rounding pass
// per operand. What is faster is the arithmetic only.

// PrecisionNote: see kernels.PrecisionReporter.
func (be *Backend) PrecisionNote() string {
	if !be.prec.Rounds() {
		return ""
	}
	how := "TF32 tensor cores"
	if !be.tf32 {
		how = "float32 arithmetic (no TF32 tensor cores below compute capability 8.0)"
	}
	return fmt.Sprintf("%v products (operands rounded to %v, float32 sums, on %s; buffers float32)", be.prec, be.prec, how)
}

// rounded returns the n elements at p rounded to the backend's precision
// in scratch slot (one per operand of an op), or p itself when the
// backend does not round. The scratch grows to the largest operand seen:
// a step's first run, op by op, sizes it before a CUDA graph records the
// step, so a recording allocates nothing. A smaller block it outgrows is
// not given back to the pool (Close frees it): a recorded graph may still
// write into it.
func (be *Backend) rounded(op string, slot int, p devPtr, n int) (devPtr, error) {
	if !be.prec.Rounds() || n == 0 {
		return p, nil
	}
	s := be.rounds[slot]
	if s == nil || s.class < n*4 {
		var err error
		if s, err = be.allocate(n * 4); err != nil {
			return 0, be.deviceErr(op, fmt.Sprintf("rounding scratch of %d elements", n), err)
		}
		be.rounds[slot] = s
	}
	fp16 := 0
	if be.prec == kernels.FP16 {
		fp16 = 1
	}
	if err := be.launch1D(be.dev.k.round, n, ptrAt(s.ptr), ptrAt(p), i64(n), i64(fp16)); err != nil {
		return 0, be.deviceErr(op, "rounding an operand", err)
	}
	return s.ptr, nil
}

// rounded2 is rounded for an op's two operands, a in slot 0 and b in 1.
func (be *Backend) rounded2(op string, a, b *Buffer) (devPtr, devPtr, error) {
	ap, err := be.rounded(op, 0, a.ptr, a.n)
	if err != nil {
		return 0, 0, err
	}
	bp, err := be.rounded(op, 1, b.ptr, b.n)
	return ap, bp, err
}
