package cpu

import "math"

// GELU (erf form) and e^x in float32, for the transformer's MLP and
// attention's softmax: the Go loops here and the AVX2 ones
// (gelu_amd64.s) compute the same operations (within an ulp: fma32 rounds
// twice, the FMA instruction once).
//
// erf is Abramowitz and Stegun's 7.1.26 (absolute error ≤ 1.5e-7, the
// form PyTorch's vectorised CPU erf uses), written so that 1 + erf(x/√2)
// keeps its relative accuracy where x is negative (it is the tail q, not
// 2 − (1 + …)); e^x is Cephes' expf polynomial after a reduction by ln 2
// (about an ulp). math.Erf and math.Exp in float64 were 60% of a GPT
// step on the CPU.

// fma32 is a·b + c with one rounding to float64 and one to float32.
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// Their constants (gelu_amd64.s's gc table holds the same float32s).
const (
	expHi            = 88
	expLo            = -87
	log2E    float32 = 1.44269504088896341
	ln2Hi    float32 = 0.693359375
	ln2Lo    float32 = -2.12194440e-4
	erfP     float32 = 0.3275911
	rsqrt2   float32 = 0.7071067811865476
	invSqrt2 float32 = 0.3989422804014327 // 1/√(2π)
)

var (
	expPoly = [6]float32{1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1}
	erfA    = [5]float32{0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429}
)

// expf is e^v, v clamped to [-87, 88] (NaN stays NaN).
func expf(v float32) float32 {
	v = max(min(v, expHi), expLo)
	n := float32(math.RoundToEven(float64(float32(v * log2E))))
	r := fma32(-n, ln2Hi, v)
	r = fma32(-n, ln2Lo, r)
	p := expPoly[0]
	for _, c := range expPoly[1:] {
		p = fma32(r, p, c)
	}
	p = fma32(float32(r*r), p, r) + 1
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// phi2 is 1 + erf(x/√2) (twice the normal distribution function at x)
// and e^(−x²/2).
func phi2(x float32) (p, e float32) {
	z := float32(float32(math.Abs(float64(x))) * rsqrt2)
	e = expf(-float32(z * z))
	t := 1 / fma32(erfP, z, 1)
	q := erfA[4]
	for k := 3; k >= 0; k-- {
		q = fma32(t, q, erfA[k])
	}
	q = float32(float32(q*t) * e)
	if x < 0 {
		return q, e
	}
	return 2 - q, e
}

// geluf is x·Φ(x).
func geluf(x float32) float32 {
	p, _ := phi2(x)
	return float32(x*p) * 0.5
}

// geluGradf is dy·(Φ(x) + x·φ(x)).
func geluGradf(dy, x float32) float32 {
	p, e := phi2(x)
	return fma32(p, 0.5, float32(float32(x*e)*invSqrt2)) * dy
}

// geluFast sets y = GELU(x), 8 at a time where the CPU has AVX2 and FMA.
func geluFast(y, x []float32) {
	i := geluVec(y, x)
	for ; i < len(x); i++ {
		y[i] = geluf(x[i])
	}
}

// geluGradFast sets dx = dy·GELU′(x).
func geluGradFast(dx, dy, x []float32) {
	i := geluGradVec(dx, dy, x)
	for ; i < len(x); i++ {
		dx[i] = geluGradf(dy[i], x[i])
	}
}

// expFast sets y = e^x.
func expFast(y, x []float32) {
	i := expVec(y, x)
	for ; i < len(x); i++ {
		y[i] = expf(x[i])
	}
}
