// Package kernelstest is the conformance suite for kernels.Backend. Run
// checks every op of any backend against a naive float64 reference loop with
// a stated tolerance (see tolerance.go), on seeded random inputs and awkward
// shapes; checks that bad shapes return kernels.ErrShape and leave every
// buffer untouched, and that foreign buffers panic; checks the gradients the
// ops compute against central differences of a float64 loss; and checks the
// optimizer updates over several steps against the formulas in float64.
//
// A backend package runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		kernelstest.Run(t, func() kernels.Backend { return cpu.New() })
//	}
package kernelstest

import (
	"testing"

	"github.com/dml-project/dml/kernels"
)

// Run runs the whole suite, one subtest per op (named after it), each on a
// fresh backend from newBackend. Subtests run one after another, since a
// Backend is used by one goroutine at a time.
func Run(t *testing.T, newBackend func() kernels.Backend) {
	checks := []struct {
		name  string
		check func(*testing.T, kernels.Backend)
	}{
		{"Alloc", testAlloc},
		{"View", testView},
		{"UploadDownload", testUploadDownload},
		{"Copy", testCopy},
		{"Fill", testFill},
		{"Gemm", testGemm},
		{"AddBias", testAddBias},
		{"SumRows", testSumRows},
		{"Relu", testRelu},
		{"ReluGrad", testReluGrad},
		{"SoftmaxCrossEntropy", testSoftmaxCrossEntropy},
		{"SigmoidCrossEntropy", testSigmoidCrossEntropy},
		{"Predict", testPredict},
		{"Axpy", testAxpy},
		{"Scale", testScale},
		{"Sum", testSum},
		{"Dot", testDot},
		{"NonFinite", testNonFinite},
		{"SGD", testSGD},
		{"Momentum", testMomentum},
		{"Adagrad", testAdagrad},
		{"ErrShape", testErrShape},
		{"ForeignBuffer", testForeignBuffer},
		{"Gradients", testGradients},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.check(t, newBackend()) })
	}
}
