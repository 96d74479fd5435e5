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
	if cfg.Kind.HasState() {
		var err error
		if o.state, err = b.Alloc(n); err != nil {
			return nil, fmt.Errorf("%v optimizer state (%d floats): %w", cfg.Kind, n, err)
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
	}
	return o.b.SGD(w, g, c.LR, c.WeightDecay)
}

// StateLen is the number of floats of state the rule keeps (0 for SGD).
func (o *Optimizer) StateLen() int {
	if o.state == nil {
		return 0
	}
	return o.n
}

// SaveState returns a host copy of the rule's state (nil for SGD).
func (o *Optimizer) SaveState() ([]float32, error) {
	if o.state == nil {
		return nil, nil
	}
	s := make([]float32, o.n)
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
