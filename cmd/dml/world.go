package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/mpi"
	"github.com/dml-project/dml/trainer"
)

// withWorld starts MPI (a singleton world of one rank without mpirun), runs
// fn and shuts MPI down. An error in a job of several ranks aborts the whole
// job (MPI_Abort), so that no rank is left waiting for one that gave up.
func withWorld(fn func(c collectives.Comm) error) error {
	c, err := mpi.Init()
	if err != nil {
		return fmt.Errorf("starting MPI: %w", err)
	}
	defer abortOnPanic(c)
	defer watchGone(c)()
	if err := fn(c); err != nil {
		var se *trainer.StartError
		switch {
		case c.Size() > 1 && errors.As(err, &se):
			// Every rank took part in the start-up check that found a
			// rank unable to start (trainer.AgreeToStart): the ranks that
			// failed print their own message (once per distinct message),
			// rank 0 names them, and all end together without MPI_Abort.
			if !se.Quiet {
				fmt.Fprintf(os.Stderr, "dml: rank %d: %s\n", c.Rank(), message(err))
			}
			c.Barrier()
			mpi.Finalize()
			return reported{err}
		case c.Size() > 1 && errors.Is(err, trainer.ErrConfigMismatch):
			// Every rank found the mismatch in the same all-gather: each
			// reports it, and the barrier keeps mpirun from killing a rank
			// before it has printed.
			fmt.Fprintf(os.Stderr, "dml: rank %d: %v\n", c.Rank(), err)
			c.Barrier()
			mpi.Finalize()
			return reported{err}
		case errors.Is(err, trainer.ErrInterrupted):
			// Every rank stopped at the same step boundary (or, as a
			// parameter server, finished normally): end normally.
		case c.Size() > 1 && !errors.Is(err, errUsage) && !errors.Is(err, trainer.ErrUsage):
			// A usage error is found by every rank alike (same flags, same
			// world): no rank is left waiting, so the job ends normally with
			// the usage exit code. Anything else may strand a peer: abort.
			c.Abort(1, err)
		}
		mpi.Finalize()
		return err
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "dml: rank %d: MPI_Finalize: %v\n", c.Rank(), err)
	}
	return nil
}

// reported is an error already printed (by the ranks that had something
// to say): report exits 1, or 2 for a usage error, without printing it
// again.
type reported struct{ error }

func (r reported) Unwrap() error { return r.error }

// abortOnPanic, deferred by withWorld, turns a panic of the main goroutine
// into a line naming the rank and what it was doing when last heard of
// (the operation and step its stall inspector last recorded), with the
// stack, and MPI_Abort of the whole job, instead of Go's trace alone and
// peers left waiting until mpirun notices. A world of one rank panics on.
func abortOnPanic(c *mpi.Comm) {
	r := recover()
	if r == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "%s\n%s", panicLine(c.Rank(), c.CurrentOp().String(), r), debug.Stack())
	if c.Size() == 1 {
		panic(r)
	}
	c.Abort(2, fmt.Errorf("panic (stack above), last heard of in %s", c.CurrentOp()))
}

// panicLine is the line a rank prints when it panics.
func panicLine(rank int, doing string, r any) string {
	return fmt.Sprintf("dml: rank %d: panic (last heard of in %s): %v", rank, doing, r)
}

// stopsHandled is set while `dml train` turns SIGINT/SIGTERM into a stop
// at a step boundary (stopSignals).
var stopsHandled atomic.Bool

// peersGone says whether a rank of this job on this node has ended without
// a word (see watchGone); false outside a multi-rank job.
var peersGone = func() bool { return false }

// watchGone reports a rank killed outright: OpenMPI answers its death with
// SIGTERM to the survivors, and the lowest live rank of its node, reading
// the node's board (collectives/mpi/board.go), prints which rank died and
// what it was doing when last heard of, and the survivors exit 143 at once
// (their peer is gone: no step boundary will come). A SIGTERM with every
// rank alive is left to stopSignals under `dml train`, and ends other
// commands as it would have.
func watchGone(c *mpi.Comm) (stop func()) {
	if c.Size() < 2 {
		return func() {}
	}
	peersGone = func() bool { g, _ := c.GonePeers(); return len(g) > 0 }
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		select {
		case <-quit:
			return
		case s := <-ch:
			if gone, speak := c.GonePeers(); len(gone) > 0 {
				if speak {
					for _, g := range gone {
						fmt.Fprintf(os.Stderr, "dml: %v\n", g)
					}
				}
				c.CloseBoard()
				os.Exit(exitStatus(s))
			}
			if !stopsHandled.Load() {
				signal.Reset(syscall.SIGTERM)
				syscall.Kill(os.Getpid(), syscall.SIGTERM)
			}
		}
	}()
	return func() { signal.Stop(ch); close(quit) }
}
