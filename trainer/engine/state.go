package engine

import (
	"fmt"
	"slices"

	"github.com/dml-project/dml/trainer/ckpt"
	"github.com/dml-project/dml/trainer/model"
)

// Position is where the loop is (ckpt.Position); Segment is a stretch of
// an epoch begun by another number of ranks (ckpt.Segment).
type (
	Position = ckpt.Position
	Segment  = ckpt.Segment
)

// TrainState is everything a run needs to continue: the weights, the
// optimizer's state (optim.Kind.StatePer floats a weight; none for SGD),
// the layers' buffers and the Position. It is a plain value: copy it, store it, hand it
// to another Trainer (Trainer.Start) and training goes on bit for bit as
// if it had never stopped.
type TrainState struct {
	Arch model.Arch `json:"arch"`
	// State: the weights, the optimizer's state and the layers' buffers
	// (batch norm's running statistics: empty for models without, or for
	// a state from before they were kept, which then start afresh).
	model.State
	Position
}

// Clone returns a deep copy.
func (s TrainState) Clone() TrainState {
	s.Reshard = slices.Clone(s.Reshard)
	s.Arch.Sizes = slices.Clone(s.Arch.Sizes)
	s.State = s.State.Clone()
	return s
}

// Check reports a state that does not fit arch and an optimizer with
// optLen floats of state.
func (s *TrainState) Check(arch model.Arch, optLen int) error {
	switch {
	case !s.Arch.Equal(arch):
		return fmt.Errorf("resuming: the state is of a model %s, this job builds %s", s.Arch.Describe(), arch.Describe())
	case len(s.Params) != arch.NumParams():
		return fmt.Errorf("resuming: the state has %d weights, the model %d", len(s.Params), arch.NumParams())
	case len(s.Opt) != optLen:
		return fmt.Errorf("resuming: the state has %d floats of optimizer state, this optimizer keeps %d", len(s.Opt), optLen)
	case len(s.Buffers) != 0 && len(s.Buffers) != arch.NumState():
		return fmt.Errorf("resuming: the state has %d floats of batch-norm statistics, the model %d", len(s.Buffers), arch.NumState())
	case s.Epoch < 1 || s.Step < 0 || s.Steps < 0:
		return fmt.Errorf("resuming: bad position %+v", s.Position)
	}
	return nil
}

// StartPosition is the first step of a fresh run.
var StartPosition = Position{Epoch: 1}

// The checkpoint file's contents and its meta.json (package ckpt).
type (
	checkpoint     = ckpt.File
	checkpointMeta = ckpt.Meta
)
