package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
)

// recordingCPU is the cpu backend with a stand-in for kernels.GraphOps:
// Capture keeps the function instead of running it, and a launch runs it
// again, as replaying a recording queues the same ops. It counts both.
type recordingCPU struct {
	*cpu.Backend
	captures, launches int
}

type fnGraph struct {
	b *recordingCPU
	f func() error
}

func (g *fnGraph) Launch() error { g.b.launches++; return g.f() }
func (g *fnGraph) Free() error   { return nil }

func (r *recordingCPU) Capture(f func() error) (kernels.Graph, error) {
	r.captures++
	return &fnGraph{r, f}, nil
}

// TestGraphStepBookkeeping: with UseGraph, the first step of a batch shape
// runs op by op, the second is captured and launched, later ones are
// launched, a new shape (an epoch's short last batch) starts again, a step
// with a hook never uses a graph, and the weights are those of steps run
// op by op.
func TestGraphStepBookkeeping(t *testing.T) {
	arch, err := NewNet(Shape{C: 1, H: 28, W: 28}, LeNet5(10), 10, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	batch := func(rows int) []float32 {
		b := make([]float32, rows*(arch.Sizes[0]+1))
		for i := range rows * arch.Sizes[0] {
			b[i] = r.Float32()
		}
		for i := range rows {
			b[rows*arch.Sizes[0]+i] = float32(r.IntN(10))
		}
		return b
	}
	rows := []int{8, 8, 8, 8, 5, 5, 5, 8}
	batches := make([][]float32, len(rows))
	for i, n := range rows {
		batches[i] = batch(n)
	}
	run := func(be kernels.Backend, graph bool, hookAt int) []float32 {
		m, err := New(arch, be, 8)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Free()
		m.UseGraph = graph
		if err := be.Upload(m.Params, arch.InitParams(4)); err != nil {
			t.Fatal(err)
		}
		var grads []float32
		for i, b := range batches {
			if err := m.Upload(b, rows[i]); err != nil {
				t.Fatal(err)
			}
			var hook GradHook
			if i == hookAt {
				hook = func(int, int, int) error { return nil }
			}
			if err := m.Step(1/float32(rows[i]), hook); err != nil {
				t.Fatal(err)
			}
			g := make([]float32, m.Grads.Len())
			if err := be.Download(g, m.Grads); err != nil {
				t.Fatal(err)
			}
			grads = append(grads, g...)
		}
		return grads
	}
	want := run(cpu.New(), false, -1)
	rec := &recordingCPU{Backend: cpu.New()}
	got := run(rec, true, 2)
	if !slices.EqualFunc(got, want, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
		t.Error("the gradients of the graph steps differ from those op by op")
	}
	// Rows 8: op by op, captured (+launch), hook (op by op), launch;
	// rows 5: op by op, captured (+launch), launch; rows 8: launch.
	if rec.captures != 2 || rec.launches != 5 {
		t.Errorf("%d captures and %d launches, want 2 and 5", rec.captures, rec.launches)
	}
	// A backend without graphs is stepped op by op.
	if got := run(cpu.New(), true, -1); !slices.Equal(got, want) {
		t.Error("UseGraph on a backend without graphs changed the gradients")
	}
}
