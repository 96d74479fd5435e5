package gossip

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestEpochClock: rank 0 calls a point once the ranks together have
// trained an epoch's samples, whatever order and sizes their reports come
// in, each point once; the last epoch's point and a --max-steps cap are
// final.
func TestEpochClock(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 1))
		c := NewEpochClock(1000, 3, -1)
		var points []Point
		samples := int64(0)
		for len(points) == 0 || !points[len(points)-1].Final {
			n := int64(1 + rng.IntN(200))
			c.Report(1, n)
			samples += n
			if pt := c.Due(); pt != nil {
				if want := int64(pt.Epoch) * 1000; samples < want {
					t.Fatalf("seed %d: point %d called at %d samples, before %d", seed, pt.Epoch, samples, want)
				}
				points = append(points, *pt)
			}
			if samples > 10000 {
				t.Fatalf("seed %d: no final point after %d samples: %v", seed, samples, points)
			}
		}
		want := []Point{{1, false}, {2, false}, {3, true}}
		if len(points) != 3 || points[0] != want[0] || points[1] != want[1] || points[2] != want[2] {
			t.Fatalf("seed %d: points %v, want %v", seed, points, want)
		}
	}
	c := NewEpochClock(1000, 5, 7)
	c.Report(6, 600)
	if pt := c.Due(); pt != nil {
		t.Fatalf("a point at 6 of 7 steps: %+v", pt)
	}
	c.Report(1, 10)
	if pt := c.Due(); pt == nil || !pt.Final || pt.Epoch != 1 {
		t.Fatalf("at the --max-steps cap: %+v, want the final point of epoch 1", pt)
	}
	// A report large enough for two epochs calls one point now, the next
	// at the next question (each point is one epoch's line).
	c = NewEpochClock(100, 5, -1)
	c.Report(3, 250)
	if a, b := c.Due(), c.Due(); a == nil || b == nil || a.Epoch != 1 || b.Epoch != 2 || c.Due() != nil {
		t.Fatalf("250 samples of 100 per epoch: %+v then %+v", a, b)
	}
}

// TestPassiveControl: a passive rank parks for a point only once rank 0
// called it and every active neighbour paused, in whatever order those
// messages arrive (requests may still come in between and are answered);
// it starts the next epoch afresh; a neighbour silent past the timeout is
// named, one that paused is not, and rank 0 (not a neighbour) being quiet
// through a long epoch is no failure.
func TestPassiveControl(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const size = 10
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 2))
		p := NewPassiveControl(3, []int{2, 4}, size, time.Minute, t0)
		type msg struct {
			src  int
			kind int64
			a, b int64
		}
		// Each source's messages in its order (a neighbour pauses after
		// its last request of the epoch), the sources interleaved at
		// random: a pause may come before rank 0's call reaches this rank.
		queues := [][]msg{{{0, MsgSync, 1, 0}}, {{2, MsgRequest, size, 0}, {2, MsgPause, 1, 0}}, {{4, MsgRequest, size, 0}, {4, MsgRequest, size, 0}, {4, MsgPause, 1, 0}}}
		var msgs []msg
		for len(queues) > 0 {
			i := rng.IntN(len(queues))
			msgs = append(msgs, queues[i][0])
			if queues[i] = queues[i][1:]; len(queues[i]) == 0 {
				queues = append(queues[:i], queues[i+1:]...)
			}
		}
		now := t0
		called := false // rank 0's call has come: Called from then on
		for i, m := range msgs {
			if pt := p.Ready(); pt != nil {
				t.Fatalf("seed %d: parked for %+v after %d of the messages %v", seed, pt, i, msgs)
			}
			if p.Called() != called {
				t.Fatalf("seed %d: Called %v after %d of the messages %v", seed, p.Called(), i, msgs)
			}
			called = called || m.kind == MsgSync
			now = now.Add(time.Second)
			answer, err := p.Message(now, m.src, m.kind, m.a, m.b)
			if err != nil || answer != (m.kind == MsgRequest) {
				t.Fatalf("seed %d: %+v: answer %v, %v", seed, m, answer, err)
			}
		}
		if pt := p.Ready(); pt == nil || pt.Epoch != 1 || pt.Final {
			t.Fatalf("seed %d: after all of %v: ready %+v, want point 1", seed, msgs, pt)
		}
		if p.AllSpent() {
			t.Fatalf("seed %d: paused for a point, not spent, AllSpent says so", seed)
		}
		if !p.Called() {
			t.Fatalf("seed %d: parked for point 1, Called says no point was called", seed)
		}
		p.Resumed(now)
		if pt := p.Ready(); pt != nil || p.Called() {
			t.Fatalf("seed %d: still parked for %+v (called %v) after resuming", seed, pt, p.Called())
		}
	}
	p := NewPassiveControl(1, []int{0, 2}, size, time.Minute, t0)
	if _, err := p.Message(t0, 0, MsgRequest, size+1, 0); err == nil || !strings.Contains(err.Error(), "offers a model of 11 floats") {
		t.Errorf("a request of the wrong size: %v", err)
	}
	if _, err := p.Message(t0, 0, 9, 0, 0); err == nil {
		t.Error("a message of an unknown kind was taken")
	}
	// Rank 2 pauses, then both are quiet: only rank 0, which did not
	// pause, is named, and only past the timeout; one of two paused is
	// not all.
	sp := NewPassiveControl(1, []int{0, 2}, size, time.Minute, t0)
	sp.Message(t0, 2, MsgPause, 1, 1)
	if sp.AllSpent() {
		t.Error("AllSpent with rank 0 not spent")
	}
	sp.Message(t0, 0, MsgPause, 1, 1)
	if !sp.AllSpent() {
		t.Error("both neighbours spent, AllSpent says not")
	}
	sp.Resumed(t0)
	if sp.AllSpent() {
		t.Error("AllSpent after resuming")
	}
	p.Message(t0.Add(10*time.Second), 2, MsgPause, 1, 0)
	if err := p.Idle(t0.Add(59 * time.Second)); err != nil {
		t.Errorf("within the timeout: %v", err)
	}
	if err := p.Idle(t0.Add(61 * time.Second)); err == nil || !strings.Contains(err.Error(), "active neighbour rank 0 has been silent for 1m1s") {
		t.Errorf("past the timeout: %v, want rank 0 named", err)
	}
	// A non-neighbour (rank 0 calling points for ranks 2, 4) heard once
	// and then quiet for a long epoch is no failure.
	q := NewPassiveControl(3, []int{2, 4}, size, time.Minute, t0)
	q.Message(t0, 0, MsgSync, 1, 0)
	for _, a := range []int{2, 4} {
		q.Message(t0.Add(50*time.Minute), a, MsgRequest, size, 0)
	}
	if err := q.Idle(t0.Add(50*time.Minute + time.Second)); err != nil {
		t.Errorf("rank 0 (not a neighbour) quiet for 50 min: %v", err)
	}
}
