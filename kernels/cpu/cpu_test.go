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

func TestProgrammerErrorsPanic(t *testing.T) {
	be, other := cpu.New(), cpu.New()
	b := be.Alloc(10)
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"Alloc(-1)", "negative length", func() { be.Alloc(-1) }},
		{"View past the end", "out of range", func() { be.View(b, 8, 3) }},
		{"View negative offset", "out of range", func() { be.View(b, -1, 2) }},
		{"View negative length", "out of range", func() { be.View(b, 2, -1) }},
		{"View offset past the end", "out of range", func() { be.View(b, 11, 0) }},
		{"View with overflowing end", "out of range", func() { be.View(b, 5, math.MaxInt) }},
		{"another cpu.Backend's buffer", "different cpu.Backend", func() { be.Fill(other.Alloc(3), 1) }},
		{"nil Buffer", "<nil>", func() { be.Fill(nil, 1) }},
		{"nil *cpu.Buffer", "nil *cpu.Buffer", func() { be.Fill((*cpu.Buffer)(nil), 1) }},
	} {
		if got := panicMessage(c.f); !strings.Contains(got, c.want) {
			t.Errorf("%s: panic %q, want one mentioning %q", c.name, got, c.want)
		}
	}
}

func TestShapeErrorNamesOp(t *testing.T) {
	be := cpu.New()
	err := be.Gemm(false, false, 2, 3, 4, 1, be.Alloc(7), be.Alloc(12), 0, be.Alloc(6))
	if !errors.Is(err, kernels.ErrShape) || !strings.Contains(err.Error(), "cpu.Gemm: a has 7 elements, want 2×4 = 8") {
		t.Errorf("Gemm error = %v", err)
	}
	_, _, err = be.SoftmaxCrossEntropy(be.Alloc(6), be.Alloc(6), []int32{1, 3}, 2, 3, 1)
	if !errors.Is(err, kernels.ErrShape) || !strings.Contains(err.Error(), "label 3 of row 1 is outside [0, 3)") {
		t.Errorf("SoftmaxCrossEntropy error = %v", err)
	}
}

func TestReluPropagatesNaN(t *testing.T) {
	be := cpu.New()
	x := be.Alloc(3)
	copy(x.(*cpu.Buffer).Data(), []float32{float32(math.NaN()), -1, 2})
	if err := be.Relu(x, x); err != nil {
		t.Fatal(err)
	}
	if got := be.NonFinite(x); got != 0 {
		t.Errorf("NonFinite after Relu of [NaN, -1, 2] = %d, want 0", got)
	}
}

func TestDotAccumulatesInFloat64(t *testing.T) {
	be := cpu.New()
	x, y := be.Alloc(3), be.Alloc(3)
	copy(x.(*cpu.Buffer).Data(), []float32{1e8, 1, -1e8}) // float32 sums lose the 1
	be.Fill(y, 1)
	if got, err := be.Dot(x, y); err != nil || got != 1 {
		t.Errorf("Dot = %v, %v; want 1", got, err)
	}
}

func TestSumIntoFirstOrSecondSource(t *testing.T) {
	be := cpu.New()
	acc, g, h := be.Alloc(2), be.Alloc(2), be.Alloc(2)
	copy(acc.(*cpu.Buffer).Data(), []float32{1, 2})
	copy(g.(*cpu.Buffer).Data(), []float32{10, 20})
	copy(h.(*cpu.Buffer).Data(), []float32{100, 200})
	if err := be.Sum(acc, acc, g, h); err != nil {
		t.Fatal(err)
	}
	if err := be.Sum(acc, g, acc); err != nil {
		t.Fatal(err)
	}
	if got := acc.(*cpu.Buffer).Data(); got[0] != 121 || got[1] != 242 {
		t.Errorf("acc = %v, want [121 242]", got)
	}
}

func TestArgmaxTiesTakeFirst(t *testing.T) {
	be := cpu.New()
	x := be.Alloc(6)
	copy(x.(*cpu.Buffer).Data(), []float32{1, 3, 3, 5, 5, 0})
	out := make([]int32, 2)
	if err := be.Predict(out, x, 2, 3); err != nil {
		t.Fatal(err)
	}
	if out[0] != 1 || out[1] != 0 {
		t.Errorf("Predict = %v, want [1 0]", out)
	}
	_, correct, err := be.SoftmaxCrossEntropy(be.Alloc(6), x, []int32{2, 1}, 2, 3, 1)
	if err != nil || correct != 0 {
		t.Errorf("SoftmaxCrossEntropy correct = %d, %v; want 0 (ties go to the first index)", correct, err)
	}
}

func TestDataSharesMemory(t *testing.T) {
	be := cpu.New()
	b := be.Alloc(4)
	v := be.View(b, 1, 2)
	v.(*cpu.Buffer).Data()[0] = 7
	host := make([]float32, 4)
	if err := be.Download(host, b); err != nil {
		t.Fatal(err)
	}
	if host[1] != 7 {
		t.Errorf("buffer = %v, want 7 at 1", host)
	}
}

func TestAxpyAliased(t *testing.T) {
	be := cpu.New()
	x := be.Alloc(3)
	copy(x.(*cpu.Buffer).Data(), []float32{1, -2, 4})
	if err := be.Axpy(0.5, x, x); err != nil {
		t.Fatal(err)
	}
	if got := x.(*cpu.Buffer).Data(); got[0] != 1.5 || got[1] != -3 || got[2] != 6 {
		t.Errorf("x after Axpy(0.5, x, x) = %v, want [1.5 -3 6]", got)
	}
}
