package collectives

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// halfRef rounds x to binary16 with math/big's exact round-to-nearest-even
// (the reference for f32ToF16, independent of its bit manipulations).
func halfRef(x float32) float32 {
	if x != x || math.IsInf(float64(x), 0) {
		return x
	}
	f := new(big.Float).SetFloat64(float64(x))
	a := math.Abs(float64(x))
	prec := uint(11)
	if a < math.Ldexp(1, -14) { // subnormal: a fixed step of 2^-24
		e := math.Ldexp(1, -24)
		q := math.RoundToEven(float64(x) / e)
		return float32(q * e)
	}
	f.SetPrec(prec).SetMode(big.ToNearestEven)
	v, _ := f.Float64()
	if math.Abs(v) > 65504 {
		return float32(math.Copysign(math.Inf(1), v))
	}
	return float32(v)
}

// TestF16Scalar: f32ToF16 rounds as math/big does, f16ToF32 is its exact
// inverse on every one of the 65536 halves, and the F16C path gives the
// scalar bits (where the CPU has it).
func TestF16Scalar(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		x := f16ToF32(uint16(h))
		if x != x {
			if f32ToF16(x)&0x7e00 != 0x7e00 {
				t.Fatalf("NaN %#x round trip = %#x", h, f32ToF16(x))
			}
			continue
		}
		if back := f32ToF16(x); back != uint16(h) && !(x == 0 && back&0x7fff == 0) {
			t.Fatalf("half %#x → %v → %#x", h, x, back)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []float32{0, -0, 1, 65504, 65519, 65520, 1e5, 5.96e-8, 2.98e-8, 2.99e-8, 1e-9, -3.3e-6, float32(math.Inf(-1)), 1.0009765625, 1.00048828125, 1.000732421875}
	for len(xs) < 200000 {
		xs = append(xs, math.Float32frombits(rng.Uint32()))
		xs = append(xs, float32(rng.NormFloat64()*math.Pow(2, float64(rng.IntN(50)-30))))
	}
	for _, x := range xs {
		if x != x {
			continue
		}
		got, want := f16ToF32(f32ToF16(x)), halfRef(x)
		if got != want && !(got == 0 && want == 0) {
			t.Fatalf("f32ToF16(%v (%#x)) = %v, math/big %v", x, math.Float32bits(x), got, want)
		}
	}
	// Vector against scalar (every lane, including NaN payloads).
	n := len(xs) &^ 7
	vec := make([]uint16, n)
	if encodeF16Vec(vec, xs[:n], 1) == 0 {
		t.Skip("no F16C on this CPU: the scalar path is the only one")
	}
	for i, x := range xs[:n] {
		if s := f32ToF16(x); vec[i] != s {
			t.Fatalf("F16C(%#x) = %#x, scalar %#x", math.Float32bits(x), vec[i], s)
		}
	}
	dec := make([]float32, n)
	decodeF16Vec(dec, vec, 0.5, false)
	for i, h := range vec {
		if s := f16ToF32(h) * 0.5; math.Float32bits(dec[i]) != math.Float32bits(s) && s == s {
			t.Fatalf("F16C decode(%#x) = %v, scalar %v", h, dec[i], s)
		}
	}
}

// TestBF16: round to nearest even on float32's top 16 bits.
func TestBF16(t *testing.T) {
	cases := map[float32]uint16{1: 0x3f80, -2: 0xc000, 1.00390625: 0x3f80, 1.01171875: 0x3f82, 1.0078125: 0x3f81, 3.4e38: 0x7f80}
	for x, want := range cases {
		if got := f32ToBF16(x); got != want {
			t.Errorf("bf16(%v) = %#x, want %#x", x, got, want)
		}
	}
	if h := f32ToBF16(float32(math.NaN())); h&0x7fc0 != 0x7fc0 {
		t.Errorf("bf16(NaN) = %#x, not a quiet NaN", h)
	}
}
