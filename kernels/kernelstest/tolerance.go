package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"gonum.org/v1/gonum/floats/scalar"
)

// The tolerances of the suite. A backend computes in float32; the reference
// computes in float64 from the same float32 inputs, so the difference is the
// backend's own rounding, which is bounded by the classical error analysis
// (Higham, Accuracy and Stability of Numerical Algorithms, §3.1): n float32
// roundings in a row change a result by at most gamma(n)·(the sum of the
// magnitudes of the terms), for any order of summation and with or without
// fused multiply-adds. gamma below is twice that bound, for margin.
const (
	// unit is the unit roundoff of float32: a correctly rounded op has
	// relative error at most 2⁻²⁴ ≈ 6e-8.
	unit = 0x1p-24
	// tiny is the smallest normal float32, 2⁻¹²⁶ ≈ 1.2e-38: results that
	// small may underflow, or be flushed to zero on a GPU.
	tiny = 0x1p-126

	// optimAbs and optimRel bound each weight and optimizer state after
	// optimSteps updates, against a float64 run of the formulas:
	// |got − want| ≤ optimAbs, or ≤ optimRel·max(|got|, |want|).
	optimAbs, optimRel = 1e-6, 1e-5
	optimSteps         = 5

	// fdStep is the central-difference step h, in float64; the
	// differences are then good to about 1e-9 relative.
	fdStep = 1e-6
	// gradRel bounds an analytic gradient from the backend against central
	// differences: |got − fd| ≤ gradRel·‖fd‖∞ + gradAbs for every element.
	gradRel, gradAbs = 1e-4, 1e-7
)

// gamma is twice the bound n·u/(1 − n·u) on the relative error of n float32
// roundings.
func gamma(n int) float64 {
	nu := float64(n) * unit
	return 2 * nu / (1 - nu)
}

// checkWithin reports every i with |got[i] − want[i]| > bound[i] (or a NaN
// where want has none).
func checkWithin(t *testing.T, what string, got []float32, want, bound []float64) {
	t.Helper()
	report(t, what, len(got), len(want), func(i int) string {
		g, w := float64(got[i]), want[i]
		if g == w || math.Abs(g-w) <= bound[i] {
			return ""
		}
		return fmt.Sprintf("got %v, want %v ± %.3g", got[i], w, bound[i])
	})
}

// checkExact reports every i with got[i] != want[i]; NaN matches NaN, and
// 0 matches −0.
func checkExact(t *testing.T, what string, got, want []float32) {
	t.Helper()
	report(t, what, len(got), len(want), func(i int) string {
		g, w := got[i], want[i]
		if g == w || (g != g && w != w) {
			return ""
		}
		return fmt.Sprintf("got %v, want %v exactly", g, w)
	})
}

// checkBits reports every i where got[i] and want[i] differ in any bit.
func checkBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	report(t, what, len(got), len(want), func(i int) string {
		g, w := math.Float32bits(got[i]), math.Float32bits(want[i])
		if g == w {
			return ""
		}
		return fmt.Sprintf("got bits %#08x, want %#08x", g, w)
	})
}

// checkAbsOrRel reports every i where got[i] and want[i] differ by more
// than abs and by more than rel relative to the larger.
func checkAbsOrRel(t *testing.T, what string, got []float32, want []float64, abs, rel float64) {
	t.Helper()
	report(t, what, len(got), len(want), func(i int) string {
		if scalar.EqualWithinAbsOrRel(float64(got[i]), want[i], abs, rel) {
			return ""
		}
		return fmt.Sprintf("got %v, want %v (abs %g or rel %g)", got[i], want[i], abs, rel)
	})
}

// checkScalar reports |got − want| > bound.
func checkScalar(t *testing.T, what string, got, want, bound float64) {
	t.Helper()
	if !(got == want || math.Abs(got-want) <= bound) {
		t.Errorf("%s = %v, want %v ± %.3g", what, got, want, bound)
	}
}

// report runs mismatch over n elements and reports the first few
// mismatches (where it returns a description) and how many there were.
func report(t *testing.T, what string, n, wantN int, mismatch func(i int) string) {
	t.Helper()
	if n != wantN {
		t.Errorf("%s: %d elements, want %d", what, n, wantN)
		return
	}
	const shown = 4
	bad := 0
	for i := range n {
		msg := mismatch(i)
		if msg == "" {
			continue
		}
		if bad < shown {
			t.Errorf("%s[%d]: %s", what, i, msg)
		}
		bad++
	}
	if bad > shown {
		t.Errorf("%s: %d of %d elements wrong in all", what, bad, n)
	}
}
