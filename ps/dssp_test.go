package ps

import (
	"math/rand"
	"slices"
	"testing"
	"time"
)

// TestDSSPSynchronise works the synchronisation controller by hand. Times
// are plain numbers (nanoseconds, think "ms"). Sim_p[r] = pLast + r*pI,
// Sim_s[k] = sLast + (k+1)*sI, r and k in [0, rmax]; r* minimises
// min_k |Sim_s[k] - Sim_p[r]|, the smallest r on ties.
func TestDSSPSynchronise(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		pLast, pI, sLast, sI time.Duration
		rmax, want           int
	}{
		// Sim_p 28 35 42 49; Sim_s 30 40 50 60. Distances 2, 5, 2, 1.
		{"use all three", 28, 7, 20, 10, 3, 3},
		// Sim_s 100 125 150 175: the slowest pushes right now.
		{"slowest pushes now", 100, 10, 75, 25, 3, 0},
		// Sim_p 164 209 254 299; Sim_s 200 245 290 335. 36, 9, 9, 9.
		{"tie goes to fewer iterations", 164, 45, 155, 45, 3, 1},
		// Sim_p 100 110 120; Sim_s 119 149 179. 19, 9, 1: p would push
		// 1 after the slowest (a wait-minimising rule would say r=1).
		{"late counts like early", 100, 10, 89, 30, 2, 2},
		// Slowest overdue: Sim_s 120 140 160, all before p's latest push.
		// 40, 50, 60: stop now.
		{"overdue slowest", 200, 10, 100, 20, 2, 0},
		// Sim_p 173 182 191; Sim_s 200 245 290. 27, 18, 9.
		{"capped room", 173, 9, 155, 45, 2, 2},
		{"rmax 1 of the same", 173, 9, 155, 45, 1, 1},
		{"rmax 0", 28, 7, 20, 10, 0, 0},
		{"unknown p interval", 28, 0, 20, 10, 3, 0},
		{"unknown slowest interval", 28, 7, 20, 0, 3, 0},
	} {
		if got := DSSPSynchronise(tc.pLast, tc.pI, tc.sLast, tc.sI, tc.rmax); got != tc.want {
			t.Errorf("%s: DSSPSynchronise(pLast %d, pI %d, sLast %d, sI %d, rmax %d) = %d, want %d",
				tc.name, tc.pLast, tc.pI, tc.sLast, tc.sI, tc.rmax, got, tc.want)
		}
	}
}

// dsspRow is one push of a DSSP timeline: at time at worker w pushes; then
// the clocks are clocks, w's push was answered ok (or held), the
// synchronisation controller was consulted and answered r (-1: not
// consulted), w's credit r_p is credit, and the held workers released by
// this push are released.
type dsspRow struct {
	at       time.Duration
	w        int
	clocks   []int
	ok       bool
	r        int
	credit   int
	released []int
}

// runDSSPTimeline drives c on a fake clock: worker w's i-th iteration
// (0-based) takes compute(w, i); a worker pushes, and starts its next
// iteration at once if let go, else when a later push releases it. Pushes
// are taken in time order (ties by worker). It checks every row of want and
// that no worker ever starts an iteration more than high ahead.
func runDSSPTimeline(t *testing.T, c *DSSPController, n, high int, compute func(w, i int) time.Duration, want []dsspRow) {
	t.Helper()
	next := make([]time.Duration, n) // next push time; -1 held
	for w := range next {
		next[w] = compute(w, 0)
	}
	for i, row := range want {
		w := -1
		for v, at := range next {
			if at >= 0 && (w < 0 || at < next[w]) {
				w = v
			}
		}
		if w != row.w || next[w] != row.at {
			t.Fatalf("row %d: next push is w%d at %d, want w%d at %d", i, w, next[w], row.w, row.at)
		}
		now := next[w]
		before := c.Grants()
		c.Pushed(w, now)
		ok := c.MayProceed(w, now)
		r := -1
		for k, g := range c.Grants() {
			if g != before[k] {
				r = k
			}
		}
		var released []int
		next[w] = -1
		if ok {
			next[w] = now + compute(w, c.Clock(w))
		}
		for v := range next {
			if next[v] < 0 && v != w && c.MayProceed(v, now) {
				released = append(released, v)
				next[v] = now + compute(v, c.Clock(v))
			}
		}
		for v := range next {
			if next[v] >= 0 && c.gap(v) > high {
				t.Fatalf("row %d: w%d runs at gap %d > sU %d", i, v, c.gap(v), high)
			}
		}
		got := dsspRow{now, w, clocksOf(c, n), ok, r, c.Credit(w), released}
		if !slices.Equal(got.clocks, row.clocks) || got.ok != row.ok || got.r != row.r ||
			got.credit != row.credit || !slices.Equal(got.released, row.released) {
			t.Fatalf("row %d: got  %+v\nwant %+v", i, got, row)
		}
	}
}

