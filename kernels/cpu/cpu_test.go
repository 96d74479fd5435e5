package cpu_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/kernelstest"
)

func TestConformance(t *testing.T) {
	kernelstest.Run(t, func() kernels.Backend { return cpu.New() })
}

func TestRegistered(t *testing.T) {
	be, err := kernels.Open("cpu", kernels.Options{LocalRank: 3, Precision: kernels.TF32})
	if err != nil {
		t.Fatal(err)
	}
	if be.Name() != "cpu" {
		t.Errorf("Open(cpu).Name() = %q", be.Name())
	}
	if _, ok := be.(*cpu.Backend); !ok {
		t.Errorf("Open(cpu) = %T", be)
	}
}

// The tests below pin what this backend promises beyond kernels.Backend.

// panicMessage runs f and returns what it panicked with, or "" if it did
// not panic.
func panicMessage(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg, _ = p.(string)
			if msg == "" {
				msg = "(non-string panic)"
			}
		}
	}()
	f()
	return ""
}

// buf allocates n elements holding vals (zeros if vals is shorter).
func buf(t *testing.T, be *cpu.Backend, n int, vals ...float32) *cpu.Buffer {
	t.Helper()
	b, err := be.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	copy(b.(*cpu.Buffer).Data(), vals)
	return b.(*cpu.Buffer)
}

func TestProgrammerErrorsPanic(t *testing.T) {
	be, other := cpu.New(), cpu.New()
	b := buf(t, be, 10)
	freed := buf(t, be, 4)
	freedView := be.View(freed, 1, 2)
	if err := be.Free(freed); err != nil {
		t.Fatal(err)
	}
	closed := cpu.New()
	cb := buf(t, closed, 2)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"View past the end", "out of range", func() { be.View(b, 8, 3) }},
		{"View negative offset", "out of range", func() { be.View(b, -1, 2) }},
		{"View negative length", "out of range", func() { be.View(b, 2, -1) }},
		{"View offset past the end", "out of range", func() { be.View(b, 11, 0) }},
		{"View with overflowing end", "out of range", func() { be.View(b, 5, math.MaxInt) }},
		{"another cpu.Backend's buffer", "different cpu.Backend", func() { _ = be.Fill(buf(t, other, 3), 1) }},
		{"nil Buffer", "<nil>", func() { _ = be.Fill(nil, 1) }},
		{"nil *cpu.Buffer", "nil *cpu.Buffer", func() { _ = be.Fill((*cpu.Buffer)(nil), 1) }},
		{"use after Free", "after Free", func() { _ = be.Fill(freed, 1) }},
		{"view used after Free", "after Free", func() { _ = be.Fill(freedView, 1) }},
		{"Free twice", "after Free", func() { _ = be.Free(freed) }},
		{"Free of a View", "Free of a View", func() { _ = be.Free(be.View(b, 1, 2)) }},
		{"op after Close", "after Close", func() { _ = closed.Fill(cb, 1) }},
		{"Alloc after Close", "after Close", func() { _, _ = closed.Alloc(1) }},
		{"Sync after Close", "after Close", func() { _ = closed.Sync() }},
	} {
		if got := panicMessage(c.f); !strings.Contains(got, c.want) {
			t.Errorf("%s: panic %q, want one mentioning %q", c.name, got, c.want)
		}
	}
	if err := be.Free(nil); err != nil {
		t.Errorf("Free(nil) = %v", err)
	}
	if err := be.Free((*cpu.Buffer)(nil)); err != nil {
		t.Errorf("Free((*cpu.Buffer)(nil)) = %v", err)
	}
}

func TestErrorsNameOpAndShapes(t *testing.T) {
	be := cpu.New()
	if _, err := be.Alloc(-3); !errors.Is(err, kernels.ErrShape) || !strings.Contains(err.Error(), "cpu.Alloc: negative length -3") {
		t.Errorf("Alloc(-3) error = %v", err)
	}
	err := be.Gemm(false, false, 2, 3, 4, 1, buf(t, be, 7), buf(t, be, 12), 0, buf(t, be, 6))
	if !errors.Is(err, kernels.ErrShape) || !strings.Contains(err.Error(), "cpu.Gemm: a has 7 elements, want 2×4 = 8") {
		t.Errorf("Gemm error = %v", err)
	}
	grad, stats := buf(t, be, 6, 1, 2, 3, 4, 5, 6), buf(t, be, 2, 9, 9)
	for _, c := range []struct {
		label float32
		want  string
	}{
		{3, "label 3 of row 1 is not a class index in [0, 3)"},
		{-1, "label -1 of row 1"},
		{0.5, "label 0.5 of row 1"},
		{float32(math.NaN()), "label NaN of row 1"},
	} {
		err = be.SoftmaxCrossEntropy(grad, buf(t, be, 6), buf(t, be, 2, 1, c.label), 2, 3, 1, stats)
		if !errors.Is(err, kernels.ErrShape) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SoftmaxCrossEntropy with label %v: error = %v, want one saying %q", c.label, err, c.want)
		}
	}
	err = be.SigmoidCrossEntropy(buf(t, be, 2), buf(t, be, 2), buf(t, be, 2, 1, 2), 2, 1, stats)
	if !errors.Is(err, kernels.ErrShape) || !strings.Contains(err.Error(), "label 2 of row 1 is not a class index in [0, 2)") {
		t.Errorf("SigmoidCrossEntropy error = %v", err)
	}
	if g := grad.Data(); g[0] != 1 || g[5] != 6 || stats.Data()[0] != 9 || stats.Data()[1] != 9 {
		t.Errorf("grad %v, stats %v written by a call that failed", g, stats.Data())
	}
}

