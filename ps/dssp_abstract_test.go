package ps

import (
	"testing"
	"time"
)

// TestDSSPAbstractExtraIterations works the synchronisation controller by hand.
// Times are plain numbers (nanoseconds, but think "ms"). For each r the fast
// worker would stop at t_r = now + r*If and wait until the slowest worker's
// first predicted push at or after t_r, i.e. Ts + j*Is, j >= 1.
func TestDSSPAbstractExtraIterations(t *testing.T) {
	for _, tc := range []struct {
		name            string
		now, fi, ts, si time.Duration
		rmax, want      int
	}{
		// Slowest pushes predicted at 130, 165.
		// r=0: t=110 wait 20; r=1: t=120 wait 10; r=2: t=130 wait 0; r=3: t=140 wait 25.
		{"stop right at the slow push", 110, 10, 95, 35, 3, 2},
		// Slow pushes at 115, 150. r=0: 110 -> 5; r=1: 120 -> 30; r=2: 130 -> 20; r=3: 140 -> 10.
		{"slow worker about to push: wait now", 110, 10, 80, 35, 3, 0},
		// Slow just pushed at 110, next at 150. waits 40, 30, 20, 10: run all rmax.
		{"slow worker just pushed: use all", 110, 10, 110, 40, 3, 3},
		// Same with rmax 1: waits 40, 30.
		{"capped by rmax", 110, 10, 110, 40, 1, 1},
		// Slow at 110, 130. r=0: 100 -> 10; r=1: 110 -> 0; r=2: 120 -> 10; r=3: 130 -> 0.
		// Tie between r=1 and r=3: the smaller r (less staleness) wins.
		{"tie goes to fewer iterations", 100, 10, 90, 20, 3, 1},
		// Slow overdue: last push 100, predicted 130, 160, 190, 220.
		// r=0: t=200 -> 220, wait 20; r=1: 210 -> 10; r=2: 220 -> 0.
		{"overdue slow worker", 200, 10, 100, 30, 2, 2},
		// Fast worker slower than the slow one's interval: slow at 105, 110, ...
		// r=0: 100 -> 105 wait 5; r=1: 150 -> 150 wait 0.
		{"fast interval longer", 100, 50, 100, 5, 1, 1},
		{"unknown fast interval", 100, 0, 90, 20, 3, 0},
		{"unknown slow interval", 100, 10, 90, 0, 3, 0},
		{"rmax 0", 110, 10, 110, 40, 0, 0},
	} {
		if got := DSSPAbstractExtraIterations(tc.now, tc.fi, tc.ts, tc.si, tc.rmax); got != tc.want {
			t.Errorf("%s: DSSPAbstractExtraIterations(now %d, If %d, Ts %d, Is %d, rmax %d) = %d, want %d",
				tc.name, tc.now, tc.fi, tc.ts, tc.si, tc.rmax, got, tc.want)
		}
	}
}

