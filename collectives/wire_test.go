package collectives

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/internal/half"
)

// TestF16CMatchesScalar: the F16C conversions give internal/half's bits
// (which half_test checks against exact rounding), on random bit patterns
// and values at every scale, NaN payloads included, with a scale, and the
// decode is exact.
func TestF16CMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []float32{0, float32(math.Copysign(0, -1)), 1, 65504, 65519, 65520, 1e5, 5.96e-8, 2.98e-8, 2.99e-8, 1e-9, -3.3e-6,
		float32(math.Inf(-1)), 1.0009765625, 1.00048828125, 1.000732421875}
	for len(xs) < 200000 {
		xs = append(xs, math.Float32frombits(rng.Uint32()))
		xs = append(xs, float32(rng.NormFloat64()*math.Pow(2, float64(rng.IntN(50)-30))))
	}
	n := len(xs) &^ 7
	vec := make([]uint16, n)
	const scale = 64
	if encodeF16Vec(vec, xs[:n], scale) == 0 {
		t.Skip("no F16C on this CPU: internal/half's scalar code is the only path")
	}
	for i, x := range xs[:n] {
		if s := half.Float32ToFloat16(x * scale); vec[i] != s {
			t.Fatalf("F16C(%#x × %d) = %#x, scalar %#x", math.Float32bits(x), scale, vec[i], s)
		}
	}
	dec := make([]float32, n)
	decodeF16Vec(dec, vec, 1.0/scale, false)
	for i, h := range vec {
		if s := half.Float16ToFloat32(h) / scale; math.Float32bits(dec[i]) != math.Float32bits(s) && s == s {
			t.Fatalf("F16C decode(%#x) = %v, scalar %v", h, dec[i], s)
		}
	}
	sum := make([]float32, n)
	for i := range sum {
		sum[i] = float32(i)
	}
	decodeF16Vec(sum, vec, 1.0/scale, true)
	for i, h := range vec {
		if s := float32(i) + half.Float16ToFloat32(h)/scale; math.Float32bits(sum[i]) != math.Float32bits(s) && s == s {
			t.Fatalf("F16C decode-add(%#x) = %v, scalar %v", h, sum[i], s)
		}
	}
}

// TestRoundScaleZero: Round reads a scale of 0 as 1, as Allreducer.Scale
// does (else it would give NaN: x·0 rounded, times 1/0).
func TestRoundScaleZero(t *testing.T) {
	for _, w := range []Wire{WireF16, WireBF16} {
		a, b := []float32{1.0001, -3.3e-3, 0}, []float32{1.0001, -3.3e-3, 0}
		Round(w, a, 0)
		Round(w, b, 1)
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Errorf("%v: Round(%v, scale 0) = %v, scale 1 gives %v", w, b[i], a[i], b[i])
			}
		}
	}
}
