// Package kernelstest is the conformance suite for kernels.Backend. Run
// checks every op of any backend against a naive float64 reference loop with
// a stated tolerance (see tolerance.go), on seeded random inputs and awkward
// shapes (empty, 1×1, odd sizes and sizes that are not multiples of a GPU
// tile, long vectors, many rows); checks that no op writes outside its
// output (outputs are Views with guard elements around them); checks that
// bad shapes return kernels.ErrShape and leave every buffer untouched, that
// bad labels are reported (an error, or NaN in the loss), and that foreign
// buffers panic; checks Alloc, Free, Sync and Close; checks the gradients
// the ops compute against central differences of a float64 loss; and checks
// the optimizer updates over several steps against the formulas in float64.
//
// A backend package runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		kernelstest.Run(t, func() kernels.Backend { return cpu.New() })
//	}
//
// A backend whose Gemm may use TF32 runs it with a wider Gemm tolerance:
//
//	kernelstest.RunOpts(t, newBackend, kernelstest.Options{GemmRelTol: kernelstest.TF32GemmRelTol})
package kernelstest

import (
	"testing"

	"github.com/dml-project/dml/kernels"
)

// Options adjust the suite to a backend.
type Options struct {
	// GemmRelTol, when > 0, is added to Gemm's relative bound: an element
	// of C may then differ from the float64 reference by
	// (gamma(k+3) + GemmRelTol)·Σ_l |alpha·op(A)[i,l]·op(B)[l,j]| + |beta·C[i,j]|·gamma(2).
	// The checks that run Gemm inside a larger computation (gradients, the
	// MLP loss) widen by the same amount. Zero means FP32 Gemm.
	GemmRelTol float64
	// Precision, when it rounds (kernels.BF16, FP16), is the backend's:
	// the Gemm and whole-convolution checks then compare with the float64
	// products of the rounded operands, at float32's bound, so that an
	// operand left unrounded (or rounded twice, or the wrong way) fails.
	// Set GemmRelTol too (PrecisionOptions) for the checks that run the
	// products inside a larger computation.
	Precision kernels.Precision
	// WholeConvRelTol widens the whole convolutions' bound further: a
	// library whose algorithms transform the rounded operands (Winograd,
	// FFT) and feed the transforms to TF32 tensor cores (cuDNN at BF16 and
	// FP16) rounds more than the products of the rounded operands do.
	WholeConvRelTol float64
}

// PrecisionOptions are the suite's Options for a backend opened at p.
func PrecisionOptions(p kernels.Precision) Options {
	switch p {
	case kernels.TF32:
		return Options{GemmRelTol: TF32GemmRelTol}
	case kernels.BF16:
		// Each operand rounded to nearest is off by at most 2⁻⁹
		// relative, a product by about 2·2⁻⁹.
		return Options{Precision: p, GemmRelTol: 2 * 0x1p-9}
	case kernels.FP16:
		return Options{Precision: p, GemmRelTol: 2 * 0x1p-12}
	}
	return Options{}
}

// TF32GemmRelTol is GemmRelTol for a Gemm that rounds its inputs to TF32
// (10 explicit mantissa bits): rounded to nearest, each input is off by at
// most 2⁻¹¹ relative and a product by about 2·2⁻¹¹; truncated, as tensor
// cores fed float32 may do, by 2⁻¹⁰ each. This is the truncating bound,
// 2·2⁻¹⁰. At this tolerance a Gemm that loses one term of a long (k of a
// few hundred) product can pass; the FP32 run is the one that catches it.
const TF32GemmRelTol = 4 * 0x1p-11

// Run runs the whole suite with the default Options (FP32 everywhere).
func Run(t *testing.T, newBackend func() kernels.Backend) {
	RunOpts(t, newBackend, Options{})
}

// RunOpts runs the whole suite, one subtest per op (named after it), each
// on a fresh backend from newBackend, closed when the subtest ends (Close
// must return nil). Subtests run one after another, since a Backend is used
// by one goroutine at a time.
func RunOpts(t *testing.T, newBackend func() kernels.Backend, o Options) {
	checks := []struct {
		name  string
		check func(*testing.T, kernels.Backend, Options)
	}{
		{"Alloc", plain(testAlloc)},
		{"Free", plain(testFree)},
		{"View", plain(testView)},
		{"UploadDownload", plain(testUploadDownload)},
		{"Copy", plain(testCopy)},
		{"Fill", plain(testFill)},
		{"Sync", plain(testSync)},
		{"Gemm", testGemm},
		{"AddBias", plain(testAddBias)},
		{"SumRows", plain(testSumRows)},
		{"Relu", plain(testRelu)},
		{"ReluGrad", plain(testReluGrad)},
		{"SoftmaxCrossEntropy", plain(testSoftmaxCrossEntropy)},
		{"SigmoidCrossEntropy", plain(testSigmoidCrossEntropy)},
		{"BadLabels", plain(testBadLabels)},
		{"Predict", plain(testPredict)},
		{"Axpy", plain(testAxpy)},
		{"Scale", plain(testScale)},
		{"Sum", plain(testSum)},
		{"Dot", plain(testDot)},
		{"NonFinite", plain(testNonFinite)},
		{"SGD", plain(testSGD)},
		{"Momentum", plain(testMomentum)},
		{"Adagrad", plain(testAdagrad)},
		{"Adam", plain(testAdam)},
		{"LARS", plain(testLARS)},
		{"ErrShape", plain(testErrShape)},
		{"ForeignBuffer", plain(testForeignBuffer)},
		{"Gradients", testGradients},
		{"Im2col", plain(testIm2col)},
		{"Col2im", plain(testCol2im)},
		{"Transpose01", plain(testTranspose01)},
		{"MaxPool", plain(testMaxPool)},
		{"AvgPool", plain(testAvgPool)},
		{"ConvErrShape", plain(testConvErrShape)},
		{"BatchNorm", plain(testBatchNorm)},
		{"BatchNormReLU", plain(testBatchNormRelu)},
		{"SyncBatchNorm", plain(testSyncBatchNorm)},
		{"Gelu", plain(testGelu)},
		{"LayerNorm", plain(testLayerNorm)},
		{"Dropout", plain(testDropout)},
		{"MaxPoolPad", plain(testMaxPoolPad)},
		{"LRN", plain(testLRN)},
		{"Embedding", plain(testEmbedding)},
		{"Attention", plain(testAttention)},
		{"WholeConv", testWholeConv},
		{"LibPool", testLibPool},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			be := newBackend()
			t.Cleanup(func() {
				if err := be.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			c.check(t, be, o)
			// Whatever the device reported asynchronously comes back here.
			if err := be.Sync(); err != nil {
				t.Errorf("Sync after the checks: %v", err)
			}
		})
	}
}

// plain adapts a check that takes no Options.
func plain(f func(*testing.T, kernels.Backend)) func(*testing.T, kernels.Backend, Options) {
	return func(t *testing.T, be kernels.Backend, _ Options) { f(t, be) }
}

// rounded is x rounded to o.Precision (a copy; x itself where it rounds
// nothing): the operands a product at that precision sees.
func (o Options) rounded(x []float32) []float32 {
	if !o.Precision.Rounds() {
		return x
	}
	r := make([]float32, len(x))
	o.Precision.Round(r, x)
	return r
}

// exact is o for a check whose reference rounds the operands as the
// backend does: float32's bound is left (at TF32, GemmRelTol stays).
func (o Options) exact() Options {
	if o.Precision.Rounds() {
		o.GemmRelTol = 0
	}
	return o
}
