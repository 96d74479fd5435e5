package model

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/optim"
	"github.com/dml-project/dml/trainer/data"
)

// TestGradHook: the backward pass reports each layer once, last layer
// first; each report's range is that layer's weight and bias, the ranges
// tile the gradient back to front, and everything from the reported
// offset to the end (later layers and the loss statistics) already holds
// its final value when reported.
func TestGradHook(t *testing.T) {
	arch, err := NewArch(6, []int{5, 4}, 3, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New()
	const rows = 4
	m, err := New(arch, b, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	b.Upload(m.Params, arch.InitParams(5))
	set := &data.Dense{Rows: rows, Cols: 6, Classes: 3, X: make([]float32, rows*6), Y: []int32{0, 2, 1, 2}}
	for i := range set.X {
		set.X[i] = float32(math.Cos(float64(i)))
	}
	if _, err := m.LoadBatch(set, []int{0, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	// Poison the gradient so that a range reported before it is written
	// cannot match the final values by accident.
	total := m.NumParams() + GradStats
	poison := make([]float32, total)
	for i := range poison {
		poison[i] = float32(math.NaN())
	}
	b.Upload(m.Grads, poison)
	type report struct {
		layer, lo, hi int
		suffix        []float32 // Grads[lo:] when reported
	}
	var got []report
	err = m.Step(0.25, func(layer, lo, hi int) error {
		all := make([]float32, total)
		if err := b.Download(all, m.Grads); err != nil {
			return err
		}
		got = append(got, report{layer, lo, hi, all[lo:]})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	final := make([]float32, total)
	b.Download(final, m.Grads)
	layers := arch.Layers()
	if len(got) != len(layers) {
		t.Fatalf("%d reports for %d layers", len(got), len(layers))
	}
	end := m.NumParams()
	for i, r := range got {
		k := len(layers) - 1 - i
		l := layers[k]
		if r.layer != k || r.lo != l.WOff || r.hi != l.BOff+l.Out || r.hi != end {
			t.Errorf("report %d: layer %d [%d,%d), want layer %d [%d,%d) ending where the previous began (%d)",
				i, r.layer, r.lo, r.hi, k, l.WOff, l.BOff+l.Out, end)
		}
		end = r.lo
		if !slices.Equal(r.suffix, final[r.lo:]) {
			t.Errorf("layer %d: Grads[%d:] changed after it was reported complete", r.layer, r.lo)
		}
	}
	if end != 0 {
		t.Errorf("the reports stop at %d, not at the start of the gradient", end)
	}
}

// TestHookErrorStops: an error from the hook ends the backward pass and
// names the layer.
func TestHookErrorStops(t *testing.T) {
	arch, _ := NewArch(3, []int{2}, 2, SoftmaxCE)
	b := cpu.New()
	m, err := New(arch, b, 1)
	if err != nil {
		t.Fatal(err)
	}
	m.Upload([]float32{1, 2, 3, 1}, 1)
	calls := 0
	err = m.Step(1, func(layer, lo, hi int) error {
		calls++
		return errStop
	})
	if err == nil || calls != 1 {
		t.Fatalf("got %v after %d calls, want the hook's error after 1", err, calls)
	}
}

var errStop = &stopError{}

type stopError struct{}

func (*stopError) Error() string { return "stop" }

// TestCheckFinite names every bad tensor and passes a clean gradient.
func TestCheckFinite(t *testing.T) {
	arch, _ := NewArch(2, []int{2}, 2, SoftmaxCE)
	g := make([]float32, arch.NumParams())
	if err := arch.CheckFinite(g, 1); err != nil {
		t.Fatal(err)
	}
	ls := arch.Layers()
	g[ls[1].BOff] = float32(math.Inf(1))
	g[ls[0].WOff+1] = float32(math.NaN())
	err := arch.CheckFinite(g, 1)
	if err == nil || err.Error()[:len("non-finite gradient in layer0.weight, layer1.bias")] != "non-finite gradient in layer0.weight, layer1.bias" {
		t.Fatalf("got %v", err)
	}
	if err := arch.CheckFinite(make([]float32, arch.NumParams()), math.NaN()); err == nil {
		t.Fatal("a NaN loss passed")
	}
}

// TestUpdateRangeSameBits: updating a vector piece by piece (as the
// AllReduce strategy does, bucket by bucket) gives one Update's weights and
// state bit for bit, for every rule (LARS: pieces of whole tensors, here
// the pieces themselves).
func TestUpdateRangeSameBits(t *testing.T) {
	const n = 1031
	pieces := []int{1, 17, 300, 8}
	var starts []int // the pieces' first indices, ascending
	for lo, i := n, 0; lo > 0; i++ {
		lo -= min(pieces[i%len(pieces)], lo)
		starts = append([]int{lo}, starts...)
	}
	for _, kind := range optim.Kinds {
		cfg := optim.Config{Kind: kind, LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4, Eps: 1e-10, TrustCoef: 0.01}
		run := func(pieces []int) ([]float32, []float32) {
			b := cpu.New()
			o, err := NewOptimizer(cfg, b, n)
			if err != nil {
				t.Fatal(err)
			}
			o.starts = starts
			w, _ := b.Alloc(n)
			g, _ := b.Alloc(n)
			wv, gv := make([]float32, n), make([]float32, n)
			for i := range wv {
				wv[i], gv[i] = float32(i%7)-3.1, float32(i%5)*0.37-0.6
			}
			_ = b.Upload(w, wv)
			for step := 0; step < 3; step++ {
				_ = b.Upload(g, gv)
				if pieces == nil {
					err = o.Update(w, g)
				} else {
					for lo, i := n, 0; lo > 0; i++ {
						k := min(pieces[i%len(pieces)], lo)
						lo -= k
						if err = o.UpdateRange(w, g, lo, k); err != nil {
							break
						}
					}
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			out := make([]float32, n)
			_ = b.Download(out, w)
			st, _ := o.SaveState()
			return out, st
		}
		w0, s0 := run(nil)
		w1, s1 := run(pieces)
		if !slices.Equal(w0, w1) || !slices.Equal(s0, s1) {
			t.Errorf("%v: piecewise update differs from one update", kind)
		}
	}
	b := cpu.New()
	o, _ := NewOptimizer(optim.Config{Kind: optim.SGD, LR: 0.1}, b, 10)
	w, _ := b.Alloc(10)
	if err := o.UpdateRange(w, w, 5, 6); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("range past the end: %v, want ErrShape", err)
	}
}

// TestLARSTensors: the optimizer of an Arch gives LARS each weight and
// each bias its own trust ratio (optim.LARSUpdate tensor by tensor, bit
// for bit, which one trust ratio over the whole vector is not), and a
// range that cuts a tensor is refused.
func TestLARSTensors(t *testing.T) {
	arch, err := NewArch(5, []int{4}, 3, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	cfg := optim.Config{Kind: optim.LARS, LR: 0.5, Momentum: 0.9, WeightDecay: 1e-3, TrustCoef: 0.02}
	b := cpu.New()
	o, err := NewArchOptimizer(cfg, b, arch)
	if err != nil {
		t.Fatal(err)
	}
	n := arch.NumParams()
	wv, gv := arch.InitParams(3), make([]float32, n)
	for i := range gv {
		gv[i] = float32(i%7)*0.1 - 0.3
	}
	w, _ := b.Alloc(n)
	g, _ := b.Alloc(n)
	_ = b.Upload(w, wv)
	_ = b.Upload(g, gv)
	if err := o.Update(w, g); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	_ = b.Download(got, w)
	want, v := slices.Clone(wv), make([]float32, n)
	ts := arch.Tensors()
	if len(ts) != 4 {
		t.Fatalf("%d tensors, want 4", len(ts))
	}
	for _, tn := range ts {
		lo, hi := tn.Off, tn.Off+tn.Len()
		optim.LARSUpdate(want[lo:hi], gv[lo:hi], v[lo:hi], optim.NewLARSStep(cfg))
	}
	if !slices.Equal(got, want) {
		t.Errorf("Update: %v, LARS tensor by tensor %v", got, want)
	}
	whole := slices.Clone(wv)
	optim.LARSUpdate(whole, gv, make([]float32, n), optim.NewLARSStep(cfg))
	if slices.Equal(whole, want) {
		t.Error("one trust ratio for the whole vector gives the same weights: the test tells nothing")
	}
	l := arch.Layers()[1]
	if err := o.UpdateRange(w, g, l.WOff, l.End-l.WOff); err != nil {
		t.Errorf("UpdateRange of layer 1: %v", err)
	}
	if err := o.UpdateRange(w, g, l.WOff+1, l.End-l.WOff-1); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("UpdateRange cutting a tensor: %v, want ErrShape", err)
	}
}

// TestScoreInterrupted: Interrupt is asked before each batch; once it says
// true the evaluation ends there, with the samples scored so far counted
// and Interrupted set; never asked true, the whole set is scored.
func TestScoreInterrupted(t *testing.T) {
	arch, _ := NewArch(3, []int{4}, 2, SoftmaxCE)
	m, err := New(arch, cpu.New(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	if err := m.B.Upload(m.Params, arch.InitParams(1)); err != nil {
		t.Fatal(err)
	}
	set := &data.Dense{X: make([]float32, 10*3), Y: make([]int32, 10), Rows: 10, Cols: 3, Classes: 2}
	asked := 0
	m.Interrupt = func() bool { asked++; return asked > 2 }
	s, err := m.Score(set)
	if err != nil || !s.Interrupted || s.N != 8 || asked != 3 {
		t.Fatalf("stopped before the third batch: %+v (%v), asked %d times; want 8 samples, interrupted", s, err, asked)
	}
	m.Interrupt = func() bool { return false }
	if s, err := m.Score(set); err != nil || s.Interrupted || s.N != 10 {
		t.Fatalf("not stopped: %+v (%v)", s, err)
	}
}
