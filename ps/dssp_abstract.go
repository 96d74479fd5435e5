package ps

import (
	"fmt"
	"math"
	"time"
)

// dssp-abstract: the DSSP rule as we first wrote it from the abstract of
// Zhao, An, Liu, Chen, "Dynamic Stale Synchronous Parallel Distributed
// Training for Deep Learning", ICDCS 2019 (arXiv:1908.11848), before we had
// the published algorithm (dssp.go, whose top comment compares the two
// point by point). It lets the threshold move in [sL, sU] and picks, when a
// worker passes sL, how many extra iterations r* in [0, rmax = sU - sL] it
// should run so that, when it does stop, it waits as little as possible for
// the slowest worker.
//
// Source: the paper's abstract (arXiv:1908.11848, found through the search
// tool at arxiv-vanity.com/papers/1908.11848): "Based on workers' recent
// processing time, our approach DSSP adaptively adjusts the threshold per
// iteration at running time to reduce the waiting time of faster workers".
// The full text with its Algorithm 1 was not available to us, so what
// follows is our reading of it, with the choices it leaves open listed
// below.
//
// Worker loop (unchanged from SSP): wait for OK, pull, compute, push.
// Server, on a push from worker p at time now:
//
//	count the push (p's clock += 1), apply the update, record the time
//	g := clock[p] - clock[slowest]
//	if g <= sL:            OK                       (plain SSP region)
//	else if credit[p] > 0: credit[p]--, OK          (a granted extra iteration)
//	else:                  r* := controller(p, slowest, now)
//	                       if r* > 0: credit[p] = r*-1, OK
//	                       else hold p; ask again whenever anyone pushes
//
// The synchronisation controller simulates the next iterations of p and of
// the slowest worker s from their latest iteration intervals I_p and I_s:
// if p stops after r more iterations it pushes at t_r = now + r*I_p and then
// waits until s's first predicted push at or after t_r, a time
// T_s + j*I_s (T_s = s's latest push, j >= 1). The wait is
//
//	wait(r) = T_s + j(r)*I_s - t_r,   j(r) = max(1, ceil((t_r - T_s)/I_s))
//
// and r* is the r in [0, rmax] with the smallest wait (the smallest such r
// on ties: less staleness for the same wait). DSSPAbstractExtraIterations is that
// function; its table test works rows out by hand.
//
// Choices the paper leaves open, and what we do:
//   - Iteration interval. The paper, as the issue describes it, keeps each
//     worker's two latest push timestamps and uses their difference (the
//     controller above still keeps the latest push time of every worker and
//     one interval). For a worker that was held,
//     that difference includes the hold, and in steady state a fast worker
//     held every iteration then looks exactly as slow as the slowest one,
//     so the controller never grants anything. We measure the interval
//     from the moment the worker was let go (OK) to its next push, which is
//     the push-to-push difference whenever it was not held.
//   - Upper bound. A grant is capped so that the worker never pulls more
//     than sU ahead: granting at gap g allows r* <= sU - g + 1. At the first
//     crossing (g = sL+1) the cap is exactly rmax.
//   - Held workers. A held worker is re-examined after every push (the
//     slowest one's push is the one it waits for); the controller runs again
//     from that moment, so it can be let go with new extra iterations.
//   - Slowest worker. Among the unfinished workers with the smallest clock,
//     the one whose next push is predicted last (the minimum clock moves
//     only when all of them have pushed). Without an interval for both
//     workers (their first iteration) the controller grants nothing.
//   - Back in range. A worker whose gap is within sL loses unused credit, so
//     the next crossing consults the controller afresh.

// DSSPAbstractExtraIterations is the DSSP synchronisation controller: the number of
// extra iterations r* in [0, rmax] that minimises the simulated wait of a
// worker that could stop now (at time now) and whose iterations take
// fastInterval, for the slowest worker, whose latest push was at slowLast and
// whose iterations take slowInterval. Non-positive intervals (unknown) or
// rmax <= 0 give 0.
func DSSPAbstractExtraIterations(now, fastInterval, slowLast, slowInterval time.Duration, rmax int) int {
	if rmax <= 0 || fastInterval <= 0 || slowInterval <= 0 {
		return 0
	}
	best, bestWait := 0, time.Duration(math.MaxInt64)
	for r := 0; r <= rmax; r++ {
		t := now + time.Duration(r)*fastInterval
		j := time.Duration(1)
		if d := t - slowLast; d > slowInterval {
			j = (d + slowInterval - 1) / slowInterval // ceil
		}
		if wait := slowLast + j*slowInterval - t; wait < bestWait {
			best, bestWait = r, wait
		}
	}
	return best
}

