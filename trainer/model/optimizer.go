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

// Update applies the rule: w ← rule(w, g).
func (o *Optimizer) Update(w, g kernels.Buffer) error {
	c := o.Config
	switch c.Kind {
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
// as its sum arrives.
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
	}
	return b.SGD(wv, gv, c.LR, c.WeightDecay)
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
