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

// The bound of each op, in one place. mag is the sum of the magnitudes of
// the terms a result is made of (computed by the reference), so a float32
// computation in any order, tiled, split in two stages or with fused
// multiply-adds, passes, while a result that lost or doubled a term, or
// read a wrong element, is off by about a term and fails.

// gemmBound bounds C[i,j] with mag = |alpha|·Σ_l |op(A)[i,l]·op(B)[l,j]| +
// |beta·C[i,j]|: (gamma(k+3) + o.GemmRelTol)·mag, with k+3 roundings for the
// k products and sums, the alpha and beta scalings and the final add.
func gemmBound(k int, mag []float64, o Options) []float64 {
	return scaled(mag, gamma(k+3)+o.GemmRelTol)
}

// addBiasBound bounds x + bias: one rounding.
func addBiasBound(x, bias float64) float64 { return gamma(1) * (math.Abs(x) + math.Abs(bias)) }

// sumRowsBound bounds beta·dst + Σ_i x[i] with abs = |beta·dst| + Σ_i |x[i]|:
// rows additions, the scaling and one more, for a two-stage reduction.
func sumRowsBound(rows int, abs float64) float64 { return gamma(rows+2) * abs }

// axpyBound bounds y + alpha·x: a product and a sum.
func axpyBound(y, ax float64) float64 { return gamma(2) * (math.Abs(y) + math.Abs(ax)) }

// scaleBound bounds alpha·x: one rounding.
func scaleBound(ax float64) float64 { return gamma(1) * math.Abs(ax) }

// sumBound bounds the element-wise sum of count sources with abs = Σ |src|.
func sumBound(count int, abs float64) float64 { return gamma(count) * abs }

// dotBound bounds Σ x·y with abs = Σ |x·y|, which admits a float32
// accumulation in any order.
func dotBound(n int, abs float64) float64 { return gamma(n) * abs }

// softmaxGradBound bounds scale·(softmax(z) − onehot) at one element, for a
// row of cols logits, with p the reference probability, d = |z − max| and
// want the reference gradient: a float32 log-sum-exp errs by about
// (cols + 4 + d) roundings relative to p; tiny admits underflow and
// flush-to-zero.
func softmaxGradBound(scale float64, cols int, d, p, want float64) float64 {
	return math.Abs(scale)*8*unit*(float64(cols)+4+d)*p + gamma(1)*math.Abs(want) + tiny
}

// softmaxLossBound bounds one row's cross-entropy, with top the row
// maximum, zl the label's logit and loss the reference loss.
func softmaxLossBound(cols int, top, zl, loss float64) float64 {
	return 8 * unit * (float64(cols) + 4 + math.Abs(top) + math.Abs(zl) + loss)
}

// sigmoidGradBound bounds scale·(σ(z) − y).
func sigmoidGradBound(scale, want float64) float64 {
	return 8*unit*math.Abs(scale) + gamma(1)*math.Abs(want)
}

// sigmoidLossBound bounds one row's logistic loss.
func sigmoidLossBound(z, loss float64) float64 { return 8 * unit * (1 + math.Abs(z) + loss) }

// statsLossBound bounds the loss sum as stored in stats[0], given the bound
// on the sum itself: storing it as float32 rounds once more. The correct
// count in stats[1] must be exact (counts are below 2²⁴).
func statsLossBound(sum, bound float64) float64 { return bound + gamma(1)*math.Abs(sum) }

// gradBoundRel is gradRel, widened by the Gemm tolerance for backends whose
// Gemm rounds its inputs: a gradient is a few products deep.
func gradBoundRel(o Options) float64 { return gradRel + 8*o.GemmRelTol }

// checkWithin reports every i with |got[i] − want[i]| > bound[i] (or a NaN
// where want has none).
func checkWithin(t *testing.T, what string, got []float32, want, bound []float64) int {
	t.Helper()
	return report(t, what, len(got), len(want), func(i int) string {
		g, w := float64(got[i]), want[i]
		if g == w || math.Abs(g-w) <= bound[i] {
			return ""
		}
		return fmt.Sprintf("got %v, want %v ± %.3g", got[i], w, bound[i])
	})
}

// checkExact reports every i with got[i] != want[i]; NaN matches NaN, and
// 0 matches −0.
func checkExact(t *testing.T, what string, got, want []float32) int {
	t.Helper()
	return report(t, what, len(got), len(want), func(i int) string {
		g, w := got[i], want[i]
		if g == w || (g != g && w != w) {
			return ""
		}
		return fmt.Sprintf("got %v, want %v exactly", g, w)
	})
}

// checkBits reports every i where got[i] and want[i] differ in any bit.
func checkBits(t *testing.T, what string, got, want []float32) int {
	t.Helper()
	return report(t, what, len(got), len(want), func(i int) string {
		g, w := math.Float32bits(got[i]), math.Float32bits(want[i])
		if g == w {
			return ""
		}
		return fmt.Sprintf("got bits %#08x, want %#08x", g, w)
	})
}

// checkAbsOrRel reports every i where got[i] and want[i] differ by more
// than abs and by more than rel relative to the larger.
func checkAbsOrRel(t *testing.T, what string, got []float32, want []float64, abs, rel float64) int {
	t.Helper()
	return report(t, what, len(got), len(want), func(i int) string {
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
// mismatches (where it returns a description) and how many there were,
// which it returns (a length mismatch counts as one). The check* functions
// return the same count.
func report(t *testing.T, what string, n, wantN int, mismatch func(i int) string) int {
	t.Helper()
	if n != wantN {
		t.Errorf("%s: %d elements, want %d", what, n, wantN)
		return 1
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
	return bad
}
