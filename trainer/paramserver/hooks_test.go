package paramserver

import (
	"testing"

	"github.com/dml-project/dml/trainer/engine"
)

// TestStrategyHooks: which optional parts the parameter-server workers
// have (Strategy.Hooks): a part that fell away would change what the loop
// does with it (no checkpoints, no stop vote among the workers, no
// re-dealt epoch) without a word. The other strategies' are checked in
// their own packages.
func TestStrategyHooks(t *testing.T) {
	type parts struct{ save, buffers, vote, pace, bytes, reshard bool }
	for _, c := range []struct {
		s    engine.Strategy
		want parts
	}{
		{&denseWorker{}, parts{save: true, buffers: true, vote: true, bytes: true, reshard: true}},
		{&sparseWorker{}, parts{save: true, vote: true, bytes: true}},
	} {
		h := c.s.Hooks()
		got := parts{h.SaveState != nil, h.ModelState != nil, h.VoteStop != nil, h.Pace != nil, h.SentBytes != nil, h.SetTrain != nil}
		if got != c.want {
			t.Errorf("%T: hooks %+v, want %+v", c.s, got, c.want)
		}
	}
}
