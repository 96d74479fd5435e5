package model

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
)

// Optimizer applies one update rule (kernels/optim: the maths is written
// there once) to a flat parameter buffer through the backend's update ops,
// keeping the rule's state (a velocity, Adagrad's sums of squares, Adam's
// moments: optim.Kind.StatePer floats a weight) on
// the same backend.
type Optimizer struct {
	Config optim.Config
	b      kernels.Backend
	n      int
	state  kernels.Buffer // nil for SGD
	// starts are the first indices of the parameter tensors, ascending
	// from 0 (LARS takes a trust ratio per tensor); nil: one tensor.
	starts []int
}

// NewOptimizer returns an optimizer for n parameters on b; its state starts
// at zero. Free releases it.
func NewOptimizer(cfg optim.Config, b kernels.Backend, n int) (*Optimizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	o := &Optimizer{Config: cfg, b: b, n: n}
	if per := cfg.Kind.StatePer(); per > 0 {
		var err error
		if o.state, err = b.Alloc(per * n); err != nil {
			return nil, fmt.Errorf("%v optimizer state (%d floats): %w", cfg.Kind, per*n, err)
		}
	}
	return o, nil
}

// NewArchOptimizer is NewOptimizer for the parameters of arch, which
// tells LARS its tensors (every weight and every bias on its own).
func NewArchOptimizer(cfg optim.Config, b kernels.Backend, arch Arch) (*Optimizer, error) {
	o, err := NewOptimizer(cfg, b, arch.NumParams())
	if err != nil {
		return nil, err
	}
	o.starts = TensorStarts(arch)
	return o, nil
}

// TensorStarts is the first flat index of each of arch's parameter
// tensors (Arch.Tensors), ascending from 0: LARS's tensors.
func TensorStarts(arch Arch) []int {
	var s []int
	for _, t := range arch.Tensors() {
		s = append(s, t.Off)
	}
	return s
}

// Update applies the rule: w ← rule(w, g).
func (o *Optimizer) Update(w, g kernels.Buffer) error {
	return o.UpdateRange(w, g, 0, o.n)
}

// UpdateRange applies the rule to elements [lo, lo+n) of the flat
// parameter buffer w and gradient g only (and of the state): an
// element-wise rule updates a vector piece by piece to Update's result bit
// for bit, and the AllReduce strategy updates each gradient bucket as soon
// as its sum arrives. A per-tensor rule (LARS) is element-wise within a
// tensor only: its range must hold whole tensors (ErrShape otherwise),
// each updated by its own call, with its own norms.
func (o *Optimizer) UpdateRange(w, g kernels.Buffer, lo, n int) error {
	if lo < 0 || n < 0 || lo+n > o.n {
		return fmt.Errorf("optimizer update of [%d,%d) outside its %d parameters: %w", lo, lo+n, o.n, kernels.ErrShape)
	}
	u := optim.NewUpdate(o.Config)
	if u.Kind.PerTensor() {
		return o.perTensor(w, g, lo, n, u)
	}
	return o.apply(w, g, lo, n, u)
}

// apply is one backend update of the elements [lo, lo+n): views of w, g
// and the state where they are not already that range.
func (o *Optimizer) apply(w, g kernels.Buffer, lo, n int, u optim.Update) error {
	b, st := o.b, o.state
	view := func(x kernels.Buffer, per int) kernels.Buffer {
		if lo == 0 && x.Len() == per*n {
			return x
		}
		return b.View(x, per*lo, per*n)
	}
	if per := u.Kind.StatePer(); per > 0 {
		st = view(st, per)
	}
	return b.Optimize(view(w, 1), view(g, 1), st, u)
}

// perTensor applies a per-tensor rule to the tensors in [lo, lo+n), one
// call each. The range must hold whole tensors (the AllReduce buckets are
// whole layers): the norms of part of a tensor would not be the whole
// update's.
func (o *Optimizer) perTensor(w, g kernels.Buffer, lo, n int, u optim.Update) error {
	starts := o.starts
	if len(starts) == 0 {
		starts = []int{0}
	}
	end := func(t int) int {
		if t+1 < len(starts) {
			return starts[t+1]
		}
		return o.n
	}
	for t, a := range starts {
		e := end(t)
		if e <= lo || a >= lo+n || a == e {
			continue
		}
		if a < lo || e > lo+n {
			return fmt.Errorf("%v update of [%d,%d) cuts the tensor [%d,%d): %w", u.Kind, lo, lo+n, a, e, kernels.ErrShape)
		}
		if err := o.apply(w, g, a, e-a, u); err != nil {
			return err
		}
	}
	return nil
}

// StateLen is the number of floats of state the rule keeps (0 for SGD).
func (o *Optimizer) StateLen() int {
	return o.Config.Kind.StatePer() * o.n
}

// StateBuffer is the rule's state on the backend (nil for SGD).
func (o *Optimizer) StateBuffer() kernels.Buffer { return o.state }

// SaveState returns a host copy of the rule's state (nil for SGD).
func (o *Optimizer) SaveState() ([]float32, error) {
	if o.state == nil {
		return nil, nil
	}
	s := make([]float32, o.StateLen())
	if err := o.b.Download(s, o.state); err != nil {
		return nil, fmt.Errorf("%v optimizer state: %w", o.Config.Kind, err)
	}
	return s, nil
}

// LoadState replaces the rule's state with s, as SaveState returned it.
func (o *Optimizer) LoadState(s []float32) error {
	if len(s) != o.StateLen() {
		return fmt.Errorf("%v optimizer state of %d floats, want %d: %w", o.Config.Kind, len(s), o.StateLen(), kernels.ErrShape)
	}
	if o.state == nil {
		return nil
	}
	return o.b.Upload(o.state, s)
}

// Free releases the state buffer.
func (o *Optimizer) Free() error {
	err := o.b.Free(o.state)
	o.state = nil
	return err
}
