package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/data"
)

// trainFrom runs steps of momentum SGD (lr 0.05, mu 0.9) of arch on be
// from init over batches (rows each) and returns the per-step mean losses
// and the final weights.
func trainFrom(t *testing.T, be kernels.Backend, arch Arch, init []float32, batches [][]float32, rows int) ([]float64, []float32) {
	return trainSteps(t, be, arch, init, len(batches), rows, func(m *Model, s int) error { return m.Upload(batches[s], rows) })
}

// trainSteps is trainFrom with each step's batch put on the backend by
// load.
func trainSteps(t *testing.T, be kernels.Backend, arch Arch, init []float32, steps, rows int, load func(m *Model, s int) error) ([]float64, []float32) {
	t.Helper()
	m, err := New(arch, be, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	opt, err := NewOptimizer(optim.Config{Kind: optim.Momentum, LR: 0.05, Momentum: 0.9}, be, m.NumParams())
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Free()
	if err := be.Upload(m.Params, init); err != nil {
		t.Fatal(err)
	}
	if m.State != nil {
		if err := be.Upload(m.State, arch.InitState()); err != nil {
			t.Fatal(err)
		}
	}
	var losses []float64
	stats := make([]float32, GradStats)
	for s := range steps {
		if err := load(m, s); err != nil {
			t.Fatal(err)
		}
		if err := m.Step(1/float32(rows), nil); err != nil {
			t.Fatal(err)
		}
		if err := opt.Update(m.Params, m.GradView()); err != nil {
			t.Fatal(err)
		}
		if err := be.Download(stats, m.Stats()); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, float64(stats[0])/float64(rows))
	}
	w := make([]float32, m.NumParams())
	if err := be.Download(w, m.Params); err != nil {
		t.Fatal(err)
	}
	return losses, w
}

// TestPerturbationGrowth measures how far a rounding-sized difference
// carries in a few training steps, on the CPU alone: the same run from
// weights one ulp apart (every weight nudged up by one unit in the last
// place). It is why a GPU run whose libraries sum in another order (cuDNN,
// cuBLAS) is compared with the CPU at a wider tolerance for ResNet-20 than
// our own kernels are: batch norm at initialisation multiplies small
// differences layer after layer.
func TestPerturbationGrowth(t *testing.T) {
	for _, c := range []struct {
		name   string
		in     Shape
		layers []LayerSpec
		rows   int
		steps  int
	}{
		{"lenet5", Shape{C: 1, H: 28, W: 28}, LeNet5(10), 32, 5},
		{"lenet5-100", Shape{C: 1, H: 28, W: 28}, LeNet5(10), 64, 100},
		{"resnet20", Shape{C: 3, H: 32, W: 32}, ResNet20(10), 16, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			arch, err := NewNet(c.in, c.layers, 10, SoftmaxCE)
			if err != nil {
				t.Fatal(err)
			}
			init := arch.InitParams(3)
			r := rand.New(rand.NewPCG(5, 6))
			batches := make([][]float32, c.steps)
			for s := range batches {
				b := make([]float32, c.rows*(c.in.Size()+1))
				for i := range c.rows * c.in.Size() {
					b[i] = r.Float32()
				}
				for i := range c.rows {
					b[c.rows*c.in.Size()+i] = float32(r.IntN(10))
				}
				batches[s] = b
			}
			nudged := make([]float32, len(init))
			for i, w := range init {
				nudged[i] = math.Nextafter32(w, float32(math.Inf(1)))
			}
			l0, w0 := trainFrom(t, cpu.New(), arch, init, batches, c.rows)
			l1, w1 := trainFrom(t, cpu.New(), arch, nudged, batches, c.rows)
			var d2, u2 float64
			for i := range w0 {
				d, u := float64(w1[i]-w0[i]), float64(w0[i]-init[i])
				d2 += d * d
				u2 += u * u
			}
			rel := math.Sqrt(d2 / u2)
			t.Logf("%s: final loss %.6f vs %.6f; final ‖Δw‖/‖update‖ = %.3g", c.name, l0[len(l0)-1], l1[len(l1)-1], rel)
			// What the GPU checks' bounds rest on: LeNet-5 on random data
			// carries a nudge no further than rounding (1e-5), ResNet-20's
			// batch norms carry it to a large part of the update.
			switch {
			case c.name == "resnet20" && !(rel > 1e-2):
				t.Errorf("resnet20: a one-ulp nudge carried only to %.3g of the update: cuda's TestCNNMatchesCPU bounds for libraries can be tightened", rel)
			case c.name != "resnet20" && !(rel < 1e-3):
				t.Errorf("%s: a one-ulp nudge carried to %.3g of the update (want < 1e-3)", c.name, rel)
			}
		})
	}
}

// TestLeNetDriftFashionMNIST answers issue 31's question about LeNet-5
// after 100 steps on Fashion-MNIST, where --backend cpu and --backend
// cuda ended up to 5.4% apart (relative norm of conv2.bias) while the MLP
// stays within 4e-7: the CPU alone, from weights one ulp apart, drifts as
// far. Max pooling routes each window's gradient to one pixel, and ReLUs
// cut at zero: a rounding-sized change flips a few such choices, each
// flip moves a gradient by a whole term, and training carries it on. So
// a difference of that size between two backends is no defect; the
// per-step check on the GPU (cuda TestCNNMatchesCPU, 5 steps) is the one
// that catches a wrong op.
func TestLeNetDriftFashionMNIST(t *testing.T) {
	train, _, err := data.LoadFashionMNIST(data.DefaultFashionMNISTDir)
	if err != nil {
		t.Skipf("Fashion-MNIST is not installed (%v): make deps installs it", err)
	}
	arch, err := NewNet(Shape{C: 1, H: 28, W: 28}, LeNet5(10), 10, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	const steps, rows = 100, 64
	idx := make([]int, rows)
	run := func(init []float32) []float32 {
		_, w := trainSteps(t, cpu.New(), arch, init, steps, rows, func(m *Model, s int) error {
			for i := range idx {
				idx[i] = s*rows + i
			}
			_, err := m.LoadBatch(train, idx)
			return err
		})
		return w
	}
	init := arch.InitParams(1)
	nudged := make([]float32, len(init))
	for i, w := range init {
		nudged[i] = math.Nextafter32(w, float32(math.Inf(1)))
	}
	a, b := run(init), run(nudged)
	worst, worstName := 0.0, ""
	for _, tn := range arch.Tensors() {
		var d2, r2 float64
		for i := tn.Off; i < tn.Off+tn.Len(); i++ {
			d := float64(b[i] - a[i])
			d2 += d * d
			r2 += float64(a[i]) * float64(a[i])
		}
		rel := math.Sqrt(d2 / r2)
		t.Logf("%-12s ‖Δ‖/‖w‖ = %.3g", tn.Name, rel)
		if rel > worst {
			worst, worstName = rel, tn.Name
		}
	}
	t.Logf("worst: %s %.3g after %d steps from weights one ulp apart", worstName, worst, steps)
	if worst < 1e-3 {
		t.Errorf("one ulp grew only to %.3g in %d steps: the CPU–GPU difference of LeNet-5 is not explained by it", worst, steps)
	}
}
