package ps

import (
	"fmt"
	"time"
)

// Dynamic stale synchronous parallel (DSSP): Zhao, An, Liu, Chen, "Dynamic
// Stale Synchronous Parallel Distributed Training for Deep Learning", ICDCS
// 2019 (arXiv:1908.11848), as the survey ../shared/seeds/004_*.txt gives its
// "Algorithm DSSP" step by step. SSP with a fixed threshold s makes a fast
// worker wait for the slowest one every time it gets s iterations ahead;
// DSSP takes a range [sL, sU] and lets the fastest worker run up to
// rmax = sU - sL extra iterations beyond sL, as many as a simulation of the
// next iterations says will bring its push closest to the slowest worker's.
//
// Worker p (unchanged from SSP): wait for OK, pull, compute, push.
//
// Server, on a push from worker p (its timestamp push_p is the time now):
//
//	1. t_p += 1; apply the update; A[p] = (now, A[p][0])   (two latest pushes)
//	2. if r_p > 0:                   r_p -= 1, OK            (a granted extra iteration)
//	3. else if t_p - t_slowest <= sL: OK                     (plain SSP region)
//	4. else if p is the fastest:     r* = controller(p, now)
//	                                 if r* > 0: OK, r_p = r* - 1
//	5. otherwise hold p until t_p - t_slowest <= sL, then OK (no new grant)
//
// Synchronisation controller (pure: DSSPSynchronise), rmax' = the room left:
//
//	I_p = A[p][0] - A[p][1],  I_s = A[s][0] - A[s][1]    (s: the slowest)
//	Sim_p[r] = A[p][0] + r*I_p,        r in [0, rmax']
//	Sim_s[k] = A[s][0] + (k+1)*I_s,    k in [0, rmax']
//	r* = the r minimising min_k |Sim_s[k] - Sim_p[r]|   (smallest r on ties)
//
// The survey's text and what we do where it is silent or where we deviate:
//   - Table A. The survey's controller shifts A[p] itself (its steps 1-2),
//     but the controller runs only for the fastest worker while it also
//     reads the slowest worker's row, and its Note 3 says A holds the two
//     latest pushes of all workers. We update A[w] at every push of every
//     worker. Iteration intervals are push to push, so they include any
//     time the worker was held.
//   - The OK sent with a grant is the first of the r* extra iterations
//     (r_p = r* - 1), so p starts iterations at gaps sL+1..sL+r* <= sU. Read
//     literally (OK now and r_p = r*), p would start one at sU+1.
//   - Room left. The survey always simulates rmax = sU - sL iterations. A
//     worker that spent its grant can meet the controller again beyond
//     sL+1, and a second full grant would take it past sU; we cap r* at
//     sU - gap + 1, the iterations p can still start within sU (0 at a gap
//     beyond sU: the controller answers 0 and p waits).
//   - Unknown intervals. A worker with fewer than two pushes has no
//     interval; the controller then answers 0 (the survey leaves A's
//     initial values open).
//   - "Fastest" and "slowest". p is the fastest when no unfinished worker
//     has a larger clock (ties count as fastest). The slowest is the
//     unfinished worker with the smallest clock; the survey's controller
//     "finds the slowest worker from table A": among several with the
//     smallest clock we take the one whose next push (A[s][0] + I_s) is
//     predicted last, since the smallest clock moves only when all of them
//     have pushed. A finished worker holds nobody back.
//   - Credit is spent before the gap is looked at (the survey's order), so a
//     worker spends its r_p even when the slowest has caught up meanwhile.
//   - Timestamps are the server's clock when it applies the push: the time
//     its driver read on receiving the request (a push is held only if its
//     worker pushes again without being let go), not the worker's clock.
//     Push-to-push intervals thus include the network and the server's
//     queue as well as the worker's computation.
//   - Several servers. Each server runs its own controller over its own
//     key range with its own arrival times; a worker starts an iteration
//     when every server has answered its pull, so the most cautious server
//     decides. Each server's grants are within [0, sU-sL] and no server lets
//     a worker start beyond sU.
//
// How this compares with the rule dml first had, written from the paper's
// abstract alone before we had the algorithm (ps/dssp.go up to commit
// 71c5f1b; measured as "dssp-abstract" at commit 0f6d441 and then removed:
// it was never better, and with a straggler it took 1.3x the wall time of
// this rule; docs/results.md, "consistency models"):
//
//	                          published (dssp)           from the abstract
//	iteration interval        push to push (holds too)   OK to next push (compute)
//	controller consulted by   the fastest, beyond sL     any worker beyond sL
//	objective                 min |Sim_s[k] - Sim_p[r]|  min wait after p stops
//	                          (early or late alike)      (Sim_s[k] >= Sim_p[r])
//	slowest simulated         rmax+1 pushes from A[s][0] until after p stops
//	held worker               waits until gap <= sL      re-consulted at every push
//	credit r_p                spent first, even <= sL    dropped when back <= sL
//	OK with a grant           first extra iteration      first extra iteration
//	cap at sU                 r* <= sU - gap + 1         r* <= sU - gap + 1