func TestReluPropagatesNaN(t *testing.T) {
	be := cpu.New()
	x := buf(t, be, 3, float32(math.NaN()), -1, 2)
	if err := be.Relu(x, x); err != nil {
		t.Fatal(err)
	}
	if got, err := be.NonFinite(x); got != 0 || err != nil {
		t.Errorf("NonFinite after Relu of [NaN, -1, 2] = %d, %v; want 0", got, err)
	}
}

func TestDotAccumulatesInFloat64(t *testing.T) {
	be := cpu.New()
	x, y := buf(t, be, 3, 1e8, 1, -1e8), buf(t, be, 3, 1, 1, 1) // float32 sums lose the 1
	if got, err := be.Dot(x, y); err != nil || got != 1 {
		t.Errorf("Dot = %v, %v; want 1", got, err)
	}
}

func TestLossSumAccumulatesInFloat64(t *testing.T) {
	// Row losses of about 1e4 and 1e-3: a float32 running sum would drop
	// the small ones; float64 keeps them until the final rounding.
	be := cpu.New()
	const rows = 1000
	z := make([]float32, 2*rows)
	labels := make([]float32, rows)
	z[0], labels[0] = 1e4, 1 // loss 1e4
	var want float64 = 1e4
	for i := 1; i < rows; i++ {
		z[2*i] = 7 // label 0, loss log(1 + e⁻⁷)
		want += math.Log1p(math.Exp(float64(-7)))
	}
	stats := buf(t, be, 2)
	if err := be.SoftmaxCrossEntropy(buf(t, be, 2*rows), buf(t, be, 2*rows, z...), buf(t, be, rows, labels...), rows, 2, 1, stats); err != nil {
		t.Fatal(err)
	}
	if got := stats.Data(); got[0] != float32(want) || got[1] != rows-1 {
		t.Errorf("stats = %v, want [%v %d]", got, float32(want), rows-1)
	}
}

func TestSumIntoFirstOrSecondSource(t *testing.T) {
	be := cpu.New()
	acc, g, h := buf(t, be, 2, 1, 2), buf(t, be, 2, 10, 20), buf(t, be, 2, 100, 200)
	if err := be.Sum(acc, acc, g, h); err != nil {
		t.Fatal(err)
	}
	if err := be.Sum(acc, g, acc); err != nil {
		t.Fatal(err)
	}
	if got := acc.Data(); got[0] != 121 || got[1] != 242 {
		t.Errorf("acc = %v, want [121 242]", got)
	}
}

func TestArgmaxTiesTakeFirst(t *testing.T) {
	be := cpu.New()
	x := buf(t, be, 6, 1, 3, 3, 5, 5, 0)
	out := buf(t, be, 2)
	if err := be.Predict(out, x, 2, 3); err != nil {
		t.Fatal(err)
	}
	if got := out.Data(); got[0] != 1 || got[1] != 0 {
		t.Errorf("Predict = %v, want [1 0]", got)
	}
	stats := buf(t, be, 2)
	err := be.SoftmaxCrossEntropy(buf(t, be, 6), x, buf(t, be, 2, 2, 1), 2, 3, 1, stats)
	if err != nil || stats.Data()[1] != 0 {
		t.Errorf("SoftmaxCrossEntropy correct = %v, %v; want 0 (ties go to the first index)", stats.Data()[1], err)
	}
}

func TestDataSharesMemory(t *testing.T) {
	be := cpu.New()
	b := buf(t, be, 4)
	v := be.View(b, 1, 2)
	v.(*cpu.Buffer).Data()[0] = 7
	host := make([]float32, 4)
	if err := be.Download(host, b); err != nil {
		t.Fatal(err)
	}
	if host[1] != 7 {
		t.Errorf("buffer = %v, want 7 at 1", host)
	}
	var _ kernels.HostBuffer = v.(*cpu.Buffer)
}

func TestAxpyAliased(t *testing.T) {
	be := cpu.New()
	x := buf(t, be, 3, 1, -2, 4)
	if err := be.Axpy(0.5, x, x); err != nil {
		t.Fatal(err)
	}
	if got := x.Data(); got[0] != 1.5 || got[1] != -3 || got[2] != 6 {
		t.Errorf("x after Axpy(0.5, x, x) = %v, want [1.5 -3 6]", got)
	}
}
