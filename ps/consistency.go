package ps

import (
	"fmt"
	"math"
	"time"
)

// Controller is a consistency controller: the server's bookkeeping of worker
// clocks that decides when a worker may start its next iteration. It does no
// I/O and reads no clock: the server passes the time in (any monotonic
// origin, e.g. time since the server started). Workers are numbered 0..n-1
// (worker index = rank - Servers). A server calls Pushed when it applies a
// worker's push, Finished when the worker says Done, and MayProceed before
// serving a pull (and before applying a push); a request that may not
// proceed is held and asked again after the next Pushed or Finished.
type Controller interface {
	// Pushed records that worker w's push was applied at time now; w's
	// clock goes up by one.
	Pushed(w int, now time.Duration)
	// Finished records that worker w is done: it no longer holds anyone back.
	Finished(w int)
	// MayProceed reports whether worker w may start its next iteration at
	// time now. It may update the controller's grants (DSSP).
	MayProceed(w int, now time.Duration) bool
	// Clock is worker w's number of pushes.
	Clock(w int) int
	// MinClock is the smallest clock of the workers not finished, or
	// math.MaxInt when all have finished.
	MinClock() int
}

// NewController returns the controller for cfg.Consistency over n workers.
func NewController(cfg Config, n int) (Controller, error) {
	if n < 1 {
		return nil, fmt.Errorf("ps: controller for %d workers: %w", n, ErrConfig)
	}
	switch cfg.Consistency {
	case BSP:
		return &SSPController{clocks: newClocks(n), s: 0}, nil
	case SSP:
		if cfg.Staleness < 0 {
			return nil, fmt.Errorf("ps: ssp staleness %d < 0: %w", cfg.Staleness, ErrConfig)
		}
		return &SSPController{clocks: newClocks(n), s: cfg.Staleness}, nil
	case ASP:
		return &ASPController{clocks: newClocks(n)}, nil
	case DSSP:
		return NewDSSPController(n, cfg.StalenessLow, cfg.StalenessHigh)
	}
	return nil, fmt.Errorf("ps: %v: %w", cfg.Consistency, ErrConfig)
}

// clocks is the bookkeeping every controller shares.
type clocks struct {
	clock    []int
	finished []bool
}

func newClocks(n int) clocks { return clocks{clock: make([]int, n), finished: make([]bool, n)} }

func (c *clocks) Clock(w int) int { return c.clock[w] }

func (c *clocks) MinClock() int {
	m := math.MaxInt
	for w, k := range c.clock {
		if !c.finished[w] && k < m {
			m = k
		}
	}
	return m
}

// gap is how far w is ahead of the slowest unfinished worker (0 when w is
// the slowest or every other worker has finished).
func (c *clocks) gap(w int) int {
	m := c.MinClock()
	if m == math.MaxInt || m > c.clock[w] {
		return 0
	}
	return c.clock[w] - m
}

// SSPController is stale synchronous parallel (Ho et al., NIPS'13): worker w
// at clock c may proceed iff c - MinClock() <= s. With s = 0 it is BSP's
// gate: nobody starts step t+1 before everyone has pushed step t.
type SSPController struct {
	clocks
	s int
}

// Pushed implements Controller.
func (c *SSPController) Pushed(w int, _ time.Duration) { c.clock[w]++ }

// Finished implements Controller.
func (c *SSPController) Finished(w int) { c.finished[w] = true }

// MayProceed implements Controller.
func (c *SSPController) MayProceed(w int, _ time.Duration) bool { return c.gap(w) <= c.s }

// ASPController is asynchronous parallel: nobody ever waits.
type ASPController struct {
	clocks
}

// Pushed implements Controller.
func (c *ASPController) Pushed(w int, _ time.Duration) { c.clock[w]++ }

// Finished implements Controller.
func (c *ASPController) Finished(w int) { c.finished[w] = true }

// MayProceed implements Controller; it is always true.
func (c *ASPController) MayProceed(int, time.Duration) bool { return true }
