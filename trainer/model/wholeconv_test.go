package model

import (
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/blas"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/kernelstest"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// TestWholeConvPath: a network on a backend with library-served whole
// convolutions (kernelstest.NewWholeConvCPU, cuDNN's stand-in; and
// kernelstest.NewReversedCPU, whose library also serves batch norm and
// leaves its outputs in a layout of its own, as oneDNN does) computes the
// gradient of its columns path: LeNet-5 (5×5, max pooling, biases),
// ResNet-20 (3×3 "same" and strided convolutions, 1×1 projections, batch
// norm, residual adds) and a network of the other pools (padded and
// overlapping max pools, a global average), one step from the same
// weights and batch; the library's pools serve where it has them.
func TestWholeConvPath(t *testing.T) {
	testWholeConvPath(t, map[string]func() kernels.Backend{
		"plain":    kernelstest.NewWholeConvCPU,
		"reversed": kernelstest.NewReversedCPU,
	})
}

// testWholeConvPath is TestWholeConvPath on the backends given.
func testWholeConvPath(t *testing.T, backends map[string]func() kernels.Backend) {
	for _, c := range []struct {
		name   string
		in     Shape
		layers []LayerSpec
		rows   int
	}{
		{"lenet5", Shape{C: 1, H: 28, W: 28}, LeNet5(10), 6},
		{"resnet20", Shape{C: 3, H: 32, W: 32}, ResNet20(10), 3},
		// ResNet-50's stem and AlexNet's overlapping pool, on 16 and 32
		// channels: the pools of data in a library's layout.
		{"pools", Shape{C: 3, H: 19, W: 19}, []LayerSpec{
			{Kind: KindConv, Name: "c1", Out: 16, Kernel: 3, Stride: 2, Pad: 1, NoBias: true},
			{Kind: KindBatchNorm, Name: "bn1"},
			{Kind: KindReLU},
			{Kind: KindMaxPool, Kernel: 3, Stride: 2, Pad: 1},
			{Kind: KindConv, Name: "c2", Out: 32, Kernel: 3, Pad: 1},
			{Kind: KindReLU},
			{Kind: KindMaxPool, Kernel: 3, Stride: 2},
			{Kind: KindConv, Name: "c3", Out: 32, Kernel: 1},
			{Kind: KindAvgPool},
			{Kind: KindFlatten},
			{Kind: KindLinear, Name: "fc", Out: 10},
		}, 3},
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
			grads := func(be kernels.Backend, whole bool, choice ConvChoice) []float32 {
				m, err := NewChosen(arch, be, c.rows, choice)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Free()
				if (m.cv.whole != nil) != whole {
					t.Fatalf("whole convolutions used: %v, want %v", m.cv.whole != nil, whole)
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
			want := grads(cpu.New(), false, nil)
			// Every other convolution on the library, the rest on dml's
			// kernels (what --kernels auto may choose).
			mixed := make(ConvChoice, len(arch.ConvLayers()))
			for i := range mixed {
				mixed[i] = i%2 == 1
			}
			for name, open := range backends {
				compare(t, name, want, grads(open(), true, nil))
				compare(t, name+", mixed", want, grads(open(), true, mixed))
			}
		})
	}
}

// compare asks got to be want within 1e-4 of want's largest element
// plus 1e-4 relative.
func compare(t *testing.T, name string, want, got []float32) {
	t.Helper()
	var top float64
	for _, v := range want {
		top = max(top, math.Abs(float64(v)))
	}
	bad := 0
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*top+1e-4*math.Abs(float64(want[i])) {
			if bad++; bad <= 5 {
				t.Errorf("%s: gradient[%d] %g, columns path %g", name, i, got[i], want[i])
			}
		}
	}
}

