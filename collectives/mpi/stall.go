package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/stall"
)

// Every wait of this transport goes through wait or probe below: the
// transport's deadline (Timeout) and the stall inspector (Stall) apply to
// all of them alike — receives, sends (a receiver that stopped must not
// hold a sender for ever: MPI_Send of a message past the eager limit waits
// for the receiver, spinning a core), the barrier and MPI's AllReduce.
//
// A wait runs in C (dml_wait, dml_probe: spin, yield, then sleep; see
// shim.c) for the whole deadline when no inspector is set, or until the
// inspector's first check (Policy.FirstCheck, 60 s by default): a wait that
// ends before then — every wait of a healthy job — costs exactly what it
// did without the inspector. Only a wait that is already long comes back
// to Go, asks the inspector, prints its report and goes on waiting.

// EnterOp implements collectives.OpMarker: the stall report of a wait
// names the operation last entered.
func (c *Comm) EnterOp(name string) {
	if c.ops != nil {
		c.ops.EnterOp(name)
	}
}

// SetStep implements collectives.OpMarker: the stall report of a wait
// names the training step last set.
func (c *Comm) SetStep(step int) {
	if c.ops != nil {
		c.ops.SetStep(step)
	}
	if c.onStep != nil {
		c.onStep(step)
	}
}

// OnStep makes SetStep call f with each step set, on SetStep's goroutine
// (for tests that must act at an exact step: dml's DML_TEST_KILL). It is
// set before training starts.
func (c *Comm) OnStep(f func(step int)) { c.onStep = f }

// CurrentOp is the operation last entered and the step last set (what a
// rank was doing when last heard of).
func (c *Comm) CurrentOp() stall.Op {
	if c.ops == nil {
		return stall.Op{Step: -1}
	}
	return c.ops.Current()
}

// groupPeer is the rank a whole-group wait (barrier, MPI_Allreduce) waits
// on, as far as this rank can tell: the other rank of two, else -1 (MPI
// does not say which ranks have joined).
func (c *Comm) groupPeer() int {
	if c.size == 2 {
		return 1 - c.rank
	}
	return -1
}

func (c *Comm) warn(msg string) {
	if c.Warn != nil {
		c.Warn(msg)
		return
	}
	fmt.Fprintf(os.Stderr, "dml: %s\n", msg)
}

// seconds converts a deadline for C.
func seconds(d time.Duration) C.double { return C.double(d.Seconds()) }

// firstSlice is how long a wait runs in C before it first comes back to
// Go: the inspector's first check, or the whole deadline.
func (c *Comm) firstSlice(limit time.Duration) time.Duration {
	if f := c.stallFor(limit).FirstCheck(); f > 0 && f < limit {
		return f
	}
	return limit
}

// waitMore goes on with a wait that has run its first slice (first) without
// completing: poll (a C wait with a deadline of its argument) is called
// until it returns something other than dmlTimeout or limit has passed,
// with the stall inspector's checks in between. It returns MPI's code, or
// dmlTimeout with the error to return (naming this rank, what it waited
// for — describe, called only now — the operation and how long).
func (c *Comm) waitMore(first, limit time.Duration, describe func() string, peer int, poll func(time.Duration) C.int) (C.int, error) {
	what := describe()
	p := c.stallFor(limit)
	// A timed-out C wait has waited its whole slice (it checks the
	// deadline after every poll), so elapsed needs no clock.
	elapsed, warned := first, 0
	for {
		// The check comes before the deadline's: an inspector whose abort
		// falls on the deadline (the default, --stall-timeout 0) ends the
		// wait with its report, which names the operation and the rank.
		act, next := p.Check(elapsed, warned)
		switch act {
		case stall.Abort:
			return dmlTimeout, c.timeoutError(what, peer, elapsed, p.Abort, stall.Report(c.rank, c.CurrentOp(), what, peer, elapsed))
		case stall.Warn:
			warned++
			r := stall.Report(c.rank, c.CurrentOp(), what, peer, elapsed)
			if peer < 0 && what == "barrier" {
				r += c.behind() // the rank after the missing one names it
			}
			c.warn(r)
		}
		if elapsed >= limit {
			return dmlTimeout, c.timeoutError(what, peer, elapsed, 0, "")
		}
		if next <= 0 || next > limit-elapsed {
			next = limit - elapsed
		}
		if rc := poll(next); rc != dmlTimeout {
			return rc, nil
		}
		elapsed += next
	}
}

// stallFor is the inspector's policy for a wait of limit. A wait given more
// than Timeout on purpose (the parameter server's stop vote waits three times as
// long, so that a worker held by a stopped server names the server first)
// is aborted that much later too: the inspector must not cut it back.
func (c *Comm) stallFor(limit time.Duration) stall.Policy {
	p := c.Stall
	if t := c.timeoutDuration(); p.Abort > 0 && limit > t {
		p.Abort += limit - t
	}
	return p
}

// timeoutError is the error of a wait that gave up after waited: the stall
// report when the inspector ended it, else the transport's deadline.
func (c *Comm) timeoutError(what string, peer int, waited, abort time.Duration, report string) error {
	if report != "" {
		return fmt.Errorf("%s: no progress after --stall-timeout %v: %w", report, abort, collectives.ErrTimeout)
	}
	return fmt.Errorf("rank %d: %s, in %s: no progress after %v: %w",
		c.rank, what, c.CurrentOp(), waited, collectives.ErrTimeout)
}

// leaked keeps the pins of buffers MPI may still write (a request that
// timed out and could not be cancelled) reachable for good: the memory is
// never reused and the Pinner is never collected while pinned.
var leaked struct {
	sync.Mutex
	pins []*runtime.Pinner
}

func leak(p *runtime.Pinner) {
	leaked.Lock()
	leaked.pins = append(leaked.pins, p)
	leaked.Unlock()
}
