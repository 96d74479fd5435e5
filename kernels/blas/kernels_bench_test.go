package blas_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/model"
)

// The kernel benchmarks run every op of a training step of the MLP
// 784-512-256-10 at batch 64 (trainer/model's calls, weights stored out×in)
// on both CPU backends, named .../backend=cpu and .../backend=blas so the
// two sit side by side: GEMMs report GFLOP/s, the others bytes moved
// (SetBytes, so GB/s) and ns/op.

// mlpLayers are the MLP's (in, out) pairs.
func mlpLayers() [][2]int {
	var ls [][2]int
	for k := 0; k+1 < len(mlpSizes); k++ {
		ls = append(ls, [2]int{mlpSizes[k], mlpSizes[k+1]})
	}
	return ls
}

func randBuf(b *testing.B, be kernels.Backend, r *rand.Rand, n int) kernels.Buffer {
	h := make([]float32, n)
	for i := range h {
		h[i] = float32(r.NormFloat64())
	}
	buf, err := be.Alloc(n)
	if err != nil {
		b.Fatal(err)
	}
	if err := be.Upload(buf, h); err != nil {
		b.Fatal(err)
	}
	return buf
}

// BenchmarkGemm: per layer the forward product Y = X·Wᵀ (NT: m=batch,
// n=out, k=in), the weight gradient dW = dYᵀ·X (TN: m=out, n=in, k=batch)
// and the input gradient dX = dY·W (NN: m=batch, n=in, k=out), as
// trainer/model calls them. On blas this is OpenBLAS's single-call figure.
func BenchmarkGemm(b *testing.B) {
	for _, l := range mlpLayers() {
		in, out := l[0], l[1]
		for _, g := range []struct {
			what           string
			transA, transB bool
			m, n, k        int
		}{
			{"forward", false, true, mlpBatch, out, in},
			{"weightgrad", true, false, out, in, mlpBatch},
			{"inputgrad", false, false, mlpBatch, in, out},
		} {
			for _, be := range backends(b) {
				r := rand.New(rand.NewPCG(1, 2))
				a, bb, c := randBuf(b, be, r, g.m*g.k), randBuf(b, be, r, g.k*g.n), randBuf(b, be, r, g.m*g.n)
				name := fmt.Sprintf("layer=%dx%d/%s/m=%d,n=%d,k=%d/backend=%s", in, out, g.what, g.m, g.n, g.k, be.Name())
				b.Run(name, func(b *testing.B) {
					for b.Loop() {
						if err := be.Gemm(g.transA, g.transB, g.m, g.n, g.k, 1, a, bb, 0, c); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(2*float64(g.m)*float64(g.n)*float64(g.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// BenchmarkAddBias: the forward pass's bias add on each layer's output.
func BenchmarkAddBias(b *testing.B) {
	for _, l := range mlpLayers() {
		out := l[1]
		for _, be := range backends(b) {
			r := rand.New(rand.NewPCG(3, 4))
			x, bias := randBuf(b, be, r, mlpBatch*out), randBuf(b, be, r, out)
			b.Run(fmt.Sprintf("rows=%d,cols=%d/backend=%s", mlpBatch, out, be.Name()), func(b *testing.B) {
				b.SetBytes(int64(4 * (2*mlpBatch*out + out)))
				for b.Loop() {
					if err := be.AddBias(x, bias, mlpBatch, out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSumRows: the backward pass's bias gradient (beta 0).
func BenchmarkSumRows(b *testing.B) {
	for _, l := range mlpLayers() {
		out := l[1]
		for _, be := range backends(b) {
			r := rand.New(rand.NewPCG(5, 6))
			x, dst := randBuf(b, be, r, mlpBatch*out), randBuf(b, be, r, out)
			b.Run(fmt.Sprintf("rows=%d,cols=%d/backend=%s", mlpBatch, out, be.Name()), func(b *testing.B) {
				b.SetBytes(int64(4 * (mlpBatch*out + out)))
				for b.Loop() {
					if err := be.SumRows(dst, x, mlpBatch, out, 0); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkRelu: in place on each hidden layer's output, as the forward
// pass runs it.
func BenchmarkRelu(b *testing.B) {
	for _, n := range mlpSizes[1 : len(mlpSizes)-1] {
		for _, be := range backends(b) {
			r := rand.New(rand.NewPCG(7, 8))
			x := randBuf(b, be, r, mlpBatch*n)
			b.Run(fmt.Sprintf("n=%d/backend=%s", mlpBatch*n, be.Name()), func(b *testing.B) {
				b.SetBytes(int64(4 * 2 * mlpBatch * n))
				for b.Loop() {
					if err := be.Relu(x, x); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkReluGrad: dx = dy where y > 0 (dx aliasing dy), on each hidden
// layer.
func BenchmarkReluGrad(b *testing.B) {
	for _, n := range mlpSizes[1 : len(mlpSizes)-1] {
		for _, be := range backends(b) {
			r := rand.New(rand.NewPCG(9, 10))
			dy, y := randBuf(b, be, r, mlpBatch*n), randBuf(b, be, r, mlpBatch*n)
			b.Run(fmt.Sprintf("n=%d/backend=%s", mlpBatch*n, be.Name()), func(b *testing.B) {
				b.SetBytes(int64(4 * 3 * mlpBatch * n))
				for b.Loop() {
					if err := be.ReluGrad(dy, dy, y); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSoftmaxCrossEntropy: the loss and its gradient on the logits.
func BenchmarkSoftmaxCrossEntropy(b *testing.B) {
	classes := mlpSizes[len(mlpSizes)-1]
	for _, be := range backends(b) {
		r := rand.New(rand.NewPCG(11, 12))
		logits, grad, stats := randBuf(b, be, r, mlpBatch*classes), randBuf(b, be, r, mlpBatch*classes), randBuf(b, be, r, 2)
		lh := make([]float32, mlpBatch)
		for i := range lh {
			lh[i] = float32(r.IntN(classes))
		}
		labels, err := be.Alloc(mlpBatch)
		if err != nil {
			b.Fatal(err)
		}
		if err := be.Upload(labels, lh); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("rows=%d,cols=%d/backend=%s", mlpBatch, classes, be.Name()), func(b *testing.B) {
			b.SetBytes(int64(4 * (2*mlpBatch*classes + mlpBatch)))
			for b.Loop() {
				if err := be.SoftmaxCrossEntropy(grad, logits, labels, mlpBatch, classes, 1/float32(mlpBatch), stats); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// mlpParams is the MLP's parameter count (weights and biases).
func mlpParams() int {
	n := 0
	for _, l := range mlpLayers() {
		n += l[0]*l[1] + l[1]
	}
	return n
}

// BenchmarkOptimizer: the update rules over the MLP's whole parameter
// vector (535,818 floats), the trainer's one call per step.
func BenchmarkOptimizer(b *testing.B) {
	n := mlpParams()
	for _, be := range backends(b) {
		r := rand.New(rand.NewPCG(13, 14))
		w, g, s := randBuf(b, be, r, n), randBuf(b, be, r, n), randBuf(b, be, r, n)
		if err := be.Scale(1e-3, g); err != nil {
			b.Fatal(err)
		}
		if err := be.Fill(s, 0); err != nil {
			b.Fatal(err)
		}
		for _, rule := range []struct {
			name    string
			streams int // floats read and written per element
			run     func() error
		}{
			{"momentum", 5, func() error {
				return be.Optimize(w, g, s, optim.NewUpdate(optim.Config{Kind: optim.Momentum, LR: 0.05, Momentum: 0.9}))
			}},
			{"sgd", 3, func() error { return be.Optimize(w, g, nil, optim.NewUpdate(optim.Config{Kind: optim.SGD, LR: 0.05})) }},
			{"momentum-wd", 5, func() error {
				return be.Optimize(w, g, s, optim.NewUpdate(optim.Config{Kind: optim.Momentum, LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4}))
			}},
		} {
			b.Run(fmt.Sprintf("rule=%s/n=%d/backend=%s", rule.name, n, be.Name()), func(b *testing.B) {
				b.SetBytes(int64(4 * rule.streams * n))
				for b.Loop() {
					if err := rule.run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFiniteCheck: the step's scan of the whole gradient for NaN and
// ±Inf, the backend's NonFinite (one goroutine) against
// trainer/model.AllFinite (what the trainer calls on its host copy today:
// integer bit tricks, split over goroutines).
func BenchmarkFiniteCheck(b *testing.B) {
	n := mlpParams()
	for _, be := range backends(b) {
		r := rand.New(rand.NewPCG(15, 16))
		g := randBuf(b, be, r, n)
		b.Run(fmt.Sprintf("n=%d/impl=NonFinite/backend=%s", n, be.Name()), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				if i, err := be.NonFinite(g); err != nil || i != -1 {
					b.Fatal(i, err)
				}
			}
		})
		host := g.(kernels.HostBuffer).Data()
		b.Run(fmt.Sprintf("n=%d/impl=model.AllFinite/backend=%s", n, be.Name()), func(b *testing.B) {
			b.SetBytes(int64(4 * n))
			for b.Loop() {
				if !model.AllFinite(host) {
					b.Fatal("not finite")
				}
			}
		})
	}
}
