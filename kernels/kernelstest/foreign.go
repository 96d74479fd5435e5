package kernelstest

import (
	"testing"

	"github.com/dml-project/dml/kernels"
)

// foreign is a Buffer no backend allocated, standing for another backend's.
type foreign struct{ n int }

// Len is the length the buffer claims to have.
func (f foreign) Len() int { return f.n }

// testForeignBuffer passes a foreign buffer, of a length that would
// otherwise fit, in turn to every op: each must panic (the interface makes
// it a programmer error).
func testForeignBuffer(t *testing.T, be kernels.Backend) {
	x := func() kernels.Buffer { return alloc(t, be, 4) }
	labels := load(t, be, []float32{0, 1, 0, 1})
	f := foreign{4}
	for _, c := range []struct {
		name string
		call func()
	}{
		{"View", func() { be.View(f, 0, 1) }},
		{"Upload", func() { _ = be.Upload(f, make([]float32, 4)) }},
		{"Download", func() { _ = be.Download(make([]float32, 4), f) }},
		{"Copy dst", func() { _ = be.Copy(f, x()) }},
		{"Copy src", func() { _ = be.Copy(x(), f) }},
		{"Free", func() { _ = be.Free(f) }},
		{"Fill", func() { _ = be.Fill(f, 1) }},
		{"Gemm a", func() { _ = be.Gemm(false, false, 2, 2, 2, 1, f, x(), 0, x()) }},
		{"Gemm b", func() { _ = be.Gemm(false, false, 2, 2, 2, 1, x(), f, 0, x()) }},
		{"Gemm c", func() { _ = be.Gemm(false, false, 2, 2, 2, 1, x(), x(), 0, f) }},
		{"AddBias", func() { _ = be.AddBias(x(), foreign{2}, 2, 2) }},
		{"SumRows", func() { _ = be.SumRows(foreign{2}, x(), 2, 2, 0) }},
		{"Relu", func() { _ = be.Relu(x(), f) }},
		{"ReluGrad", func() { _ = be.ReluGrad(x(), x(), f) }},
		{"SoftmaxCrossEntropy logits", func() { _ = be.SoftmaxCrossEntropy(x(), f, be.View(labels, 0, 2), 2, 2, 1, alloc(t, be, 2)) }},
		{"SoftmaxCrossEntropy labels", func() { _ = be.SoftmaxCrossEntropy(x(), x(), foreign{2}, 2, 2, 1, alloc(t, be, 2)) }},
		{"SoftmaxCrossEntropy stats", func() { _ = be.SoftmaxCrossEntropy(x(), x(), be.View(labels, 0, 2), 2, 2, 1, foreign{2}) }},
		{"SigmoidCrossEntropy grad", func() { _ = be.SigmoidCrossEntropy(f, x(), labels, 4, 1, alloc(t, be, 2)) }},
		{"SigmoidCrossEntropy stats", func() { _ = be.SigmoidCrossEntropy(x(), x(), labels, 4, 1, foreign{2}) }},
		{"Predict x", func() { _ = be.Predict(alloc(t, be, 2), f, 2, 2) }},
		{"Predict out", func() { _ = be.Predict(foreign{2}, x(), 2, 2) }},
		{"Axpy", func() { _ = be.Axpy(1, f, x()) }},
		{"Scale", func() { _ = be.Scale(2, f) }},
		{"Sum", func() { _ = be.Sum(x(), x(), f) }},
		{"Dot", func() { _, _ = be.Dot(x(), f) }},
		{"NonFinite", func() { _, _ = be.NonFinite(f) }},
		{"Optimize(sgd)", func() { _ = be.Optimize(x(), f, nil, sgdUpdate) }},
		{"Optimize(momentum)", func() { _ = be.Optimize(x(), x(), f, momentumUpdate) }},
		{"Optimize(adagrad)", func() { _ = be.Optimize(f, x(), x(), adagradUpdate) }},
		{"Optimize(adam)", func() { _ = be.Optimize(x(), x(), f, adamUpdate) }},
		{"Optimize(lars)", func() { _ = be.Optimize(x(), f, x(), larsUpdate) }},
	} {
		if !panics(c.call) {
			t.Errorf("%s with a foreign buffer did not panic", c.name)
		}
	}
}

// panics reports whether f panics.
func panics(f func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	f()
	return false
}
