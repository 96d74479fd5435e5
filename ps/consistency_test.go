package ps

import (
	"fmt"
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

// TestServerGatesPulls drives the Server state machine through scripts of
// requests on a fake clock and checks which requests are answered at once,
// which are held, and which held pulls a push releases, under each model.
// Two workers, ranks 1 and 2; "push" and "pull" carry the worker's clock.
func TestServerGatesPulls(t *testing.T) {
	type req struct {
		op    string // "push" or "pull"
		rank  int
		clock int
		want  []int // ranks that get an answer, in order (values or ok)
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		reqs []req
	}{
		{"bsp", Config{Consistency: BSP}, []req{
			{"pull", 1, 0, []int{1}},
			{"push", 1, 0, []int{1}},
			{"pull", 1, 1, nil}, // held: rank 2 has not pushed step 0
			{"pull", 2, 0, []int{2}},
			{"push", 2, 0, []int{2, 1}}, // the round completes: rank 1's pull goes
			{"pull", 2, 1, []int{2}},
		}},
		{"ssp s=1", Config{Consistency: SSP, Staleness: 1}, []req{
			{"push", 1, 0, []int{1}},
			{"pull", 1, 1, []int{1}}, // 1 ahead: allowed
			{"push", 1, 1, []int{1}},
			{"pull", 1, 2, nil}, // 2 ahead: held
			{"push", 2, 0, []int{2, 1}},
			{"push", 1, 2, []int{1}},
			{"pull", 1, 3, nil},
			{"push", 2, 1, []int{2, 1}},
		}},
		{"asp", Config{Consistency: ASP}, []req{
			{"push", 1, 0, []int{1}},
			{"push", 1, 1, []int{1}},
			{"push", 1, 2, []int{1}},
			{"pull", 1, 3, []int{1}},
			{"pull", 2, 0, []int{2}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Servers = 1
			x := newSim(t, tc.cfg, 0, 3, make([]float32, 2))
			x.hello(0, 1, 2)
			for i, r := range tc.reqs {
				b := x.pull(r.rank, r.clock)
				if r.op == "push" {
					b = appendPushRange(nil, uint32(r.clock), Float32, 0, []float32{1, 1})
				}
				var got []int
				for _, rep := range x.step(r.rank, b, time.Duration(i+1)*time.Millisecond) {
					if rep.m.kind != kindOK && rep.m.kind != kindValues {
						t.Fatalf("request %d (%s rank %d clock %d): %v", i, r.op, r.rank, r.clock, rep)
					}
					got = append(got, rep.to)
				}
				if fmt.Sprint(got) != fmt.Sprint(r.want) {
					t.Fatalf("request %d (%s rank %d clock %d): answers to %v, want %v", i, r.op, r.rank, r.clock, got, r.want)
				}
			}
		})
	}
}
