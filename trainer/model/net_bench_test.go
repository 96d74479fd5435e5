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
// where OpenBLAS cannot be loaded), in samples/s.
func BenchmarkLeNet5Step(b *testing.B) {
	arch, err := NewNet(Shape{C: 1, H: 28, W: 28}, LeNet5(10), 10, SoftmaxCE)
	if err != nil {
		b.Fatal(err)
	}
	const rows = 64
	for _, name := range []string{"cpu", "blas"} {
		b.Run(name, func(b *testing.B) {
			var be kernels.Backend = cpu.New()
			if name == "blas" {
				bb, err := blas.Open(kernels.Options{Threads: 1})
				if err != nil {
					b.Skipf("blas: %v", err)
				}
				be = bb
			}
			m, err := New(arch, be, rows)
			if err != nil {
				b.Fatal(err)
			}
			be.Upload(m.Params, arch.InitParams(1))
			r := rand.New(rand.NewPCG(1, 2))
			batch := make([]float32, rows*785)
			for i := range rows * 784 {
				batch[i] = r.Float32()
			}
			for i := range rows {
				batch[rows*784+i] = float32(i % 10)
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
		})
	}
}
