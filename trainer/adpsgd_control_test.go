package trainer

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
		c := newEpochClock(1000, 3, -1)
		var points []syncPoint
		samples := int64(0)
		for len(points) == 0 || !points[len(points)-1].final {
			n := int64(1 + rng.IntN(200))
			c.report(1, n)
			samples += n
			if pt := c.due(); pt != nil {
				if want := int64(pt.epoch) * 1000; samples < want {
					t.Fatalf("seed %d: point %d called at %d samples, before %d", seed, pt.epoch, samples, want)
				}
				points = append(points, *pt)
			}
			if samples > 10000 {
				t.Fatalf("seed %d: no final point after %d samples: %v", seed, samples, points)
			}
		}
		want := []syncPoint{{1, false}, {2, false}, {3, true}}
		if len(points) != 3 || points[0] != want[0] || points[1] != want[1] || points[2] != want[2] {
			t.Fatalf("seed %d: points %v, want %v", seed, points, want)
		}
	}
	c := newEpochClock(1000, 5, 7)
	c.report(6, 600)
	if pt := c.due(); pt != nil {
		t.Fatalf("a point at 6 of 7 steps: %+v", pt)
	}
	c.report(1, 10)
	if pt := c.due(); pt == nil || !pt.final || pt.epoch != 1 {
		t.Fatalf("at the --max-steps cap: %+v, want the final point of epoch 1", pt)
	}
	// A report large enough for two epochs calls one point now, the next
	// at the next question (each point is one epoch's line).
	c = newEpochClock(100, 5, -1)
	c.report(3, 250)
	if a, b := c.due(), c.due(); a == nil || b == nil || a.epoch != 1 || b.epoch != 2 || c.due() != nil {
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
		p := newPassiveControl(3, []int{2, 4}, size, time.Minute, t0)
		type msg struct {
			src  int
			kind int64
			a, b int64
		}
		// Each source's messages in its order (a neighbour pauses after
		// its last request of the epoch), the sources interleaved at
		// random: a pause may come before rank 0's call reaches this rank.
		queues := [][]msg{{{0, msgSync, 1, 0}}, {{2, msgRequest, size, 0}, {2, msgPause, 1, 0}}, {{4, msgRequest, size, 0}, {4, msgRequest, size, 0}, {4, msgPause, 1, 0}}}
		var msgs []msg
		for len(queues) > 0 {
			i := rng.IntN(len(queues))
			msgs = append(msgs, queues[i][0])
			if queues[i] = queues[i][1:]; len(queues[i]) == 0 {
				queues = append(queues[:i], queues[i+1:]...)
			}
		}
		now := t0
		for i, m := range msgs {
			if pt := p.ready(); pt != nil {
				t.Fatalf("seed %d: parked for %+v after %d of the messages %v", seed, pt, i, msgs)
			}
			now = now.Add(time.Second)
			answer, err := p.message(now, m.src, m.kind, m.a, m.b)
			if err != nil || answer != (m.kind == msgRequest) {
				t.Fatalf("seed %d: %+v: answer %v, %v", seed, m, answer, err)
			}
		}
		if pt := p.ready(); pt == nil || pt.epoch != 1 || pt.final {
			t.Fatalf("seed %d: after all of %v: ready %+v, want point 1", seed, msgs, pt)
		}
		p.resumed(now)
		if pt := p.ready(); pt != nil {
			t.Fatalf("seed %d: still parked for %+v after resuming", seed, pt)
		}
	}
	p := newPassiveControl(1, []int{0, 2}, size, time.Minute, t0)
	if _, err := p.message(t0, 0, msgRequest, size+1, 0); err == nil || !strings.Contains(err.Error(), "offers a model of 11 floats") {
		t.Errorf("a request of the wrong size: %v", err)
	}
	if _, err := p.message(t0, 0, 9, 0, 0); err == nil {
		t.Error("a message of an unknown kind was taken")
	}
	// Rank 2 pauses, then both are quiet: only rank 0, which did not
	// pause, is named, and only past the timeout.
	p.message(t0.Add(10*time.Second), 2, msgPause, 1, 0)
	if err := p.idle(t0.Add(59 * time.Second)); err != nil {
		t.Errorf("within the timeout: %v", err)
	}
	if err := p.idle(t0.Add(61 * time.Second)); err == nil || !strings.Contains(err.Error(), "active neighbour rank 0 has been silent for 1m1s") {
		t.Errorf("past the timeout: %v, want rank 0 named", err)
	}
	// A non-neighbour (rank 0 calling points for ranks 2, 4) heard once
	// and then quiet for a long epoch is no failure.
	q := newPassiveControl(3, []int{2, 4}, size, time.Minute, t0)
	q.message(t0, 0, msgSync, 1, 0)
	for _, a := range []int{2, 4} {
		q.message(t0.Add(50*time.Minute), a, msgRequest, size, 0)
	}
	if err := q.idle(t0.Add(50*time.Minute + time.Second)); err != nil {
		t.Errorf("rank 0 (not a neighbour) quiet for 50 min: %v", err)
	}
}
