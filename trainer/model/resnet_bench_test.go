package model

import (
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/blas"
)

// BenchmarkResNet20Step is one training step of ResNet-20 on 3×32×32
// images at batch 64 on the blas backend with one thread, in samples/s
// (docs/results.md compares it with PyTorch's). Skips without OpenBLAS.
func BenchmarkResNet20Step(b *testing.B) {
	arch, err := NewNet(Shape{C: 3, H: 32, W: 32}, ResNet20(10), 10, SoftmaxCE)
	if err != nil {
		b.Fatal(err)
	}
	const rows = 64
	be, err := blas.Open(kernels.Options{Threads: 1})
	if err != nil {
		b.Skipf("blas: %v", err)
	}
	m, err := New(arch, be, rows)
	if err != nil {
		b.Fatal(err)
	}
	be.Upload(m.Params, arch.InitParams(1))
	r := rand.New(rand.NewPCG(1, 2))
	batch := make([]float32, rows*3073)
	for i := range rows * 3072 {
		batch[i] = r.Float32()
	}
	for i := range rows {
		batch[rows*3072+i] = float32(i % 10)
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
