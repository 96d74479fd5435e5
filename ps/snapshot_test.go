package ps

import (
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels/optim"
)

// snapshotReply decodes a server's values reply to a snapshot.
func snapshotReply(t *testing.T, out []Outgoing, to int) []float32 {
	t.Helper()
	for _, o := range out {
		if o.To != to {
			continue
		}
		m, err := decode(o.Msg)
		if err != nil || m.kind != kindValues {
			t.Fatalf("reply to rank %d: %v %v", to, m.kind, err)
		}
		v := make([]float32, m.numValues())
		m.floatsInto(v)
		return v
	}
	return nil
}

// TestSnapshotHeldUntilRound: under BSP a snapshot sent after a worker's
// push of step 0 is held until the round is applied and then answered with
// the weights and momentum after it; a server restored from those, with
// the clocks at 1, continues exactly like the original.
func TestSnapshotHeldUntilRound(t *testing.T) {
	cfg := Config{Servers: 1, Consistency: BSP, Optimizer: optim.Momentum, LR: 0.5, Momentum: 0.9}
	initial := []float32{1, 2, 3}
	srv, err := NewServer(cfg, 0, 3, initial)
	if err != nil {
		t.Fatal(err)
	}
	hello := appendHello(nil, helloFor(cfg.withDefaults(), len(initial)))
	for r := 1; r <= 2; r++ {
		srv.Step(r, hello, 0)
	}
	srv.Step(1, appendPushRange(nil, 0, Float32, 0, []float32{1, 0, -1}), 0)
	if out := srv.Step(1, appendSnapshot(nil, 1), 0); snapshotReply(t, out, 1) != nil {
		t.Fatal("snapshot answered before the round was complete")
	}
	out := srv.Step(2, appendPushRange(nil, 0, Float32, 0, []float32{3, 2, 1}), 0)
	got := snapshotReply(t, out, 1)
	// Mean gradient (2, 1, 0); momentum buffer = gradient at the first
	// step; w -= 0.5 * buf.
	want := []float32{0, 1.5, 3, 2, 1, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("snapshot %v, want weights then momentum %v", got, want)
	}

	// Restored at clock 1 from the snapshot, a server applies step 1 as
	// the original does.
	restored, err := NewServer(Config{Servers: 1, Consistency: BSP, Optimizer: optim.Momentum, LR: 0.5, Momentum: 0.9,
		Restore: &Restore{OptState: got[3:], Clock: 1}}, 0, 3, got[:3])
	if err != nil {
		t.Fatal(err)
	}
	for r := 1; r <= 2; r++ {
		restored.Step(r, hello, 0)
	}
	for _, s := range []*Server{srv, restored} {
		s.Step(1, appendPushRange(nil, 1, Float32, 0, []float32{1, 1, 1}), 0)
		if out := s.Step(2, appendPushRange(nil, 1, Float32, 0, []float32{0, 2, 4}), 0); len(out) == 0 {
			t.Fatal("no reply to a push")
		}
	}
	a, b := srv.Stats(0), restored.Stats(0)
	if !slices.Equal(a.Weights, b.Weights) || a.Rejected+b.Rejected != 0 {
		t.Fatalf("after step 1: original %v, restored %v (rejections %v %v)", a.Weights, b.Weights, a.Rejections, b.Rejections)
	}
}

// TestRestoreRefusesBadState: optimizer state of the wrong length, or for
// an optimizer without state, is refused.
func TestRestoreRefusesBadState(t *testing.T) {
	for _, cfg := range []Config{
		{Optimizer: optim.Momentum, Restore: &Restore{OptState: make([]float32, 2)}},
		{Optimizer: optim.SGD, Restore: &Restore{OptState: make([]float32, 3)}},
		{Optimizer: optim.SGD, Restore: &Restore{Clock: -1}},
	} {
		if _, err := NewServer(cfg, 0, 2, make([]float32, 3)); err == nil {
			t.Errorf("restored %+v", *cfg.Restore)
		}
	}
}
