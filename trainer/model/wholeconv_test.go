package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/kernelstest"
)

// TestWholeConvPath: a network on a backend with library-served whole
// convolutions (kernelstest.NewWholeConvCPU, cuDNN's stand-in) computes
// the gradient of its columns path: LeNet-5 (5×5, max pooling, biases)
// and ResNet-20 (3×3 "same" and strided convolutions, 1×1 projections,
// batch norm, residual adds), one step from the same weights and batch.
func TestWholeConvPath(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     Shape
		layers []LayerSpec
		rows   int
	}{
		{"lenet5", Shape{C: 1, H: 28, W: 28}, LeNet5(10), 6},
		{"resnet20", Shape{C: 3, H: 32, W: 32}, ResNet20(10), 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			arch, err := NewNet(c.in, c.layers, 10, SoftmaxCE)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(5, 6))
			init := arch.InitParams(7)
			batch := make([]float32, c.rows*(c.in.Size()+1))
			for i := range c.rows * c.in.Size() {
				batch[i] = r.Float32()
			}
			for i := range c.rows {
				batch[c.rows*c.in.Size()+i] = float32(i % 10)
			}
			grads := func(be kernels.Backend, whole bool) []float32 {
				m, err := New(arch, be, c.rows)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Free()
				if (m.whole != nil) != whole {
					t.Fatalf("whole convolutions used: %v, want %v", m.whole != nil, whole)
				}
				if err := be.Upload(m.Params, init); err != nil {
					t.Fatal(err)
				}
				if m.State != nil {
					if err := be.Upload(m.State, arch.InitState()); err != nil {
						t.Fatal(err)
					}
				}
				if err := m.Upload(batch, c.rows); err != nil {
					t.Fatal(err)
				}
				if err := m.Step(1/float32(c.rows), nil); err != nil {
					t.Fatal(err)
				}
				g := make([]float32, m.Grads.Len())
				if err := be.Download(g, m.Grads); err != nil {
					t.Fatal(err)
				}
				return g
			}
			want, got := grads(cpu.New(), false), grads(kernelstest.NewWholeConvCPU(), true)
			var top float64
			for _, v := range want {
				top = max(top, math.Abs(float64(v)))
			}
			bad := 0
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*top+1e-4*math.Abs(float64(want[i])) {
					if bad++; bad <= 5 {
						t.Errorf("gradient[%d] %g, columns path %g", i, got[i], want[i])
					}
				}
			}
		})
	}
}
