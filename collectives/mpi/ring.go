package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/dml-project/dml/collectives/watch"
)

// The liveness ring (collectives/watch) names a rank that died on any node:
// StartWatch sets it up with one all-gather of the ranks' TCP addresses,
// and each rank's status (CurrentOp) goes to its successor four times a
// second. It replaces the death reports of the node's shared-memory board
// (which now holds only the doorbells), which could name only a rank of
// the survivors' own node, and only once the launcher had sent them
// SIGTERM.

// quietExtra is how much longer than the longest wait's limit a
// predecessor may be silent before the ring counts it dead: a stalled
// wait is the stall inspector's to report, with its words, first.
const quietExtra = 10 * time.Second

// StartWatch joins this rank to the liveness ring (all ranks call it, once,
// after Init and before any other operation). onDeath is called, on its own
// goroutine, when this rank finds its predecessor dead; onNotice when
// another rank found a death. A world of one rank has no ring. A ring that
// cannot be set up (no TCP between the ranks) is reported in one line and
// the job runs without it.
func (c *Comm) StartWatch(onDeath, onNotice func(watch.Death)) error {
	if c.size < 2 || c.ring != nil {
		return nil
	}
	if c.quiet == nil {
		c.quiet = new(atomic.Int64)
	}
	if c.quiet.Load() == 0 {
		c.quiet.Store(int64(c.timeoutDuration() + quietExtra))
	}
	r, err := watch.Listen(watch.Config{
		Rank: c.rank, Size: c.size, Status: c.CurrentOp,
		Quiet:   func() time.Duration { return time.Duration(c.quiet.Load()) },
		OnDeath: onDeath, OnNotice: onNotice,
		Logf: func(f string, a ...any) {
			fmt.Fprintf(os.Stderr, "dml: rank %d: liveness ring: %s\n", c.rank, fmt.Sprintf(f, a...))
		},
	})
	var mine []byte
	if err == nil {
		mine = r.Addr()
	} else {
		// Every rank takes part in the all-gather all the same.
		fmt.Fprintf(os.Stderr, "dml: rank %d: liveness ring: %v: a death of rank %d is named by the launcher only\n",
			c.rank, err, (c.rank+c.size-1)%c.size)
		mine = make([]byte, watch.AddrSize)
	}
	all := make([]byte, watch.AddrSize*c.size)
	var pin runtime.Pinner
	pin.Pin(&mine[0])
	pin.Pin(&all[0])
	defer pin.Unpin()
	var req C.MPI_Request
	if e := mpiError(C.dml_iallgather_bytes(ptr(mine), C.int(len(mine)), ptr(all), &req)); e != nil {
		return fmt.Errorf("liveness ring: all-gather of addresses: %w", e)
	}
	if rc := C.dml_wait(&req, seconds(c.timeoutDuration()), nil); rc == dmlTimeout {
		return fmt.Errorf("rank %d: liveness ring: all-gather of addresses: no progress after %v", c.rank, c.timeoutDuration())
	} else if e := mpiError(rc); e != nil {
		return fmt.Errorf("liveness ring: all-gather of addresses: %w", e)
	}
	if r == nil {
		return nil
	}
	recs := make([][]byte, c.size)
	for i := range recs {
		recs[i] = all[i*watch.AddrSize : (i+1)*watch.AddrSize]
	}
	c.ring = r
	r.Start(recs)
	return nil
}

// SetQuietLimit sets how long a predecessor may send nothing before the
// ring counts it dead: limit (the longest a wait may last: --timeout,
// --stall-timeout) plus 10 s, so that a stalled wait is reported by the
// stall inspector first.
func (c *Comm) SetQuietLimit(limit time.Duration) {
	if c.quiet == nil {
		return
	}
	c.quiet.Store(int64(limit + quietExtra))
}

// SetLiveness sets the ring's quiet limit to d itself (--liveness): a
// predecessor silent for d is dead, whether or not a wait could last
// longer (a stalled wait is then named by the ring, not the inspector).
func (c *Comm) SetLiveness(d time.Duration) {
	if c.quiet == nil {
		return
	}
	c.quiet.Store(int64(d))
}

// Bye tells this rank's successor in the liveness ring that this rank ends
// on purpose (watch.ByeEnd, ByeAbort, ByeSignal, ByeExit), so that its end
// is not reported as a death. Finalize and Abort say it themselves.
func (c *Comm) Bye(reason string) { c.ring.Bye(reason) }

// DeadPeer is the death of a rank this rank found or was told of by the
// liveness ring, or nil.
func (c *Comm) DeadPeer() *watch.Death { return c.ring.Gone() }

// behind names this rank's predecessor in the ring when it has not yet
// entered the operation this rank waits in (its operation count is lower):
// in a collective whose missing rank MPI does not name (MPI_Allreduce, a
// barrier, beyond 2 ranks), the rank after the missing one names it. ""
// when the predecessor is not behind, or nothing was heard from it.
func (c *Comm) behind() string {
	h := c.ring.Predecessor()
	if h == nil {
		return ""
	}
	me := c.CurrentOp()
	if h.Op.Seq >= me.Seq {
		return ""
	}
	return fmt.Sprintf("; rank %d has not joined: it was in %s when last heard of, %v before",
		h.Rank, h.Op, time.Since(h.At).Round(time.Millisecond))
}
