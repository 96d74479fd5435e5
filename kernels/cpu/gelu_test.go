package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// geluInputs: normals of three widths, the tails, exact values, and a
// NaN and ±Inf.
func geluInputs() []float32 {
	r := rand.New(rand.NewPCG(5, 6))
	var x []float32
	for _, s := range []float64{0.1, 1, 5} {
		for range 3001 {
			x = append(x, float32(s*r.NormFloat64()))
		}
	}
	return append(x, 0, -0, 1e-30, -1e-30, 3, -3, 6, -6, 9, -9, 13, -13, 40, -40, 1e4, -1e4)
}

// TestGeluFast: the float32 GELU, its gradient and e^x against float64
// (erf, exp) within what Abramowitz and Stegun's erf allows (1.5e-7) and
// float32's rounding, and the AVX2 loops against the Go ones, within an
// ulp.
func TestGeluFast(t *testing.T) {
	x := geluInputs()
	dy := make([]float32, len(x))
	for i := range dy {
		dy[i] = float32(math.Sin(float64(i)))
	}
	y, dx := make([]float32, len(x)), make([]float32, len(x))
	geluFast(y, x)
	geluGradFast(dx, dy, x)
	for i, v := range x {
		xf := float64(v)
		want := 0.5 * xf * (1 + math.Erf(xf/math.Sqrt2))
		if d := math.Abs(float64(y[i]) - want); d > 3e-7*math.Abs(xf)+2e-7*math.Abs(want)+1e-37 {
			t.Fatalf("gelu(%v) = %v, want %v (off by %.3g)", v, y[i], want, d)
		}
		wantD := float64(dy[i]) * (0.5*(1+math.Erf(xf/math.Sqrt2)) + xf*math.Exp(-xf*xf/2)/math.Sqrt(2*math.Pi))
		if d := math.Abs(float64(dx[i]) - wantD); d > 4e-7*math.Abs(float64(dy[i]))*(1+math.Abs(xf)) {
			t.Fatalf("gelu'(%v)·%v = %v, want %v (off by %.3g)", v, dy[i], dx[i], wantD, d)
		}
	}
	e := make([]float32, len(x))
	in := make([]float32, len(x))
	for i, v := range x {
		in[i] = max(v*10, -80) // e^x over [-80, …]: softmax's range is ≤ 0
	}
	expFast(e, in)
	for i, v := range in {
		want := math.Exp(min(float64(v), 88))
		if d := math.Abs(float64(e[i]) - want); d > 2.5e-7*want {
			t.Fatalf("exp(%v) = %v, want %v (relative %.3g)", v, e[i], want, d/want)
		}
	}
	if g := geluf(float32(math.NaN())); !math.IsNaN(float64(g)) {
		t.Errorf("gelu(NaN) = %v", g)
	}
	if !useFMA {
		t.Skip("no AVX2 and FMA: the assembly loops do not run here")
	}
	useFMA = false
	y2, dx2, e2 := make([]float32, len(x)), make([]float32, len(x)), make([]float32, len(x))
	geluFast(y2, x)
	geluGradFast(dx2, dy, x)
	expFast(e2, in)
	nan := []float32{float32(math.NaN()), 1, 2, 3, 4, 5, 6, 7}
	geluFast(nan[:8:8], nan)
	useFMA = true
	ulp := func(a, b float32) bool {
		d := int64(math.Float32bits(a)) - int64(math.Float32bits(b))
		return a == b || d >= -1 && d <= 1
	}
	for i := range x {
		if !ulp(y[i], y2[i]) || !ulp(dx[i], dx2[i]) || !ulp(e[i], e2[i]) {
			t.Fatalf("x %v: assembly gives %v, %v, %v; Go %v, %v, %v", x[i], y[i], dx[i], e[i], y2[i], dx2[i], e2[i])
		}
	}
	nanV := []float32{float32(math.NaN()), 1, 2, 3, 4, 5, 6, 7}
	geluFast(nanV, nanV)
	if !math.IsNaN(float64(nanV[0])) {
		t.Errorf("the assembly's gelu(NaN) = %v", nanV[0])
	}
}
