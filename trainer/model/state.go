package model

import (
	"fmt"
	"slices"

	"github.com/dml-project/dml/kernels"
)

// State is a model's training state besides where the loop is: its
// weights (Params, the Layers layout), its optimizer's state (Opt: the
// momentum buffer, Adagrad's accumulators, Adam's moments; nil for SGD)
// and its layers' buffers (Buffers, Arch.StateTensors: batch norm's
// running statistics; nil for a model without). Every path that keeps or
// hands on a model — checkpoints, the last word, trainer.TrainState,
// resharding, evaluation, --save — holds this one value, so that a buffer
// cannot be left behind by one of them (issue 32: batch norm's statistics
// restarted on every resume when they were a third vector threaded by
// hand). The JSON names are trainer.TrainState's.
type State struct {
	Params  []float32 `json:"params"`
	Opt     []float32 `json:"opt_state"`
	Buffers []float32 `json:"model_state,omitempty"`
}

// Clone returns a deep copy.
func (s State) Clone() State {
	return State{Params: slices.Clone(s.Params), Opt: slices.Clone(s.Opt), Buffers: slices.Clone(s.Buffers)}
}

// Capture downloads a backend's buffers into s: params, opt and buffers
// (opt and buffers may be nil: s's stay nil), reusing s's slices where
// they are long enough.
func (s *State) Capture(b kernels.Backend, params, opt, buffers kernels.Buffer) error {
	get := func(dst *[]float32, src kernels.Buffer, what string) error {
		if src == nil {
			*dst = nil
			return nil
		}
		if cap(*dst) < src.Len() {
			*dst = make([]float32, src.Len())
		}
		*dst = (*dst)[:src.Len()]
		if err := b.Download(*dst, src); err != nil {
			return fmt.Errorf("capturing the %s: %w", what, err)
		}
		return nil
	}
	if err := get(&s.Params, params, "weights"); err != nil {
		return err
	}
	if err := get(&s.Opt, opt, "optimizer state"); err != nil {
		return err
	}
	return get(&s.Buffers, buffers, "layers' buffers")
}

// Restore uploads s into a backend's buffers: params, and opt and
// buffers where both s and the backend have them (a State without
// buffers leaves the backend's as they are: a model whose buffers start
// afresh).
func (s State) Restore(b kernels.Backend, params, opt, buffers kernels.Buffer) error {
	put := func(dst kernels.Buffer, src []float32, what string) error {
		if dst == nil || src == nil {
			return nil
		}
		if len(src) != dst.Len() {
			return fmt.Errorf("restoring the %s: %d values for %d: %w", what, len(src), dst.Len(), kernels.ErrShape)
		}
		if err := b.Upload(dst, src); err != nil {
			return fmt.Errorf("restoring the %s: %w", what, err)
		}
		return nil
	}
	if err := put(params, s.Params, "weights"); err != nil {
		return err
	}
	if err := put(opt, s.Opt, "optimizer state"); err != nil {
		return err
	}
	return put(buffers, s.Buffers, "layers' buffers")
}
