// Package hookstest checks which optional parts (engine.Hooks) a strategy
// has, for the strategy packages' tests: a part that fell away would change
// what the loop does with it (no checkpoints, no stop vote, no pace, no
// re-dealt epoch) without a word.
package hookstest

import (
	"testing"

	"github.com/dml-project/dml/trainer/engine"
)

// Parts says which of Hooks' functions are set.
type Parts struct{ Save, Buffers, Vote, Pace, Bytes, Reshard bool }

// Check fails t unless s's Hooks set exactly the parts want names.
func Check(t *testing.T, s engine.Strategy, want Parts) {
	t.Helper()
	h := s.Hooks()
	got := Parts{h.SaveState != nil, h.ModelState != nil, h.VoteStop != nil, h.Pace != nil, h.SentBytes != nil, h.SetTrain != nil}
	if got != want {
		t.Errorf("%T: hooks %+v, want %+v", s, got, want)
	}
}
