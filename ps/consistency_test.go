package ps

import (
	"math"
	"testing"
	"time"
)

// event is one step of a controller table test: worker w pushes ("push"),
// finishes ("done"), or the test asks whether it may proceed ("may"), at
// time at; want is MayProceed's expected answer (for "may"), checked after
// the event for every listed worker in mayAll (one bool per worker).
type event struct {
	op     string
	w      int
	at     time.Duration
	mayAll []bool
}

func runEvents(t *testing.T, c Controller, evs []event) {
	t.Helper()
	for i, e := range evs {
		switch e.op {
		case "push":
			c.Pushed(e.w, e.at)
		case "done":
			c.Finished(e.w)
		}
		for w, want := range e.mayAll {
			if got := c.MayProceed(w, e.at); got != want {
				t.Fatalf("event %d (%s w%d at %v): MayProceed(w%d) = %v, want %v (clocks %v)",
					i, e.op, e.w, e.at, w, got, want, clocksOf(c, len(e.mayAll)))
			}
		}
	}
}

func clocksOf(c Controller, n int) []int {
	out := make([]int, n)
	for w := range out {
		out[w] = c.Clock(w)
	}
	return out
}

func TestBSPController(t *testing.T) {
	c, _ := NewController(Config{Consistency: BSP}, 3)
	runEvents(t, c, []event{
		{"", 0, 0, []bool{true, true, true}},
		{"push", 0, 1, []bool{false, true, true}}, // w0 finished step 0; others have not
		{"push", 2, 2, []bool{false, true, false}},
		{"push", 1, 3, []bool{true, true, true}}, // round 0 complete
		{"push", 1, 4, []bool{true, false, true}},
		{"done", 0, 5, []bool{true, false, true}}, // w0 leaves; w2 still behind w1
		{"push", 2, 6, []bool{true, true, true}},
	})
	if m := c.MinClock(); m != 2 {
		t.Errorf("MinClock = %d, want 2", m)
	}
}

func TestSSPController(t *testing.T) {
	c, _ := NewController(Config{Consistency: SSP, Staleness: 2}, 2)
	runEvents(t, c, []event{
		{"push", 0, 1, []bool{true, true}},  // gap 1
		{"push", 0, 2, []bool{true, true}},  // gap 2 = s
		{"push", 0, 3, []bool{false, true}}, // gap 3 > s: w0 must wait
		{"push", 1, 4, []bool{true, true}},  // gap 2 again
		{"done", 1, 5, []bool{true, true}},  // w1 gone: w0 alone
		{"push", 0, 6, []bool{true, true}},
		{"push", 0, 7, []bool{true, true}},
	})
	c.Finished(0)
	if m := c.MinClock(); m != math.MaxInt {
		t.Errorf("MinClock with everyone finished = %d, want MaxInt", m)
	}
}

func TestASPController(t *testing.T) {
	c, _ := NewController(Config{Consistency: ASP}, 2)
	for i := 0; i < 10; i++ {
		c.Pushed(0, time.Duration(i))
		if !c.MayProceed(0, time.Duration(i)) {
			t.Fatal("ASP held a worker")
		}
	}
	if c.Clock(0) != 10 || c.MinClock() != 0 {
		t.Errorf("clocks %d, min %d", c.Clock(0), c.MinClock())
	}
}
