package blas_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/model"
)

// The MLP the CPU path is tuned for: 784-512-256-10, batch 64 per rank.
var (
	mlpSizes = []int{784, 512, 256, 10}
	mlpBatch = 64
)

// stepFlops is the multiply-adds ×2 of one training step of an MLP at
// batch rows: per layer the forward product and the weight gradient, and
// the input gradient for every layer but the first.
func stepFlops(sizes []int, rows int) float64 {
	var f float64
	for k := 0; k+1 < len(sizes); k++ {
		products := 2.0
		if k > 0 {
			products = 3
		}
		f += products * 2 * float64(rows) * float64(sizes[k]) * float64(sizes[k+1])
	}
	return f
}

// backends are the CPU backends the benchmarks compare; blas is left out
// (with a log line) when OpenBLAS is missing.
func backends(b *testing.B) []kernels.Backend {
	bes := []kernels.Backend{cpu.New()}
	be, err := kernels.Open("blas", kernels.Options{})
	if err != nil {
		b.Logf("no blas backend: %v", err)
		return bes
	}
	return append(bes, be)
}

// BenchmarkStep times one training step of the MLP on each CPU backend as
// the allreduce trainer runs it on one rank, less the AllReduce: forward,
// loss and backward (model.Step), the host check of the gradient
// (Arch.CheckFinite) and the momentum update (SGD momentum 0.9, lr 0.05).
// It reports the step's GEMM GFLOP/s (the step's 2·m·n·k over the whole
// step time) and, per phase, the share of the step.
func BenchmarkStep(b *testing.B) {
	arch, err := model.NewArch(mlpSizes[0], mlpSizes[1:len(mlpSizes)-1], mlpSizes[len(mlpSizes)-1], model.SoftmaxCE)
	if err != nil {
		b.Fatal(err)
	}
	for _, be := range backends(b) {
		b.Run(fmt.Sprintf("mlp=784-512-256-10/batch=%d/backend=%s", mlpBatch, be.Name()), func(b *testing.B) {
			m, err := model.New(arch, be, mlpBatch)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Free()
			opt, err := model.NewOptimizer(optim.Config{Kind: optim.Momentum, LR: 0.05, Momentum: 0.9}, be, m.NumParams())
			if err != nil {
				b.Fatal(err)
			}
			if err := be.Upload(m.Params, arch.InitParams(1)); err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, 8))
			in := mlpSizes[0]
			batch := make([]float32, mlpBatch*(in+1))
			for i := range mlpBatch * in {
				batch[i] = r.Float32()
			}
			for i := range mlpBatch {
				batch[mlpBatch*in+i] = float32(r.IntN(mlpSizes[len(mlpSizes)-1]))
			}
			if err := m.Upload(batch, mlpBatch); err != nil {
				b.Fatal(err)
			}
			grad := m.Grads.(kernels.HostBuffer).Data()
			var tStep, tCheck, tUpdate time.Duration
			for b.Loop() {
				t0 := time.Now()
				if err := m.Step(1/float32(mlpBatch), nil); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := arch.CheckFinite(grad[:m.NumParams()], float64(grad[m.NumParams()])); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if err := opt.Update(m.Params, m.GradView()); err != nil {
					b.Fatal(err)
				}
				t3 := time.Now()
				tStep += t1.Sub(t0)
				tCheck += t2.Sub(t1)
				tUpdate += t3.Sub(t2)
			}
			total := (tStep + tCheck + tUpdate).Seconds()
			b.ReportMetric(stepFlops(mlpSizes, mlpBatch)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			b.ReportMetric(float64(mlpBatch)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
			b.ReportMetric(100*tStep.Seconds()/total, "%fwd+bwd")
			b.ReportMetric(100*tCheck.Seconds()/total, "%check")
			b.ReportMetric(100*tUpdate.Seconds()/total, "%update")
		})
	}
}
