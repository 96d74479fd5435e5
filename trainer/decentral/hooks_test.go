package decentral

import (
	"testing"

	"github.com/dml-project/dml/trainer/engine"
)

// TestStrategyHooks: which optional parts each decentralized strategy has
// (Strategy.Hooks): a part that fell away would change what the loop does
// with it (no checkpoints, no pace, no re-dealt epoch) without a word. The
// other strategies' are checked in their own packages.
func TestStrategyHooks(t *testing.T) {
	type parts struct{ save, buffers, vote, pace, bytes, reshard bool }
	for _, c := range []struct {
		s    engine.Strategy
		want parts
	}{
		{&dpsgdStrategy{LocalModel: &LocalModel{}}, parts{save: true, buffers: true, bytes: true, reshard: true}},
		{&adpsgdStrategy{LocalModel: &LocalModel{}}, parts{save: true, buffers: true, pace: true, reshard: true}},
	} {
		h := c.s.Hooks()
		got := parts{h.SaveState != nil, h.ModelState != nil, h.VoteStop != nil, h.Pace != nil, h.SentBytes != nil, h.SetTrain != nil}
		if got != c.want {
			t.Errorf("%T: hooks %+v, want %+v", c.s, got, c.want)
		}
	}
}
