package trainer

import "testing"

// TestStrategyHooks: which optional parts each strategy has (Strategy.Hooks,
// once found by type assertions): a part that fell away would change what
// the loop does with it (no checkpoints, no stop vote among ps workers,
// no re-dealt epoch) without a word.
func TestStrategyHooks(t *testing.T) {
	type parts struct{ save, buffers, vote, pace, bytes, reshard bool }
	for _, c := range []struct {
		s    Strategy
		want parts
	}{
		{&allreduceStrategy{}, parts{save: true, buffers: true, bytes: true, reshard: true}},
		{&localSGDStrategy{localModel: &localModel{}}, parts{save: true, buffers: true, bytes: true, reshard: true}},
		{&dpsgdStrategy{localModel: &localModel{}}, parts{save: true, buffers: true, bytes: true, reshard: true}},
		{&adpsgdStrategy{localModel: &localModel{}}, parts{save: true, buffers: true, pace: true, reshard: true}},
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
