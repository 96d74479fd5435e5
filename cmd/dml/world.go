package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/mpi"
	"github.com/dml-project/dml/collectives/watch"
	"github.com/dml-project/dml/internal/crash"
	"github.com/dml-project/dml/internal/elastic"
	"github.com/dml-project/dml/trainer"
)

// withWorldBegun is withWorld with begin's duties around fn: begin (the
// flags' start on the world: --profile, --timeline, the peer timeout)
// before it, and the function begin returns after it, given fn's error.
func withWorldBegun(start time.Duration, begin func(collectives.Comm) (func(*error), error), fn func(c collectives.Comm) error) error {
	return withWorld(start, func(c collectives.Comm) (err error) {
		end, err := begin(c)
		if err != nil {
			return err
		}
		defer end(&err)
		return fn(c)
	})
}

// withWorld starts MPI (a singleton world of one rank without mpirun), runs
// fn and shuts MPI down. An error in a job of several ranks aborts the whole
// job (MPI_Abort), so that no rank is left waiting for one that gave up.
// The start-up itself ends the rank, saying why, when the job's other
// ranks have not all started within start (the command's --timeout;
// mpi.InitWithin).
func withWorld(start time.Duration, fn func(c collectives.Comm) error) error {
	c, err := mpi.InitWithin(start)
	if err != nil {
		return fmt.Errorf("starting MPI: %w", err)
	}
	defer abortOnPanic(c)
	crash.SetHandler(func(p *crash.Panic) { goroutinePanic(c, p) })
	defer crash.SetHandler(nil)
	defer watchGone(c)()
	testPanicHook(c.Rank())
	testKillHook(c)
	if err := fn(c); err != nil {
		err = wordFlags(err) // trainer names settings, the user typed flags
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
			fmt.Fprintf(os.Stderr, "dml: rank %d: %s\n", c.Rank(), flagError(err))
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

// goroutinePanic handles a panic on a goroutine nobody waits for
// (internal/crash): the line naming the rank and what it was doing, the
// goroutine's stack, and the end of the job (exit 2, as a Go panic would).
func goroutinePanic(c *mpi.Comm, p *crash.Panic) {
	fmt.Fprintf(os.Stderr, "%s\n[goroutine stack]\n%s", panicLine(c.Rank(), c.CurrentOp().String(), p.Value), p.Stack)
	// Not MPI_Abort: MPI is not to be called from a second thread while
	// the rank's own may be in it. An exit without MPI_Finalize makes
	// the launcher end the job; the bye keeps the liveness ring from
	// reporting this rank as dead.
	c.Bye(watch.ByeAbort)
	exitNow(2)
}

// testPanicHook panics on a goroutine of rank `rank` half a second in when
// DML_TEST_PANIC is goroutine:RANK (the test of goroutinePanic).
func testPanicHook(rank int) {
	if os.Getenv("DML_TEST_PANIC") == fmt.Sprintf("goroutine:%d", rank) {
		crash.Go(func() {
			time.Sleep(500 * time.Millisecond)
			panic("DML_TEST_PANIC: a goroutine panics")
		})
	}
}

// testKillHook kills this rank with SIGKILL once it runs step STEP when
// DML_TEST_KILL is RANK:STEP:MARKER and the file MARKER does not exist yet
// (it makes it: a job that dml launch restarts is killed once; the test of
// dml launch).
func testKillHook(c *mpi.Comm) {
	v := os.Getenv("DML_TEST_KILL")
	if v == "" {
		return
	}
	var rank, step int
	var marker string
	if n, _ := fmt.Sscanf(strings.Replace(v, ":", " ", 2), "%d %d %s", &rank, &step, &marker); n != 3 || rank != c.Rank() {
		return
	}
	// At the step itself, on the training goroutine (a poll from another
	// one found a fast job steps, even an epoch, later on a busy machine).
	c.OnStep(func(s int) {
		if s < step {
			return
		}
		if f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
			f.Close()
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	})
}

// caughtPanic, deferred at the top of a goroutine of this package, hands
// its panic to goroutinePanic.
func caughtPanic(c *mpi.Comm) {
	if r := recover(); r != nil {
		p, ok := r.(*crash.Panic)
		if !ok {
			p = &crash.Panic{Value: r, Stack: debug.Stack()}
		}
		goroutinePanic(c, p)
	}
}

// panicLine is the line a rank prints when it panics.
func panicLine(rank int, doing string, r any) string {
	return fmt.Sprintf("dml: rank %d: panic (last heard of in %s): %v", rank, doing, r)
}

// stopsHandled is set while `dml train` turns SIGINT/SIGTERM into a stop
// at a step boundary (stopSignals).
var stopsHandled atomic.Bool

// peersGone says whether the liveness ring found a rank of this job dead
// (see watchGone); false outside a multi-rank job.
var peersGone = func() bool { return false }

// lastWord, set by dml train while it trains, writes this rank's
// emergency checkpoint when a peer is found dead (trainer.Trainer.LastWord);
// sayLastWord runs it once, and closes lastWordDone when it has.
var (
	lastWord     atomic.Pointer[func(watch.Death)]
	lastWordOnce sync.Once
	lastWordDone = make(chan struct{})
)

// lastWordWait is how long a survivor asked to end (the launcher's
// SIGTERM) waits for its last word to be written.
const lastWordWait = 10 * time.Second

func sayLastWord(d watch.Death) {
	lastWordOnce.Do(func() {
		defer close(lastWordDone)
		if f := lastWord.Load(); f != nil {
			(*f)(d)
		}
	})
}

// exitNow ends the process (os.Exit; tests replace it).
var exitNow = os.Exit

// watchGone starts the liveness ring (collectives/watch): a rank killed
// outright (SIGKILL, the out-of-memory killer) or crashed, on any node, is
// found by its successor in the ring, which prints which rank died and what
// it was doing when last heard of, and every rank ends at once (status 1;
// their peer is gone: no step boundary will come, and nobody waits for a
// deadline). A SIGINT or SIGTERM tells the successor that this rank ends
// on purpose (its end is then no death), and is left to stopSignals under
// `dml train` and ends other commands as it would have; once a death is
// known, it ends the rank at once.
func watchGone(c *mpi.Comm) (stop func()) {
	if c.Size() < 2 {
		return func() {}
	}
	onDeath := func(d watch.Death) {
		fmt.Fprintf(os.Stderr, "dml: %v\n", d)
		// finder_step: where this rank, a survivor, had come: the dead
		// rank's last record may be old (issue 29: a dpsgd rank last heard
		// of in step 662 died after the checkpoint of step 700).
		elastic.Send(map[string]any{"event": "death", "rank": d.Rank, "host": d.Host, "pid": d.PID,
			"step": d.Op.Step, "op": d.Op.String(), "silent": d.Silent, "found_by": d.By, "finder_step": c.CurrentOp().Step})
		sayLastWord(d)
		exitNow(1)
	}
	onNotice := func(d watch.Death) { // the rank that found it said so
		sayLastWord(d)
		exitNow(1)
	}
	if err := c.StartWatch(onDeath, onNotice); err != nil {
		fmt.Fprintf(os.Stderr, "dml: rank %d: %v\n", c.Rank(), err)
	}
	peersGone = func() bool { return c.DeadPeer() != nil }
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	quit := make(chan struct{})
	go func() {
		defer caughtPanic(c)
		for {
			select {
			case <-quit:
				return
			case s := <-ch:
				if c.DeadPeer() != nil {
					// The launcher ends the survivors: let the last word
					// (being written, or about to be) finish first.
					select {
					case <-lastWordDone:
					case <-time.After(lastWordWait):
					}
					exitNow(exitStatus(s))
					return
				}
				c.Bye(watch.ByeSignal)
				if !stopsHandled.Load() {
					signal.Reset(syscall.SIGTERM, syscall.SIGINT)
					syscall.Kill(os.Getpid(), s.(syscall.Signal))
					return
				}
			}
		}
	}()
	return func() { signal.Stop(ch); close(quit) }
}