// TestDSSPAbstractTimeline drives the controller through a timeline
// worked out by hand: sL=0, sU=2 (rmax 2), two workers; w0 computes for 10,
// w1 (the slowest) for 25. gap = clock(w0) - clock(w1). After every step the
// test asks MayProceed(w0) once, as the server does at w0's next pull.
func TestDSSPAbstractTimeline(t *testing.T) {
	d, err := NewDSSPAbstractController(2, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		op      string // "push" or "ask"
		w       int
		at      time.Duration
		want0   bool // MayProceed(w0) after the step
		credit0 int
	}
	steps := []step{
		{"ask", 1, 0, true, 0}, // both start at 0 (their first pulls)
		// gap 1 > sL; w1 has not pushed, so nothing to simulate: r*=0, hold.
		{"push", 0, 10, false, 0},
		// w1 (interval 25) pushes: gap 0, w0 let go at 25.
		{"push", 1, 25, true, 0},
		// w0 interval 10, gap 1, cap min(2, 2-1+1) = 2. w1: Ts 25, Is 25, next 50, 75.
		// r=0: t=35 wait 15; r=1: t=45 wait 5; r=2: t=55 wait 20. r*=1: go, credit 0.
		{"push", 0, 35, true, 0},
		// gap 2, no credit, cap min(2, 2-2+1) = 1. r=0: 45 -> 50, 5; r=1: 55 -> 75, 20. r*=0: hold.
		{"push", 0, 45, false, 0},
		// w1 pushes at 50: gap 1. Asked again: cap 2; Ts 50, next 75.
		// r=0: 50 -> 25; r=1: 60 -> 15; r=2: 70 -> 5. r*=2: go, credit 1.
		{"push", 1, 50, true, 1},
		// gap 2 > sL, credit 1: use it. w0 will pull at gap 2 = sU.
		{"push", 0, 60, true, 0},
		// gap 3 > sU: cap 0, hold.
		{"push", 0, 70, false, 0},
		// w1 at 75: gap 2, cap 1; Ts 75, next 100. r=0: 75 -> 25; r=1: 85 -> 15. r*=1.
		{"push", 1, 75, true, 0},
		// gap 3: cap 0, hold.
		{"push", 0, 85, false, 0},
		// w1 at 100: gap 2, cap 1; r=0: 100 -> 25; r=1: 110 -> 15. r*=1.
		{"push", 1, 100, true, 0},
	}
	for i, s := range steps {
		if s.op == "push" {
			d.Pushed(s.w, s.at)
		} else {
			d.MayProceed(s.w, s.at)
		}
		got := d.MayProceed(0, s.at)
		if got != s.want0 || d.credit[0] != s.credit0 {
			t.Fatalf("step %d (%s w%d at %d): MayProceed(w0) = %v credit %d, want %v credit %d (clocks %v)",
				i, s.op, s.w, s.at, got, d.credit[0], s.want0, s.credit0, d.clock)
		}
		if got && d.gap(0) > 2 {
			t.Fatalf("step %d: w0 may proceed at gap %d > sU", i, d.gap(0))
		}
		if !d.MayProceed(1, s.at) {
			t.Fatalf("step %d: the slowest worker w1 was held", i)
		}
	}
	// Controller decisions: r*=0 twice (at the push and at the ask) for each
	// hold at 10, 45, 70, 85; r*=1 at 35, 75, 100; r*=2 at 50.
	want := []int{8, 3, 1}
	got := d.Grants()
	if len(got) != len(want) {
		t.Fatalf("Grants() = %v, want %v", got, want)
	}
	for r := range want {
		if got[r] != want[r] {
			t.Fatalf("Grants() = %v, want %v", got, want)
		}
	}
}

// TestDSSPAbstractNeverBeyondHigh: whatever the timing, a worker never may proceed
// more than sU ahead, and every grant is in [0, sU-sL].
func TestDSSPAbstractNeverBeyondHigh(t *testing.T) {
	for _, rng := range [][2]int{{0, 0}, {0, 3}, {1, 4}, {2, 2}} {
		low, high := rng[0], rng[1]
		d, _ := NewDSSPAbstractController(3, low, high)
		intervals := []time.Duration{3, 7, 29} // w2 much slower
		next := []time.Duration{3, 7, 29}
		for now := time.Duration(0); now < 2000; now++ {
			for w := range 3 {
				if now >= next[w] && d.MayProceed(w, now) {
					if g := d.gap(w); g > high {
						t.Fatalf("[%d,%d]: w%d proceeds at gap %d", low, high, w, g)
					}
					d.Pushed(w, now)
					next[w] = now + intervals[w]
				}
			}
		}
		if g := d.Grants(); len(g) != high-low+1 {
			t.Fatalf("[%d,%d]: %d grant buckets, want %d", low, high, len(g), high-low+1)
		}
		if low < high && d.Clock(0) <= d.Clock(2)+low {
			t.Errorf("[%d,%d]: the fast worker never got ahead: clocks %v", low, high, d.clock)
		}
	}
}