// DSSPAbstractController is the DSSP consistency controller (see the comment at the
// top of dssp.go for the rule).
type DSSPAbstractController struct {
	clocks
	low, high int

	lastPush    []time.Duration // time of w's latest push
	pushed      []bool          // whether lastPush is set
	released    []time.Duration // when w's current iteration was let go; -1 unknown
	interval    []time.Duration // w's latest iteration interval; 0 unknown
	credit      []int           // extra iterations still granted to w
	mayProceed  []bool          // w has been let go for its next iteration
	grantCounts []int           // grantCounts[r]: controller consultations giving r
}

// NewDSSPAbstractController returns a DSSP controller for n workers with staleness
// range [low, high].
func NewDSSPAbstractController(n, low, high int) (*DSSPAbstractController, error) {
	if n < 1 || low < 0 || high < low {
		return nil, fmt.Errorf("ps: dssp-abstract controller: %d workers, range [%d,%d]: %w", n, low, high, ErrConfig)
	}
	d := &DSSPAbstractController{
		clocks: newClocks(n), low: low, high: high,
		lastPush: make([]time.Duration, n), pushed: make([]bool, n),
		released: make([]time.Duration, n), interval: make([]time.Duration, n),
		credit: make([]int, n), mayProceed: make([]bool, n),
		grantCounts: make([]int, high-low+1),
	}
	for w := range d.released {
		d.released[w] = -1
		d.mayProceed[w] = true // everyone may start iteration 0
	}
	return d, nil
}

// Grants returns how many times the synchronisation controller granted r
// extra iterations, for r = 0..sU-sL (a held worker re-examined counts again).
func (d *DSSPAbstractController) Grants() []int { return append([]int(nil), d.grantCounts...) }

// Pushed implements Controller.
func (d *DSSPAbstractController) Pushed(w int, now time.Duration) {
	d.clock[w]++
	if d.released[w] >= 0 {
		d.interval[w] = now - d.released[w]
	}
	d.lastPush[w], d.pushed[w] = now, true
	d.mayProceed[w] = d.decide(w, now)
	d.released[w] = -1
	if d.mayProceed[w] {
		d.released[w] = now
	}
}

// Finished implements Controller.
func (d *DSSPAbstractController) Finished(w int) { d.finished[w] = true }

// MayProceed implements Controller.
func (d *DSSPAbstractController) MayProceed(w int, now time.Duration) bool {
	if !d.mayProceed[w] {
		d.mayProceed[w] = d.decide(w, now)
	}
	if d.mayProceed[w] && d.released[w] < 0 {
		d.released[w] = now
	}
	return d.mayProceed[w]
}

// decide applies the server rule for worker w at time now.
func (d *DSSPAbstractController) decide(w int, now time.Duration) bool {
	g := d.gap(w)
	if g <= d.low {
		d.credit[w] = 0
		return true
	}
	if d.credit[w] > 0 {
		d.credit[w]--
		return true
	}
	r := d.grant(w, now, g)
	d.grantCounts[r]++
	if r > 0 {
		d.credit[w] = r - 1
		return true
	}
	return false
}

// grant runs the synchronisation controller for w at gap g > low.
func (d *DSSPAbstractController) grant(w int, now time.Duration, g int) int {
	rmax := min(d.high-d.low, d.high-g+1)
	if rmax <= 0 || d.interval[w] <= 0 {
		return 0
	}
	m := d.MinClock()
	slow, slowNext := -1, time.Duration(0)
	for v, c := range d.clock {
		if v == w || d.finished[v] || c != m {
			continue
		}
		if !d.pushed[v] || d.interval[v] <= 0 {
			return 0 // a slowest worker we cannot predict
		}
		if next := d.lastPush[v] + d.interval[v]; slow < 0 || next > slowNext {
			slow, slowNext = v, next
		}
	}
	if slow < 0 {
		return 0
	}
	return DSSPAbstractExtraIterations(now, d.interval[w], d.lastPush[slow], d.interval[slow], rmax)
}
