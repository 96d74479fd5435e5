package kernels

import (
	"fmt"

	"github.com/dml-project/dml/internal/half"
)

// Precision is the arithmetic of a backend's matrix products: Gemm, and a
// convolution's forward product and both gradients, whichever kernel or
// library runs them. Everything else — what buffers hold, batch norm, the
// loss, the optimizer, the gradient exchange — is float32 at every
// precision.
type Precision int

const (
	// FP32 is plain float32 arithmetic everywhere (the default).
	FP32 Precision = iota
	// TF32 lets the products round their operands to TF32 (10-bit
	// mantissa) on tensor cores; accumulation stays float32. Backends
	// without such units compute FP32.
	TF32
	// BF16 rounds every product's operands to bfloat16 (8-bit mantissa,
	// float32's range; round to nearest even) and sums in float32: the
	// arithmetic of PyTorch's autocast to bfloat16 for matrix products
	// and convolutions. The operands are rounded on every backend (on a
	// CPU that is an emulation, no faster than FP32), so a run's accuracy
	// is the same wherever it is checked.
	BF16
	// FP16 is BF16 with IEEE half precision (11-bit mantissa, largest
	// finite 65504, subnormals down to 2^-24): an operand beyond 65504
	// becomes ±Inf, one below 2^-25 zero. Training in FP16 needs loss
	// scaling (the trainer's --loss-scale) so that small gradients do not
	// vanish and overflows are caught.
	FP16
)

var precisionNames = [...]string{FP32: "fp32", TF32: "tf32", BF16: "bf16", FP16: "fp16"}

// String returns the name the command line uses.
func (p Precision) String() string {
	if p >= 0 && int(p) < len(precisionNames) {
		return precisionNames[p]
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision reads "fp32", "tf32", "bf16" or "fp16".
func ParsePrecision(s string) (Precision, error) {
	for p, n := range precisionNames {
		if s == n {
			return Precision(p), nil
		}
	}
	return 0, fmt.Errorf("unknown precision %q (want fp32, tf32, bf16 or fp16)", s)
}

// Rounds reports whether p rounds the products' operands on every backend
// (BF16, FP16), not only where tensor cores do (TF32).
func (p Precision) Rounds() bool { return p == BF16 || p == FP16 }

// Round writes src rounded to p's format (round to nearest even; past
// the largest finite, ±Inf; a NaN stays a NaN) into dst, as float32
// values (internal/half's conversions); dst may be src. For FP32 and TF32 it copies.
// The lengths must match.
func (p Precision) Round(dst, src []float32) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("kernels: Round of %d elements into %d", len(src), len(dst)))
	}
	switch p {
	case BF16:
		for i, v := range src {
			dst[i] = half.BFloat16ToFloat32(half.Float32ToBFloat16(v))
		}
	case FP16:
		for i, v := range src {
			dst[i] = half.Float16ToFloat32(half.Float32ToFloat16(v))
		}
	default:
		copy(dst, src)
	}
}
