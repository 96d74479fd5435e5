package model

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/optim"
)

// Optimizer applies one update rule (kernels/optim: the maths is written
// there once) to a flat parameter buffer through the backend's update ops,
// keeping the rule's state (momentum buffer or Adagrad's sum of squares) on
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
	c := o.Config
	switch c.Kind {
	case optim.LARS:
		return o.lars(w, g, 0, o.n)
	case optim.Momentum:
		return o.b.Momentum(w, g, o.state, c.LR, c.Momentum, c.WeightDecay)
	case optim.Adagrad:
		return o.b.Adagrad(w, g, o.state, c.LR, c.Eps, c.WeightDecay)
	case optim.Adam, optim.AdamW:
		return o.b.Adam(w, g, o.state, optim.NewAdamStep(c))
	}
	return o.b.SGD(w, g, c.LR, c.WeightDecay)
}

// UpdateRange applies the rule to elements [lo, lo+n) of the flat
// parameter buffer w and gradient g only (and of the state): the rule is
// element-wise, so updating a vector piece by piece gives Update's result
// bit for bit. The AllReduce strategy updates each gradient bucket as soon
// as its sum arrives. LARS is element-wise within a tensor only: its range
// must hold whole tensors (ErrShape otherwise).
func (o *Optimizer) UpdateRange(w, g kernels.Buffer, lo, n int) error {
	if lo < 0 || n < 0 || lo+n > o.n {
		return fmt.Errorf("optimizer update of [%d,%d) outside its %d parameters: %w", lo, lo+n, o.n, kernels.ErrShape)
	}
	c, b := o.Config, o.b
	wv, gv := b.View(w, lo, n), b.View(g, lo, n)
	switch c.Kind {
	case optim.Momentum:
		return b.Momentum(wv, gv, b.View(o.state, lo, n), c.LR, c.Momentum, c.WeightDecay)
	case optim.Adagrad:
		return b.Adagrad(wv, gv, b.View(o.state, lo, n), c.LR, c.Eps, c.WeightDecay)
	case optim.Adam, optim.AdamW:
		return b.Adam(wv, gv, b.View(o.state, 2*lo, 2*n), optim.NewAdamStep(c))
	case optim.LARS:
		return o.lars(w, g, lo, n)
	}
	return b.SGD(wv, gv, c.LR, c.WeightDecay)
}

// lars applies LARS to the tensors in [lo, lo+n), each with its own trust
// ratio (the backend's LARS op, one tensor a call). The range must hold
// whole tensors (the AllReduce buckets are whole layers): a trust ratio of
// part of a tensor would not be the whole update's.
func (o *Optimizer) lars(w, g kernels.Buffer, lo, n int) error {
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
	b, s := o.b, optim.NewLARSStep(o.Config)
	for t, a := range starts {
		e := end(t)
		if e <= lo || a >= lo+n || a == e {
			continue
		}
		if a < lo || e > lo+n {
			return fmt.Errorf("lars update of [%d,%d) cuts the tensor [%d,%d): %w", lo, lo+n, a, e, kernels.ErrShape)
		}
		if err := b.LARS(b.View(w, a, e-a), b.View(g, a, e-a), b.View(o.state, a, e-a), s); err != nil {
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
