package cpu

import (
	"github.com/dml-project/dml/kernels"
)

// Mixed precision on the CPU (kernels.BF16, FP16): each product's
// operands are rounded into scratch copies before the product runs in
// float32, which is what a GPU's bf16 or fp16 tensor cores compute (their
// products of two rounded operands are exact in float32, their sums
// float32). It is an emulation: no faster than FP32 here, and there so
// that a run's accuracy at a precision can be checked on any machine,
// and the GPU's results compared with it.

// SetPrecision sets the arithmetic of the backend's products (the zero
// value: FP32). TF32 computes FP32 (no tensor cores). It is set before
// the backend's first op.
func (be *Backend) SetPrecision(p kernels.Precision) { be.prec = p }

// PrecisionNote: see kernels.PrecisionReporter.
func (be *Backend) PrecisionNote() string {
	if !be.prec.Rounds() {
		return ""
	}
	return be.prec.String() + " products (operands rounded, float32 sums; emulated on the CPU, no faster)"
}

// rounded returns src rounded to the backend's precision in scratch copy
// slot (each operand of one op its own slot), or src itself when the
// precision rounds nothing. The copy keeps src's layout (rounding is per
// element), which the caller passes on as src's.
func (be *Backend) rounded(slot int, src []float32) []float32 {
	if !be.prec.Rounds() {
		return src
	}
	s := be.scratch[slot]
	if cap(s) < len(src) {
		s = make([]float32, len(src))
		be.scratch[slot] = s
	}
	s = s[:len(src)]
	be.prec.Round(s, src)
	return s
}
