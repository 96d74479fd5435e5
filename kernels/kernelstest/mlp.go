package kernelstest

import (
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// The MLP gradient check: X → Linear(W1, b1) → Relu → Linear(W2, b2) →
// softmax cross-entropy, mean over the batch, with weights stored in×out.
// The backward pass runs entirely on the backend, with the aliasing the
// interface allows (Relu and ReluGrad in place, grad over the logits), and
// every gradient is compared with central differences of mlpLoss.
const mlpBatch, mlpIn, mlpHidden, mlpOut = 6, 5, 7, 3

// affine returns x·w + 1·bᵀ for the rows×in matrix x and in×out matrix w.
func affine(x, w, b []float64, rows, in, out int) []float64 {
	y, _ := refGemm(false, false, rows, out, in, 1, x, w, 0, nil)
	for i := range rows {
		for j := range out {
			y[i*out+j] += b[j]
		}
	}
	return y
}

// mlpLoss is the mean cross-entropy of the MLP, in float64; it also returns
// the hidden pre-activations.
func mlpLoss(x, w1, b1, w2, b2 []float64, labels []float32) (loss float64, pre []float64) {
	pre = affine(x, w1, b1, mlpBatch, mlpIn, mlpHidden)
	z := affine(refRelu(pre), w2, b2, mlpBatch, mlpHidden, mlpOut)
	_, l, _ := refSoftmaxCrossEntropy(z, labels, mlpBatch, mlpOut, 1)
	return sum(l) / mlpBatch, pre
}

// gradMLP runs the MLP forward and backward on the backend and checks every
// gradient, and the loss, against the float64 model.
func gradMLP(t *testing.T, be kernels.Backend, o Options) {
	// Draw inputs until no hidden pre-activation is within 0.01 of Relu's
	// kink, where a central difference would straddle it.
	var x, w1, b1, w2, b2 []float32
	var labels []float32
	for seed := uint64(26); ; seed++ {
		if seed > 126 {
			t.Fatal("no seed keeps the hidden layer away from Relu's kink")
		}
		r := newRand(seed)
		x, w1, b1 = normals(r, mlpBatch*mlpIn, 1), normals(r, mlpIn*mlpHidden, 0.5), normals(r, mlpHidden, 0.5)
		w2, b2 = normals(r, mlpHidden*mlpOut, 0.5), normals(r, mlpOut, 0.5)
		labels = randLabels(r, mlpBatch, mlpOut)
		_, pre := mlpLoss(widen(x), widen(w1), widen(b1), widen(w2), widen(b2), labels)
		if minAbs(pre) > 0.01 {
			break
		}
	}
	X, W1, B1, W2, B2 := widen(x), widen(w1), widen(b1), widen(w2), widen(b2)
	loss := func() float64 {
		l, _ := mlpLoss(X, W1, B1, W2, B2, labels)
		return l
	}

	xb, w1b, b1b, w2b, b2b := load(t, be, x), load(t, be, w1), load(t, be, b1), load(t, be, w2), load(t, be, b2)
	h, z := alloc(t, be, mlpBatch*mlpHidden), alloc(t, be, mlpBatch*mlpOut)
	ok(t, "H = X·W1", be.Gemm(false, false, mlpBatch, mlpHidden, mlpIn, 1, xb, w1b, 0, h))
	ok(t, "H += b1", be.AddBias(h, b1b, mlpBatch, mlpHidden))
	ok(t, "A = relu(H)", be.Relu(h, h))
	ok(t, "Z = A·W2", be.Gemm(false, false, mlpBatch, mlpOut, mlpHidden, 1, h, w2b, 0, z))
	ok(t, "Z += b2", be.AddBias(z, b2b, mlpBatch, mlpOut))
	stats := alloc(t, be, 2)
	ok(t, "dZ = softmax(Z) − Y", be.SoftmaxCrossEntropy(z, z, load(t, be, labels), mlpBatch, mlpOut, 1.0/mlpBatch, stats))
	want := loss()
	checkScalar(t, "mean loss", float64(read(t, be, stats)[0])/mlpBatch, want, (1e-5+8*o.GemmRelTol)*(1+math.Abs(want)))

	dw2, db2, da := alloc(t, be, mlpHidden*mlpOut), alloc(t, be, mlpOut), alloc(t, be, mlpBatch*mlpHidden)
	dw1, db1, dx := alloc(t, be, mlpIn*mlpHidden), alloc(t, be, mlpHidden), alloc(t, be, mlpBatch*mlpIn)
	ok(t, "dW2 = Aᵀ·dZ", be.Gemm(true, false, mlpHidden, mlpOut, mlpBatch, 1, h, z, 0, dw2))
	ok(t, "db2 = SumRows(dZ)", be.SumRows(db2, z, mlpBatch, mlpOut, 0))
	ok(t, "dA = dZ·W2ᵀ", be.Gemm(false, true, mlpBatch, mlpHidden, mlpOut, 1, z, w2b, 0, da))
	ok(t, "dH = ReluGrad(dA)", be.ReluGrad(da, da, h))
	ok(t, "dW1 = Xᵀ·dH", be.Gemm(true, false, mlpIn, mlpHidden, mlpBatch, 1, xb, da, 0, dw1))
	ok(t, "db1 = SumRows(dH)", be.SumRows(db1, da, mlpBatch, mlpHidden, 0))
	ok(t, "dX = dH·W1ᵀ", be.Gemm(false, true, mlpBatch, mlpIn, mlpHidden, 1, da, w1b, 0, dx))

	checkGrad(t, o, "dW1", read(t, be, dw1), centralDiff(W1, loss))
	checkGrad(t, o, "db1", read(t, be, db1), centralDiff(B1, loss))
	checkGrad(t, o, "dW2", read(t, be, dw2), centralDiff(W2, loss))
	checkGrad(t, o, "db2", read(t, be, db2), centralDiff(B2, loss))
	checkGrad(t, o, "dX", read(t, be, dx), centralDiff(X, loss))
}

// minAbs returns min |x|, or +Inf for no x.
func minAbs(x []float64) float64 {
	m := math.Inf(1)
	for _, v := range x {
		m = math.Min(m, math.Abs(v))
	}
	return m
}