// TestOneDNNPath is TestWholeConvPath on oneDNN (--backend blas --kernels
// onednn): its convolutions and batch norms in its blocked layouts,
// passed from layer to layer.
func TestOneDNNPath(t *testing.T) {
	opts := kernels.Options{Kernels: kernels.KernelChoice{Libs: []string{kernels.LibOneDNN}}}
	if be, err := blas.Open(opts); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no oneDNN here: %v", err)
		}
		t.Fatal(err)
	} else {
		be.Close()
	}
	testWholeConvPath(t, map[string]func() kernels.Backend{"onednn": func() kernels.Backend {
		be, err := blas.Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		return be
	}})
	// The gradients above went through oneDNN's batch norm fused with its
	// ReLU: ResNet-20's stem and each block's first batch norm (a block's
	// second feeds the residual add, not a ReLU).
	be, _ := blas.Open(opts)
	defer be.Close()
	arch, err := NewNet(Shape{C: 3, H: 32, W: 32}, ResNet20(10), 10, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(arch, be, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	fused := 0
	for i := range m.nodes {
		if m.fusedNorm(i) {
			fused++
		}
	}
	if fused != 10 {
		t.Errorf("%d batch norms fused with their ReLU, want 10", fused)
	}
}

// TestLibraryFailureIsAnError: a library whose reorder fails inside a
// buffer's accessor (no error to return there) makes the step return an
// error naming the layer, the library and its status, never a panic,
// wherever in the step it fails.
func TestLibraryFailureIsAnError(t *testing.T) {
	arch, err := NewNet(Shape{C: 1, H: 28, W: 28}, LeNet5(10), 10, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 4
	batch := make([]float32, rows*(arch.Input.Size()+1))
	failed := 0
	for ok := 0; ok <= 12; ok++ {
		be := kernelstest.NewFailingReorderCPU(ok)
		m, err := New(arch, be, rows)
		if err != nil {
			t.Fatal(err)
		}
		err = be.Upload(m.Params, arch.InitParams(1))
		if err == nil {
			err = m.Upload(batch, rows)
		}
		if err == nil {
			err = m.Step(1.0/rows, nil)
		}
		if err == nil {
			g := make([]float32, m.Grads.Len())
			err = be.Download(g, m.Grads)
		}
		m.Free()
		if err == nil {
			continue // the step needed no more reorders than ok
		}
		failed++
		if !strings.Contains(err.Error(), "status 5: planted") || !strings.Contains(err.Error(), "reversed") {
			t.Errorf("reorders failing after %d: %v; want the library's name and status", ok, err)
		}
	}
	if failed == 0 {
		t.Fatal("no step needed a reorder: the failure was never planted")
	}
}

// TestEmptyBatchKeepsStatistics: a training step of no rows (a rank's
// share of an epoch's last step, or the empty micro-batches SyncBN's
// accumulation runs) leaves the batch norms' running statistics and
// num_batches_tracked as they were (the update had pulled the statistics
// towards 0), with and without SyncBN; a step with rows moves them.
func TestEmptyBatchKeepsStatistics(t *testing.T) {
	arch, err := NewNet(Shape{C: 3, H: 8, W: 8}, []LayerSpec{
		{Kind: KindConv, Name: "c1", Out: 4, Kernel: 3, Pad: 1, NoBias: true}, {Kind: KindBatchNorm, Name: "bn1"}, {Kind: KindReLU},
		{Kind: KindAvgPool}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 3},
	}, 3, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	for _, sync := range []bool{false, true} {
		be := cpu.New()
		m, err := New(arch, be, 4)
		if err != nil {
			t.Fatal(err)
		}
		if sync {
			m.SyncBN = func([]float32) error { return nil } // one rank: its own sums
		}
		if err := be.Upload(m.Params, arch.InitParams(1)); err != nil {
			t.Fatal(err)
		}
		state := func() []float32 {
			s := make([]float32, m.State.Len())
			if err := be.Download(s, m.State); err != nil {
				t.Fatal(err)
			}
			return s
		}
		if err := be.Upload(m.State, arch.InitState()); err != nil {
			t.Fatal(err)
		}
		before := state()
		batch := make([]float32, 4*(arch.Input.Size()+1))
		for i := range 4 * arch.Input.Size() {
			batch[i] = float32(i%7) * 0.3
		}
		for _, rows := range []int{0, 4} {
			if err := m.Upload(batch[:rows*(arch.Input.Size()+1)], rows); err != nil {
				t.Fatal(err)
			}
			if err := m.Step(1, nil); err != nil {
				t.Fatal(err)
			}
			moved := numtest.MaxRelDiff(state(), before) > 0
			if moved != (rows > 0) {
				t.Errorf("SyncBN %v, %d rows: the running statistics moved: %v", sync, rows, moved)
			}
		}
		m.Free()
		be.Close()
	}
}
