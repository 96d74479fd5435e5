package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// TestRoundedOperands: at BF16 and FP16 every product (Gemm, the direct
// convolution and its filter gradient) gives, bit for bit, the FP32
// product of its operands rounded to that precision, and not the FP32
// product of the operands as they are: the rounding is there, on every
// operand, done once.
func TestRoundedOperands(t *testing.T) {
	for _, p := range []kernels.Precision{kernels.BF16, kernels.FP16} {
		lo, ref := directBackend(t), New()
		lo.SetPrecision(p)
		r := rand.New(rand.NewPCG(5, 6))
		round := func(x []float32) []float32 {
			y := make([]float32, len(x))
			p.Round(y, x)
			return y
		}
		// same runs op on both backends, lo on xs and ref on xs rounded
		// (rounded[i] says which operands are), and compares the outputs.
		same := func(what string, out int, rounded []bool, op func(be *Backend, y kernels.Buffer, in []kernels.Buffer) error, xs ...[]float32) {
			t.Helper()
			run := func(be *Backend, round func([]float32) []float32) []float32 {
				in := make([]kernels.Buffer, len(xs))
				for i, x := range xs {
					if rounded[i] {
						x = round(x)
					}
					in[i] = be.mustLoad(t, x)
				}
				y := be.mustLoad(t, make([]float32, out))
				if err := op(be, y, in); err != nil {
					t.Fatalf("%v %s: %v", p, what, err)
				}
				return slices.Clone(be.data(y))
			}
			keep := func(x []float32) []float32 { return x }
			got, want := run(lo, keep), run(ref, round)
			if !slices.Equal(got, want) {
				t.Errorf("%v %s: not the FP32 product of the rounded operands", p, what)
			}
			if slices.Equal(got, run(ref, keep)) {
				t.Errorf("%v %s: the FP32 product of the unrounded operands", p, what)
			}
		}
		both := []bool{true, true}
		const m, n, k = 9, 13, 70
		for _, tr := range [][2]bool{{false, false}, {true, true}} {
			same("Gemm", m*n, both, func(be *Backend, c kernels.Buffer, in []kernels.Buffer) error {
				return be.Gemm(tr[0], tr[1], m, n, k, 1, in[0], in[1], 0, c)
			}, randn(r, m*k), randn(r, k*n))
		}
		for _, s := range directShapes[:4] {
			oh, ow := kernels.DirectOut(s.h, s.w, s.k, s.pad)
			x, wt, dy := randn(r, s.n*s.c*s.h*s.w), randn(r, s.c*s.k*s.k*s.o), randn(r, s.n*s.o*oh*ow)
			same("Conv", s.n*s.o*oh*ow, both, func(be *Backend, y kernels.Buffer, in []kernels.Buffer) error {
				return be.Conv(y, in[0], in[1], nil, s.n, s.c, s.h, s.w, s.o, s.k, s.pad)
			}, x, wt)
			same("ConvFilter", len(wt), both, func(be *Backend, dw kernels.Buffer, in []kernels.Buffer) error {
				return be.ConvFilter(dw, nil, in[0], in[1], s.n, s.c, s.h, s.w, s.o, s.k, s.pad)
			}, x, dy)
		}
		// Per-element ops stay float32.
		x := randn(r, 100)
		same1 := func(be *Backend) []float32 {
			xb, yb := be.mustLoad(t, x), be.mustLoad(t, make([]float32, 100))
			if err := be.Relu(yb, xb); err != nil {
				t.Fatal(err)
			}
			return slices.Clone(be.data(yb))
		}
		if !slices.Equal(same1(lo), same1(ref)) {
			t.Errorf("%v: Relu rounded its input", p)
		}
	}
}

// TestRoundValues pins Precision.Round at the edges: ties to even, the
// largest finite values and past them, FP16's subnormals and underflow,
// NaN kept.
func TestRoundValues(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		p       kernels.Precision
		in, out float32
	}{
		{kernels.BF16, 1 + 0x1p-8, 1},                    // a tie: to even (down)
		{kernels.BF16, 1 + 3*0x1p-8, 1 + 0x1p-6},         // a tie: to even (up)
		{kernels.BF16, 1 + 0x1p-8 + 0x1p-20, 1 + 0x1p-7}, // past the tie
		{kernels.BF16, math.MaxFloat32, inf},             // rounds past the largest bf16
		{kernels.BF16, 1e-40, 0x1p-133},                  // float32 subnormals keep 7 bits too
		{kernels.FP16, 65504, 65504},
		{kernels.FP16, 65520, inf}, // halfway to 2^16: to even, which is past the largest
		{kernels.FP16, -7e4, -inf},
		{kernels.FP16, 0x1p-24, 0x1p-24},       // the smallest subnormal
		{kernels.FP16, 0x1p-25, 0},             // half of it: a tie, to even (zero)
		{kernels.FP16, 1.5 * 0x1p-25, 0x1p-24}, // above the tie
		{kernels.FP16, 1 + 0x1p-11, 1},         // a tie at 1
		{kernels.FP16, 1 + 0x1p-11 + 0x1p-20, 1 + 0x1p-10},
	} {
		got := []float32{c.in}
		c.p.Round(got, got)
		if got[0] != c.out {
			t.Errorf("%v.Round(%g) = %g, want %g", c.p, c.in, got[0], c.out)
		}
	}
	for _, p := range []kernels.Precision{kernels.BF16, kernels.FP16} {
		got := []float32{float32(math.NaN())}
		p.Round(got, got)
		if !math.IsNaN(float64(got[0])) {
			t.Errorf("%v.Round(NaN) = %g", p, got[0])
		}
	}
}
