package trace

import (
	"testing"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
)

// nullBackend does nothing in the ops the benchmarks call, so that they
// measure the decorator alone (the other methods panic: nil embedded).
type nullBackend struct{ kernels.Backend }

func (nullBackend) Axpy(float32, kernels.Buffer, kernels.Buffer) error { return nil }
func (nullBackend) Gemm(bool, bool, int, int, int, float32, kernels.Buffer, kernels.Buffer, float32, kernels.Buffer) error {
	return nil
}

// nullComm posts requests that are already done.
type nullComm struct{ collectives.Comm }

type doneRequest struct{}

func (doneRequest) Wait() error { return nil }

func (nullComm) Isend([]float32, int, int) (collectives.Request, error) { return doneRequest{}, nil }

// tracers are the settings the decorator benchmarks compare: no decorator
// (what Backend(b, Nop) returns), the decorator forced around Nop (what a
// disabled tracer that is not Nop would cost), and a Recorder.
var tracers = []struct {
	name string
	t    func() Tracer
}{
	{"none", nil},
	{"nop-decorator", func() Tracer { return Nop }},
	{"recorder", func() Tracer { return NewRecorder(Options{Capacity: 1 << 12}) }},
}

func BenchmarkSpan(b *testing.B) {
	for _, tc := range tracers[1:] {
		b.Run("tracer="+tc.name, func(b *testing.B) {
			t := tc.t()
			b.ReportAllocs()
			for b.Loop() {
				t.Begin("Gemm").Cat(Compute).Arg("m", 64).Arg("n", 256).Arg("k", 784).End()
			}
		})
	}
}

func BenchmarkBackend(b *testing.B) {
	x, y := newFakeBuf(256), newFakeBuf(256)
	for _, tc := range tracers {
		b.Run("op=Gemm/trace="+tc.name, func(b *testing.B) {
			var be kernels.Backend = nullBackend{}
			if tc.t != nil {
				be = &tracedBackend{b: be, t: tc.t()} // forced: Backend(be, Nop) would not wrap
			}
			b.ReportAllocs()
			for b.Loop() {
				be.Gemm(false, true, 16, 16, 1, 1, x, y, 0, x)
			}
		})
		b.Run("op=Axpy/trace="+tc.name, func(b *testing.B) {
			var be kernels.Backend = nullBackend{}
			if tc.t != nil {
				be = &tracedBackend{b: be, t: tc.t()}
			}
			b.ReportAllocs()
			for b.Loop() {
				be.Axpy(2, x, y)
			}
		})
	}
}

func BenchmarkComm(b *testing.B) {
	buf := make([]float32, 1024)
	for _, tc := range tracers {
		b.Run("op=Isend+Wait/trace="+tc.name, func(b *testing.B) {
			var c collectives.Comm = nullComm{}
			if tc.t != nil {
				c = wrapComm(c, tc.t())
			}
			b.SetBytes(4 * int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				r, _ := c.Isend(buf, 1, 0)
				r.Wait()
			}
		})
	}
}

// TestNopDecoratorDoesNotAllocate: even forced around Nop, a decorated op
// allocates nothing (a decorated Isend allocates its traced Request).
func TestNopDecoratorDoesNotAllocate(t *testing.T) {
	x := newFakeBuf(4)
	be := &tracedBackend{b: nullBackend{}, t: Nop}
	if a := testing.AllocsPerRun(1000, func() { be.Gemm(true, false, 2, 2, 1, 1, x, x, 0, x) }); a != 0 {
		t.Errorf("Gemm through the decorator with Nop allocates %v times", a)
	}
}
