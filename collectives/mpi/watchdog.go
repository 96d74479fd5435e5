package mpi

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dml-project/dml/collectives/stall"
	"github.com/dml-project/dml/collectives/watch"
	"github.com/dml-project/dml/internal/crash"
)

// A blocking MPI call that cannot be given a deadline: MPI_Allreduce.
//
// NativeAllreduceSum stays the blocking MPI_Allreduce because it is the
// baseline dml measures itself against and what Auto picks for small and
// middle sizes (auto.go's tables): MPI_Iallreduce (libnbc in OpenMPI 4.1)
// measured 30-50% slower at 4-64 bytes and about twice as slow at 4 MiB
// on 2 ranks here. A blocking call cannot return at a deadline, so a
// watchdog goroutine watches it instead: the call stores when it began
// (one clock read and two atomic stores, about 30 ns), and the watchdog,
// which wakes every watchdogTick only while a call is in progress, prints
// the stall report at Stall.Warn and, at the deadline (Timeout, or
// Stall.Abort if sooner), prints the report and ends this process with
// exit status 1 — mpirun then ends the job. (MPI_Abort cannot be called
// from another thread while this one is inside MPI at THREAD_SERIALIZED.)

// watchdogTick is how often the watchdog looks at a call in progress.
const watchdogTick = 250 * time.Millisecond

type watchdog struct {
	begin atomic.Int64 // nanoseconds since watchStart when the call began; 0: none
	seq   atomic.Uint64
	once  sync.Once
	// exit ends the process (os.Exit; tests replace it).
	exit func(code int)
}

var watchStart = time.Now()

// enter records that a blocking call begins.
func (w *watchdog) enter(c *Comm) {
	w.once.Do(func() {
		if w.exit == nil {
			w.exit = os.Exit
		}
		crash.Go(func() { w.run(c) })
	})
	w.seq.Add(1)
	w.begin.Store(int64(time.Since(watchStart)) | 1) // never 0
}

// leave records that the call returned.
func (w *watchdog) leave() { w.begin.Store(0) }

// run checks, every tick, the call in progress if there is one.
func (w *watchdog) run(c *Comm) {
	var seen uint64
	warned := 0
	last := time.Now()
	for {
		time.Sleep(watchdogTick)
		gap := time.Since(last) - watchdogTick
		last = time.Now()
		b := w.begin.Load()
		if b == 0 {
			continue
		}
		if gap > time.Second {
			// This process did not run (SIGSTOP, a starved or suspended
			// VM): that time is not waiting for peers. Move the call's
			// beginning by it, as the C waits move their deadlines.
			w.begin.CompareAndSwap(b, b+int64(gap)&^1|1)
			continue
		}
		if s := w.seq.Load(); s != seen {
			seen, warned = s, 0
		}
		elapsed := time.Since(watchStart) - time.Duration(b)
		limit := c.timeoutDuration()
		act, _ := c.Stall.Check(elapsed, warned)
		report := stall.Report(c.rank, c.CurrentOp(), "MPI_Allreduce", c.groupPeer(), elapsed)
		if c.groupPeer() < 0 {
			report += c.behind() // the rank after the missing one names it
		}
		switch {
		case elapsed >= limit:
			fmt.Fprintf(os.Stderr, "dml: rank %d: MPI_Allreduce, in %s: no progress after %v; ending this rank (a blocking MPI call cannot be cancelled)\n",
				c.rank, c.CurrentOp(), limit)
			c.Bye(watch.ByeExit)
			w.exit(1)
			return
		case act == stall.Abort:
			fmt.Fprintf(os.Stderr, "dml: %s: no progress after --stall-timeout %v; ending this rank\n", report, c.Stall.Abort)
			c.Bye(watch.ByeExit)
			w.exit(1)
			return
		case act == stall.Warn:
			warned++
			c.warn(report)
		}
	}
}