// TestDSSPTimeline is a run of the published algorithm traced by hand:
// sL=1, sU=4 (rmax 3), three workers. w0 computes for 7, w1 for 9, w2 for
// 10 twice and then for 45 (it becomes the straggler). The comments give
// the controller's simulation where it is consulted (gap g, room
// rmax' = min(3, sU-g+1), Sim_p, Sim_s, distances).
func TestDSSPTimeline(t *testing.T) {
	c, err := NewDSSPController(3, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	compute := func(w, i int) time.Duration {
		switch {
		case w == 0:
			return 7
		case w == 1:
			return 9
		case i < 2:
			return 10
		}
		return 45
	}
	none := []int(nil)
	runDSSPTimeline(t, c, 3, 4, compute, []dsspRow{
		{7, 0, []int{1, 0, 0}, true, -1, 0, none}, // gap 1 <= sL
		{9, 1, []int{1, 1, 0}, true, -1, 0, none},
		{10, 2, []int{1, 1, 1}, true, -1, 0, none},
		{14, 0, []int{2, 1, 1}, true, -1, 0, none},
		{18, 1, []int{2, 2, 1}, true, -1, 0, none},
		{20, 2, []int{2, 2, 2}, true, -1, 0, none},
		{21, 0, []int{3, 2, 2}, true, -1, 0, none},
		{27, 1, []int{3, 3, 2}, true, -1, 0, none},
		// g=2, fastest, rmax' 3. A0=(28,21): I 7; slowest w2 A2=(20,10): I 10.
		// Sim_p 28 35 42 49, Sim_s 30 40 50 60: 2, 5, 2, 1 -> r*=3:
		// OK now and credit 2.
		{28, 0, []int{4, 3, 2}, true, 3, 2, none},
		{35, 0, []int{5, 3, 2}, true, -1, 1, none},  // credit spent
		{36, 1, []int{5, 4, 2}, false, -1, 0, none}, // g=2 but w0 is faster: held, no controller
		{42, 0, []int{6, 4, 2}, true, -1, 0, none},  // last credit: starts at g=4 = sU
		{49, 0, []int{7, 4, 2}, false, 0, 0, none},  // g=5: rmax' 0, the controller says 0
		// w2 now takes 45. w1 back to g=1 is let go; w0 at g=4 waits for g<=1.
		{65, 2, []int{7, 4, 3}, true, -1, 0, []int{1}},
		{74, 1, []int{7, 5, 3}, false, -1, 0, none}, // not the fastest
		{110, 2, []int{7, 5, 4}, true, -1, 0, []int{1}},
		{119, 1, []int{7, 6, 4}, false, -1, 0, none},
		{155, 2, []int{7, 6, 5}, true, -1, 0, []int{1}}, // w0 at g=2 still held
		// g=2, w1 ties w0 as the fastest. A1=(164,119): I 45 (its holds
		// count); A2=(155,110): I 45. Sim_p 164 209 254 299, Sim_s 200
		// 245 290 335: 36, 9, 9, 9 -> r*=1, credit 0.
		{164, 1, []int{7, 7, 5}, true, 1, 0, none},
		// g=3, rmax' 2. I1 9. Sim_p 173 182 191, Sim_s 200 245 290:
		// 27, 18, 9 -> r*=2: OK and credit 1.
		{173, 1, []int{7, 8, 5}, true, 2, 1, none},
		{182, 1, []int{7, 9, 5}, true, -1, 0, none},  // credit spent, starts at g=4
		{191, 1, []int{7, 10, 5}, false, 0, 0, none}, // g=5: rmax' 0
		// w0 is back at g=1 after 151 held; w1 (g=4) still waits.
		{200, 2, []int{7, 10, 6}, true, -1, 0, []int{0}},
		{207, 0, []int{8, 10, 6}, false, -1, 0, none}, // not the fastest
		{245, 2, []int{8, 10, 7}, true, -1, 0, []int{0}},
	})
	if got, want := c.Grants(), []int{2, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("Grants() = %v, want %v", got, want)
	}
}

// TestDSSPUnknownIntervals: sL=0, sU=2, w0 computes for 10, w1 for 25.
// Until both have two pushes the controller answers 0; intervals include
// holds; a finished worker holds nobody back.
func TestDSSPUnknownIntervals(t *testing.T) {
	c, _ := NewDSSPController(2, 0, 2)
	none := []int(nil)
	runDSSPTimeline(t, c, 2, 2, func(w, _ int) time.Duration { return []time.Duration{10, 25}[w] }, []dsspRow{
		{10, 0, []int{1, 0}, false, 0, 0, none},     // g=1, w1 has not pushed: r*=0
		{25, 1, []int{1, 1}, true, -1, 0, []int{0}}, // g=0: w0 let go at 25
		{35, 0, []int{2, 1}, false, 0, 0, none},     // I0 = 25, w1 has one push: r*=0
		{50, 1, []int{2, 2}, true, -1, 0, []int{0}},
		// g=1, rmax' 2. A0=(60,35): I 25 (the hold counts); A1=(50,25): I 25.
		// Sim_p 60 85 110, Sim_s 75 100 125: 15, 10, 10 -> r*=1.
		{60, 0, []int{3, 2}, true, 1, 0, none},
		// g=2, rmax' 1. I0 10. Sim_p 70 80, Sim_s 75 100: 5, 5 -> r*=0.
		{70, 0, []int{4, 2}, false, 0, 0, none},
		{75, 1, []int{4, 3}, true, -1, 0, none}, // w0 at g=1 > sL still held
	})
	if got, want := c.Grants(), []int{3, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("Grants() = %v, want %v", got, want)
	}
	c.Finished(1)
	if !c.MayProceed(0, 80) {
		t.Fatal("the only other worker finished, but w0 is still held")
	}
}

// TestDSSPRandomTimings: whatever the timing (seeded random compute times,
// four workers), nobody starts an iteration more than sU ahead, credit never
// exceeds rmax-1, and only the fastest worker beyond sL is ever consulted.
func TestDSSPRandomTimings(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	for _, rg := range [][2]int{{0, 0}, {0, 3}, {1, 4}, {2, 2}, {1, 6}} {
		low, high := rg[0], rg[1]
		const n = 4
		c, _ := NewDSSPController(n, low, high)
		base := []int{3, 5, 11, 40}
		next := make([]time.Duration, n)
		draw := func(w int) time.Duration { return time.Duration(base[w] + rng.Intn(base[w])) }
		for w := range next {
			next[w] = draw(w)
		}
		maxGap := 0 // largest gap at which anyone started an iteration
		for range 4000 {
			w := 0
			for v := range next {
				if next[v] >= 0 && (next[w] < 0 || next[v] < next[w]) {
					w = v
				}
			}
			now := next[w]
			before := c.Grants()
			gapBefore, fastest := c.gap(w)+1, c.fastestAfterPush(w)
			c.Pushed(w, now)
			if !slices.Equal(before, c.Grants()) && (gapBefore <= low || !fastest) {
				t.Fatalf("[%d,%d]: controller consulted for w%d at gap %d (fastest %v)", low, high, w, gapBefore, fastest)
			}
			if c.Credit(w) > max(high-low-1, 0) {
				t.Fatalf("[%d,%d]: credit %d", low, high, c.Credit(w))
			}
			next[w] = -1
			for v := range next {
				if next[v] < 0 && c.MayProceed(v, now) {
					g := c.gap(v)
					if g > high {
						t.Fatalf("[%d,%d]: w%d starts at gap %d", low, high, v, g)
					}
					maxGap = max(maxGap, g)
					next[v] = now + draw(v)
				}
			}
		}
		t.Logf("[%d,%d]: grants %v, largest gap at a start %d", low, high, c.Grants(), maxGap)
		if low < high && maxGap <= low {
			t.Errorf("[%d,%d]: nobody ever started beyond sL (grants %v)", low, high, c.Grants())
		}
	}
}

// fastestAfterPush reports whether w would be the fastest after one more
// push (test helper).
func (d *DSSPController) fastestAfterPush(w int) bool {
	for v, k := range d.clock {
		if v != w && !d.finished[v] && k > d.clock[w]+1 {
			return false
		}
	}
	return true
}

// TestDSSPServerWiring drives a Server state machine through the timeline
// of TestDSSPUnknownIntervals (ranks 1 and 2 are workers w0 and w1; sL=0,
// sU=2): a pull the controller holds gets no reply until the push that
// brings its worker back within sL, which answers both; a grant answers the
// pull at once; Stats reports the controller's answers.
func TestDSSPServerWiring(t *testing.T) {
	x := newSim(t, Config{Servers: 1, Consistency: DSSP, StalenessLow: 0, StalenessHigh: 2}, 0, 3, make([]float32, 4))
	x.hello(0, 1, 2)
	x.call(1, x.pull(1, 0), 0, kindValues)
	x.call(2, x.pull(2, 0), 0, kindValues)
	held := func(r, c int, now time.Duration) {
		t.Helper()
		if rs := x.step(r, x.pull(r, c), now); len(rs) != 0 {
			t.Fatalf("at %v, rank %d's pull at clock %d: replies %v, want it held", now, r, c, rs)
		}
	}
	releases := func(r, c int, now time.Duration, waiting int) {
		t.Helper()
		vals := make([]float32, 4)
		for i := range vals {
			vals[i] = 1
		}
		rs := x.step(r, appendPushRange(nil, uint32(c), Float32, 0, vals), now)
		if len(only(rs, kindOK)) != 1 || len(only(rs, kindValues)) != 1 || only(rs, kindValues)[0].to != waiting {
			t.Fatalf("at %v, rank %d's push: replies %v, want OK to %d and values to %d", now, r, rs, r, waiting)
		}
	}
	x.push(1, 0, 1, 10)
	held(1, 1, 10)        // gap 1, w1 has not pushed: r*=0
	releases(2, 0, 25, 1) // w1's push lets w0 go
	x.call(2, x.pull(2, 1), 25, kindValues)
	x.push(1, 1, 1, 35)
	held(1, 2, 35) // one interval known, not w1's: r*=0
	releases(2, 1, 50, 1)
	x.call(2, x.pull(2, 2), 50, kindValues)
	x.push(1, 2, 1, 60)
	x.call(1, x.pull(1, 3), 60, kindValues) // r*=1: let go at once
	x.push(1, 3, 1, 70)
	held(1, 4, 70) // gap 2, room 1: r*=0
	if got, want := x.s.Stats(70).DSSPGrants, []int{3, 1, 0}; !slices.Equal(got, want) {
		t.Errorf("DSSPGrants = %v, want %v", got, want)
	}
}
