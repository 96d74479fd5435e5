package model

import (
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/blas"
	"github.com/dml-project/dml/kernels/cpu"
)

// BenchmarkLeNet5Step is one training step (forward, loss, backward) of
// LeNet-5 on 1×28×28 images at batch 64, on each CPU backend (blas skips
// where OpenBLAS cannot be loaded).
func BenchmarkLeNet5Step(b *testing.B) {
	for _, name := range []string{"cpu", "blas"} {
		b.Run(name, func(b *testing.B) {
			var be kernels.Backend = cpu.New()
			if name == "blas" {
				be = openBLAS(b)
			}
			benchStep(b, Shape{C: 1, H: 28, W: 28}, LeNet5(10), be)
		})
	}
}

// BenchmarkResNet20Step is one training step of ResNet-20 on 3×32×32
// images at batch 64 on the blas backend with one thread (docs/results.md
// compares it with PyTorch's). Skips without OpenBLAS.
func BenchmarkResNet20Step(b *testing.B) {
	benchStep(b, Shape{C: 3, H: 32, W: 32}, ResNet20(10), openBLAS(b))
}

// openBLAS is the blas backend with one thread, or skips b.
func openBLAS(b *testing.B) kernels.Backend {
	be, err := blas.Open(kernels.Options{Threads: 1})
	if err != nil {
		b.Skipf("blas: %v", err)
	}
	return be
}

// benchStep times Model.Step of a 10-class network at batch 64 on be,
// on random images, reporting samples/s and the GFLOP/s of its matrix
// products (Arch.TrainFLOPs).
func benchStep(b *testing.B, in Shape, layers []LayerSpec, be kernels.Backend) {
	arch, err := NewNet(in, layers, 10, SoftmaxCE)
	if err != nil {
		b.Fatal(err)
	}
	const rows = 64
	m, err := New(arch, be, rows)
	if err != nil {
		b.Fatal(err)
	}
	be.Upload(m.Params, arch.InitParams(1))
	n := in.Size()
	r := rand.New(rand.NewPCG(1, 2))
	batch := make([]float32, rows*(n+1))
	for i := range rows * n {
		batch[i] = r.Float32()
	}
	for i := range rows {
		batch[rows*n+i] = float32(i % 10)
	}
	if err := m.Upload(batch, rows); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := m.Step(1.0/rows, nil); err != nil {
			b.Fatal(err)
		}
	}
	sps := float64(rows*b.N) / b.Elapsed().Seconds()
	b.ReportMetric(sps, "samples/s")
	b.ReportMetric(sps*float64(arch.TrainFLOPs())/1e9, "GFLOP/s")
}
