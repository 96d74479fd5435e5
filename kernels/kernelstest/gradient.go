package kernelstest

import (
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// centralDiff returns (f(x + h·eᵢ) − f(x − h·eᵢ)) / 2h for every i, with
// h = fdStep: the numerical gradient of f, which reads x, with respect to x.
// x is restored afterwards.
func centralDiff(x []float64, f func() float64) []float64 {
	g := make([]float64, len(x))
	for i, v := range x {
		x[i] = v + fdStep
		up := f()
		x[i] = v - fdStep
		down := f()
		x[i] = v
		g[i] = (up - down) / (2 * fdStep)
	}
	return g
}

// checkGrad compares an analytic gradient with central differences:
// |got − fd| ≤ gradBoundRel(o)·‖fd‖∞ + gradAbs for every element.
func checkGrad(t *testing.T, o Options, what string, got []float32, fd []float64) {
	t.Helper()
	var norm float64
	for _, v := range fd {
		norm = math.Max(norm, math.Abs(v))
	}
	bound := make([]float64, len(fd))
	for i := range bound {
		bound[i] = gradBoundRel(o)*norm + gradAbs
	}
	checkWithin(t, what, got, fd, bound)
}

// sum returns Σ x.
func sum(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s
}

// testGradients checks, for every op with a backward, that the gradient the
// backend computes is the derivative of a scalar loss written out in
// float64, by central differences.
func testGradients(t *testing.T, be kernels.Backend, o Options) {
	t.Run("Linear/W=in×out", func(t *testing.T) { gradLinear(t, be, o, false) })
	t.Run("Linear/W=out×in", func(t *testing.T) { gradLinear(t, be, o, true) })
	t.Run("Relu", func(t *testing.T) { gradRelu(t, be, o) })
	t.Run("SoftmaxCrossEntropy", func(t *testing.T) { gradSoftmax(t, be, o) })
	t.Run("SigmoidCrossEntropy", func(t *testing.T) { gradSigmoid(t, be, o) })
	t.Run("MLP", func(t *testing.T) { gradMLP(t, be, o) })
}

// gradLinear checks the backward of a linear layer Y = X·W + 1·biasᵀ under
// the probe loss Σ P∘Y: dW and dX from Gemm with the transposes the weight
// layout calls for, dbias from SumRows. wOutByIn stores W as out×in (so the
// forward is X·Wᵀ) instead of in×out.
func gradLinear(t *testing.T, be kernels.Backend, o Options, wOutByIn bool) {
	const batch, in, out = 5, 4, 3
	r := newRand(21)
	x, w, bias, p := normals(r, batch*in, 1), normals(r, in*out, 1), normals(r, out, 1), normals(r, batch*out, 1)
	X, W, B, P := widen(x), widen(w), widen(bias), widen(p)
	weight := func(l, j int) float64 { // W[l, j] of the in×out weight
		if wOutByIn {
			return W[j*in+l]
		}
		return W[l*out+j]
	}
	loss := func() float64 {
		var s float64
		for i := range batch {
			for j := range out {
				y := B[j]
				for l := range in {
					y += X[i*in+l] * weight(l, j)
				}
				s += P[i*out+j] * y
			}
		}
		return s
	}

	xb, wb, dyb := load(t, be, x), load(t, be, w), load(t, be, p)
	dx, dw, db := alloc(t, be, batch*in), alloc(t, be, in*out), alloc(t, be, out)
	if wOutByIn {
		ok(t, "dW = dYᵀ·X", be.Gemm(true, false, out, in, batch, 1, dyb, xb, 0, dw))
		ok(t, "dX = dY·W", be.Gemm(false, false, batch, in, out, 1, dyb, wb, 0, dx))
	} else {
		ok(t, "dW = Xᵀ·dY", be.Gemm(true, false, in, out, batch, 1, xb, dyb, 0, dw))
		ok(t, "dX = dY·Wᵀ", be.Gemm(false, true, batch, in, out, 1, dyb, wb, 0, dx))
	}
	ok(t, "dbias = SumRows(dY)", be.SumRows(db, dyb, batch, out, 0))
	checkGrad(t, o, "dW", read(t, be, dw), centralDiff(W, loss))
	checkGrad(t, o, "dX", read(t, be, dx), centralDiff(X, loss))
	checkGrad(t, o, "dbias", read(t, be, db), centralDiff(B, loss))
}

// awayFromZero moves every element at least margin from 0, keeping its
// sign, so that no central difference straddles Relu's kink.
func awayFromZero(x []float32, margin float32) []float32 {
	for i, v := range x {
		if v < 0 {
			x[i] = v - margin
		} else {
			x[i] = v + margin
		}
	}
	return x
}

// gradRelu checks ReluGrad (in place) under the probe loss Σ P∘relu(X).
func gradRelu(t *testing.T, be kernels.Backend, o Options) {
	r := newRand(22)
	x, p := awayFromZero(normals(r, 40, 1), 0.05), normals(r, 40, 1)
	X, P := widen(x), widen(p)
	loss := func() float64 {
		var s float64
		for i, y := range refRelu(X) {
			s += P[i] * y
		}
		return s
	}
	xb, yb, db := load(t, be, x), alloc(t, be, len(x)), load(t, be, p)
	ok(t, "Relu", be.Relu(yb, xb))
	ok(t, "ReluGrad", be.ReluGrad(db, db, yb))
	checkGrad(t, o, "dX", read(t, be, db), centralDiff(X, loss))
}

// gradSoftmax checks SoftmaxCrossEntropy's grad against the mean
// cross-entropy (scale = 1/rows).
func gradSoftmax(t *testing.T, be kernels.Backend, o Options) {
	const rows, cols = 4, 5
	r := newRand(23)
	z, labels := normals(r, rows*cols, 2), randLabels(r, rows, cols)
	Z := widen(z)
	loss := func() float64 {
		_, l, _ := refSoftmaxCrossEntropy(Z, labels, rows, cols, 1)
		return sum(l) / rows
	}
	gb := alloc(t, be, rows*cols)
	ok(t, "SoftmaxCrossEntropy", be.SoftmaxCrossEntropy(gb, load(t, be, z), load(t, be, labels), rows, cols, 1.0/rows, alloc(t, be, 2)))
	checkGrad(t, o, "dZ", read(t, be, gb), centralDiff(Z, loss))
}

// gradSigmoid checks SigmoidCrossEntropy's grad against the mean logistic
// loss (scale = 1/n), including saturated logits.
func gradSigmoid(t *testing.T, be kernels.Backend, o Options) {
	z := append(normals(newRand(24), 8, 3), 30, -30, 12, -12)
	labels := randLabels(newRand(25), len(z), 2)
	n := float64(len(z))
	Z := widen(z)
	loss := func() float64 {
		_, l, _ := refSigmoidCrossEntropy(Z, labels, 1)
		return sum(l) / n
	}
	gb := alloc(t, be, len(z))
	ok(t, "SigmoidCrossEntropy", be.SigmoidCrossEntropy(gb, load(t, be, z), load(t, be, labels), len(z), float32(1/n), alloc(t, be, 2)))
	checkGrad(t, o, "dZ", read(t, be, gb), centralDiff(Z, loss))
}