// DSSPSynchronise is the DSSP synchronisation controller: the number of
// extra iterations r* in [0, rmax] for worker p, whose latest push was at
// pLast and whose latest push-to-push interval is pInterval, given the
// slowest worker's latest push sLast and interval sInterval. It simulates
// p's pushes at pLast + r*pInterval (r = 0..rmax) and the slowest's at
// sLast + (k+1)*sInterval (k = 0..rmax) and returns the r whose push is
// nearest to one of the slowest's (the smallest such r on ties).
// Non-positive intervals (unknown) or rmax <= 0 give 0.
func DSSPSynchronise(pLast, pInterval, sLast, sInterval time.Duration, rmax int) int {
	if rmax <= 0 || pInterval <= 0 || sInterval <= 0 {
		return 0
	}
	best, bestDist := 0, time.Duration(-1)
	for r := 0; r <= rmax; r++ {
		simP := pLast + time.Duration(r)*pInterval
		for k := 0; k <= rmax; k++ {
			d := sLast + time.Duration(k+1)*sInterval - simP
			if d < 0 {
				d = -d
			}
			if bestDist < 0 || d < bestDist {
				best, bestDist = r, d
			}
		}
	}
	return best
}

// pushTimes is one row of DSSP's table A: a worker's two latest push times.
type pushTimes struct {
	last, prev time.Duration
	n          int // pushes recorded, up to 2
}

func (a *pushTimes) record(now time.Duration) {
	a.prev, a.last = a.last, now
	a.n = min(a.n+1, 2)
}

// interval is the latest push-to-push interval, 0 if unknown.
func (a pushTimes) interval() time.Duration {
	if a.n < 2 {
		return 0
	}
	return a.last - a.prev
}

// DSSPController is the DSSP consistency controller, the published rule
// (see the comment at the top of dssp.go).
type DSSPController struct {
	clocks
	low, high int

	table       []pushTimes // A
	credit      []int       // r_p: extra iterations still granted
	ok          []bool      // w has been let go for its next iteration
	grantCounts []int       // grantCounts[r]: controller answers r
}

// NewDSSPController returns a DSSP controller for n workers with staleness
// range [low, high].
func NewDSSPController(n, low, high int) (*DSSPController, error) {
	if n < 1 || low < 0 || high < low {
		return nil, fmt.Errorf("ps: dssp controller: %d workers, range [%d,%d]: %w", n, low, high, ErrConfig)
	}
	d := &DSSPController{
		clocks: newClocks(n), low: low, high: high,
		table: make([]pushTimes, n), credit: make([]int, n), ok: make([]bool, n),
		grantCounts: make([]int, high-low+1),
	}
	for w := range d.ok {
		d.ok[w] = true // everyone may start iteration 0
	}
	return d, nil
}

// Grants returns how many times the synchronisation controller answered r
// extra iterations, for r = 0..sU-sL.
func (d *DSSPController) Grants() []int { return append([]int(nil), d.grantCounts...) }

// Credit is r_p, the extra iterations worker w has been granted and not yet
// started.
func (d *DSSPController) Credit(w int) int { return d.credit[w] }

// Pushed implements Controller: the server's steps 1-5 for a push of w.
func (d *DSSPController) Pushed(w int, now time.Duration) {
	d.clock[w]++
	d.table[w].record(now)
	d.ok[w] = d.decide(w)
}

// Finished implements Controller.
func (d *DSSPController) Finished(w int) { d.finished[w] = true }

// MayProceed implements Controller. A held worker is let go once it is
// within sL of the slowest; it is not offered new extra iterations.
func (d *DSSPController) MayProceed(w int, _ time.Duration) bool {
	if !d.ok[w] && d.gap(w) <= d.low {
		d.ok[w] = true
	}
	return d.ok[w]
}

// decide is the server's answer to w's push: OK (true) or hold.
func (d *DSSPController) decide(w int) bool {
	if d.credit[w] > 0 {
		d.credit[w]--
		return true
	}
	g := d.gap(w)
	if g <= d.low {
		return true
	}
	if !d.fastest(w) {
		return false
	}
	r := d.synchronise(w, g)
	d.grantCounts[r]++
	if r == 0 {
		return false
	}
	d.credit[w] = r - 1
	return true
}

// fastest reports whether no unfinished worker is ahead of w.
func (d *DSSPController) fastest(w int) bool {
	for v, c := range d.clock {
		if !d.finished[v] && c > d.clock[w] {
			return false
		}
	}
	return true
}

// synchronise runs the controller for w at gap g > sL.
func (d *DSSPController) synchronise(w, g int) int {
	rmax := min(d.high-d.low, d.high-g+1)
	m := d.MinClock()
	slow, slowNext := -1, time.Duration(0)
	for v, c := range d.clock {
		if v == w || d.finished[v] || c != m {
			continue
		}
		iv := d.table[v].interval()
		if iv <= 0 {
			return 0 // a slowest worker we cannot predict
		}
		if next := d.table[v].last + iv; slow < 0 || next > slowNext {
			slow, slowNext = v, next
		}
	}
	if slow < 0 {
		return 0
	}
	a, s := d.table[w], d.table[slow]
	return DSSPSynchronise(a.last, a.interval(), s.last, s.interval(), rmax)
}
