// Package mpi is the collectives.Comm transport over MPI (MPI_COMM_WORLD):
// gompi (github.com/sbromberger/gompi) for what it covers, and a small cgo
// shim (shim.go) for non-blocking point-to-point calls, deadlines and error
// codes. It is the only package that calls MPI.
//
// Buffers are handed to MPI in place (no staging copies): a []float32 is
// passed as MPI_FLOAT data, pinned with runtime.Pinner until its request
// completes.
package mpi

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gompi "github.com/sbromberger/gompi"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/stall"
	"github.com/dml-project/dml/collectives/watch"
)

// DefaultTimeout bounds every wait for a peer.
const DefaultTimeout = collectives.DefaultTimeout

// Comm is MPI_COMM_WORLD as a collectives.Comm. Use it from one goroutine
// at a time (MPI is initialised with MPI_THREAD_SERIALIZED).
type Comm struct {
	rank, size int
	// Timeout bounds each wait for a peer (every send, receive, barrier
	// and MPI collective); a wait that runs out fails with
	// collectives.ErrTimeout naming the peer and the operation.
	Timeout time.Duration
	// Stall is the stall inspector's policy for every wait (the zero
	// Policy: off): a wait that lasts Stall.Warn prints a stall report
	// (through Warn), one that lasts Stall.Abort fails with it, wrapping
	// collectives.ErrTimeout. A wait that ends sooner never consults it.
	Stall stall.Policy
	// Warn prints a stall warning (nil: a "dml: " line on standard error).
	Warn func(msg string)

	ops    *stall.Tracker
	onStep func(step int) // OnStep's, run by SetStep
	board  *board         // this node's doorbells (board.go)
	ring   *watch.Ring    // the liveness ring (ring.go)
	quiet  *atomic.Int64  // its silence limit, nanoseconds
	native *watchdog      // watches the blocking MPI_Allreduce
	coll   uint64         // collectives begun (NextCollective; atomic)
}

var (
	_ collectives.Comm             = (*Comm)(nil)
	_ collectives.NativeAllreducer = (*Comm)(nil)
	_ collectives.OpMarker         = (*Comm)(nil)
	_ collectives.Sequencer        = (*Comm)(nil)
)

var (
	initOnce sync.Once
	world    *Comm
	initErr  error
)

// Launched reports whether this process was started by an MPI launcher
// (mpirun/mpiexec of OpenMPI, or a PMI-based one such as srun or MPICH's).
func Launched() bool {
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

// localRanks is the number of ranks on this node, as the launcher tells
// it, or 1 when it does not.
func localRanks() int {
	for _, k := range []string{"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"} {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
			return v
		}
	}
	return 1
}

// LocalSize is the number of ranks on this node, as the launcher tells it,
// or 1 when it does not.
func LocalSize() int { return localRanks() }

// OnlineCPUs is the node's online CPU count (sysconf), whatever this
// process's affinity: the figure Init compares the local ranks with.
func OnlineCPUs() int { return int(C.dml_online_cpus()) }

// LocalRank is this rank's index among the ranks on its node (for picking a
// GPU), or 0 when the launcher does not say.
func LocalRank() int {
	for _, k := range []string{"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"} {
		if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
			return v
		}
	}
	return 0
}

// Init initialises MPI once per process and returns the world communicator.
// Without a launcher, OpenMPI starts as a singleton: a world of one rank.
// Setting DML_MPI_THREADS=multiple asks for MPI_THREAD_MULTIPLE instead of
// MPI_THREAD_SERIALIZED (for the comparison in exchange_test.go).
//
// Waits follow DefaultWaitPolicy, or SpinWaitPolicy when DML_MPI_WAIT=spin
// (SetWaitPolicy changes it later).
//
// Init raises GOMAXPROCS from 1 to 2 unless the GOMAXPROCS environment
// variable is set (see the comment in the code: MPI waits are long cgo
// calls, and with a single P each one makes the runtime wake a thread).
func Init() (*Comm, error) { return InitWithin(DefaultTimeout) }

// InitWithin is Init with a deadline on the start-up: MPI_Init waits for
// every rank of the job to start, and a rank that never does (stopped,
// killed before MPI is up, or a program that is not an MPI one in an MPMD
// command line) would hold the others in it for ever, where no Comm
// timeout reaches. When MPI_Init has not returned after limit, a watchdog
// says so on stderr in one line, naming this rank and what it waits for,
// and exits the process with status 1 (the main goroutine is inside the C
// call; nothing of the job has been done yet); the launcher then ends the
// others. The start-up barrier after it, and the returned Comm's
// Timeout, take limit too.
func InitWithin(limit time.Duration) (*Comm, error) {
	if limit <= 0 {
		limit = DefaultTimeout
	}
	done := make(chan struct{})
	defer close(done)
	go initWatchdog(limit, done, func(msg string) {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	})
	return initWorld(limit)
}

// initWatchdog calls give with its message when done is not closed within
// limit.
func initWatchdog(limit time.Duration, done <-chan struct{}, give func(string)) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		give(initStalled(limit, os.Getenv))
	}
}

// initStalled is the watchdog's line, with the rank and size from the
// launcher's environment (MPI cannot say them yet).
func initStalled(limit time.Duration, getenv func(string) string) string {
	who := "this rank"
	if r := getenv("OMPI_COMM_WORLD_RANK"); r != "" {
		who = "rank " + r
		if n := getenv("OMPI_COMM_WORLD_SIZE"); n != "" {
			who += " of " + n
		}
	} else if r := getenv("PMI_RANK"); r != "" {
		who = "rank " + r
	}
	return fmt.Sprintf("dml: %s: MPI start-up did not complete within %v (--timeout): MPI_Init waits for every rank of the job to start, "+
		"and one has not (stopped, killed, or a program that is not dml in the command line); ending", who, limit)
}

func initWorld(limit time.Duration) (*Comm, error) {
	initOnce.Do(func() {
		var provided C.int
		multiple := C.int(0)
		if os.Getenv("DML_MPI_THREADS") == "multiple" {
			multiple = 1
		}
		if err := mpiError(C.dml_init(multiple, &provided)); err != nil {
			initErr = fmt.Errorf("MPI_Init_thread: %w", err)
			return
		}
		if multiple == 1 && provided != C.MPI_THREAD_MULTIPLE {
			initErr = fmt.Errorf("MPI_Init_thread: asked for MPI_THREAD_MULTIPLE, MPI provides level %d", int(provided))
			return
		}
		var r, n C.int
		if err := mpiError(C.dml_rank(&r)); err != nil {
			initErr = fmt.Errorf("MPI_Comm_rank: %w", err)
			return
		}
		if err := mpiError(C.dml_size(&n)); err != nil {
			initErr = fmt.Errorf("MPI_Comm_size: %w", err)
			return
		}
		// The collectives' tags go up to TagCollectivesMax (with the
		// collective's number in them); MPI guarantees only 32767, OpenMPI
		// allows 2^31-1.
		if ub := int(C.dml_tag_ub()); ub >= 0 && ub < collectives.TagCollectivesMax {
			initErr = fmt.Errorf("this MPI's largest message tag (MPI_TAG_UB) is %d; dml's collectives use tags up to %d", ub, collectives.TagCollectivesMax)
			return
		}
		world = &Comm{rank: int(r), size: int(n), Timeout: limit, ops: stall.NewTracker(), native: &watchdog{}, quiet: new(atomic.Int64)}
		// Waits spin briefly, then yield, then sleep (WaitPolicy).
		policy, err := waitPolicyFromEnv()
		if err == nil {
			err = SetWaitPolicy(policy)
		}
		if err != nil {
			initErr = err
			return
		}
		if world.size > 1 {
			// Every local rank maps the board, then its file goes: the
			// mappings stay, and nothing is left in /dev/shm however the
			// job ends (MPI_Abort, a kill). The barrier is not an
			// operation of the job's: the stall inspector's count starts
			// after it.
			world.board = openBoard(world.rank, world.size)
			var req C.MPI_Request
			err := mpiError(C.dml_ibarrier(&req))
			if err == nil {
				err = mpiError(C.dml_wait(&req, seconds(world.timeoutDuration()), nil))
			}
			if err != nil {
				initErr = fmt.Errorf("barrier at start-up: %w", err)
				return
			}
			world.board.unlink()
		}
		// Waits give the core away (sched_yield) only when this node's
		// ranks outnumber its cores: then a spinning rank holds a core the
		// rank it waits for needs. With a core each there is nobody to
		// yield to (2 ranks, 2 cores: no difference beyond noise).
		C.dml_yield = 0
		if localRanks() > OnlineCPUs() {
			C.dml_yield = 1
		}
		// With GOMAXPROCS=1 (mpirun binds each rank to one core when
		// ranks ≤ cores, and Go sizes GOMAXPROCS by that affinity), every
		// cgo wait longer than a sysmon tick (20 µs) gets its P handed to
		// a freshly woken thread on the same core, and sysmon keeps
		// ticking every 20 µs: a ring AllReduce waits hundreds of times
		// per call and lost 10-25% to that at 4 MiB (2 ranks). A second,
		// idle P stops the hand-offs (the runtime keeps a P in a syscall
		// while another P is idle). An explicit GOMAXPROCS wins.
		if runtime.GOMAXPROCS(0) == 1 && os.Getenv("GOMAXPROCS") == "" {
			runtime.GOMAXPROCS(2)
		}
	})
	return world, initErr
}

// Finalize shuts MPI down; call it once, after the last collective.
func Finalize() error {
	if !gompi.IsOn() {
		return nil
	}
	if world != nil {
		world.ring.Bye(watch.ByeEnd)
		defer world.ring.Close()
		world.board.close()
		world.board = nil
	}
	return mpiError(C.dml_finalize())
}

// Wtime is MPI_Wtime: seconds since an arbitrary point, for timings.
func Wtime() float64 { return gompi.WorldTime() }

// Rank implements collectives.Comm.
func (c *Comm) Rank() int { return c.rank }

// Size implements collectives.Comm.
func (c *Comm) Size() int { return c.size }

func (c *Comm) checkPeer(p int, wildcard bool) error {
	if wildcard && p == collectives.AnySource {
		return nil
	}
	if p < 0 || p >= c.size {
		return fmt.Errorf("rank %d: peer %d not in [0,%d): %w", c.rank, p, c.size, collectives.ErrBadRank)
	}
	return nil
}

// timeoutDuration is c.Timeout, or DefaultTimeout when it is not positive.
func (c *Comm) timeoutDuration() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// request is an outstanding MPI_Isend or MPI_Irecv.
type request struct {
	c      *Comm
	req    C.MPI_Request
	pin    runtime.Pinner
	n      int // elements expected (receives)
	peer   int
	tag    int
	recv   bool
	done   bool
	result error
}

// Wait implements collectives.Request.
func (q *request) Wait() error {
	if q.done {
		return q.result
	}
	q.done = true
	var count C.int
	limit := q.c.timeoutDuration()
	first := q.c.firstSlice(limit)
	var rc C.int
	var terr error
	if q.recv {
		rc = C.dml_wait(&q.req, seconds(first), &count)
	} else {
		rc = C.dml_wait(&q.req, seconds(first), nil)
	}
	if rc == dmlTimeout { // a long wait: the stall inspector's turn
		// The C waits get a copy of the handle: cgo's pointer check would
		// otherwise inspect all of q, which holds Go pointers.
		req := q.req
		cp := &count
		if !q.recv {
			cp = nil
		}
		rc, terr = q.c.waitMore(first, limit, q.describe, q.peer, func(d time.Duration) C.int {
			return C.dml_wait(&req, seconds(d), cp)
		})
		q.req = req
	}
	if rc == dmlTimeout {
		// Cancel the request before giving its buffer back to Go: a late
		// message must not land in reused memory. If even the cancellation
		// does not finish, the buffer stays pinned (never freed) for good.
		if C.dml_cancel(&q.req, 1) == C.MPI_SUCCESS {
			q.pin.Unpin()
		} else {
			leak(&q.pin)
		}
	} else {
		q.pin.Unpin()
	}
	switch {
	case rc == dmlTimeout:
		q.result = terr
	case rc == C.MPI_ERR_TRUNCATE:
		q.result = fmt.Errorf("rank %d: recv from rank %d tag %d: message longer than the %d elements expected: %w",
			q.c.rank, q.peer, q.tag, q.n, collectives.ErrLengthMismatch)
	case rc != C.MPI_SUCCESS:
		q.result = fmt.Errorf("rank %d: %s: %w", q.c.rank, q.describe(), mpiError(rc))
	case q.recv && int(count) != q.n:
		q.result = fmt.Errorf("rank %d: recv from rank %d tag %d: got %d elements, want %d: %w",
			q.c.rank, q.peer, q.tag, int(count), q.n, collectives.ErrLengthMismatch)
	}
	return q.result
}

// Done implements collectives.Tester for a send: whether it has
// completed, polling MPI once (MPI_Test), without waiting; once it has,
// Wait returns at once. A receive answers false until waited for.
func (q *request) Done() bool {
	if q.done {
		return true
	}
	if q.recv {
		return false
	}
	req := q.req
	rc := C.dml_wait(&req, 0, nil)
	q.req = req
	if rc == dmlTimeout {
		return false
	}
	q.done = true
	q.pin.Unpin()
	if rc != C.MPI_SUCCESS {
		q.result = fmt.Errorf("rank %d: %s: %w", q.c.rank, q.describe(), mpiError(rc))
	}
	return true
}

// describe says what the request waits for, for errors and stall reports
// (called only once a wait is already long), with what the peer sent
// instead when its schedule differs (mismatch).
func (q *request) describe() string {
	if q.recv {
		return fmt.Sprintf("recv from rank %d tag %d", q.peer, q.tag) + q.c.mismatch(q.peer, q.tag)
	}
	return fmt.Sprintf("send to rank %d tag %d", q.peer, q.tag) + q.c.mismatch(q.peer, q.tag)
}

// NextCollective implements collectives.Sequencer: the collectives' tags
// carry their number (modulo collectives.TagSeqMod), so that ranks whose
// schedules differ wait, and say so, instead of misreading each other.
func (c *Comm) NextCollective() uint64 { return atomic.AddUint64(&c.coll, 1) }

// mismatch is, for a long wait on peer with a collectives' tag, what that
// peer sent this rank instead, when it sent a message of another
// collective or kind ("; rank 3 has sent … of collective #12 … while this
// rank waits for … of collective #11"), or "". MPI keeps the messages of
// one sender in order, so a message of the peer's that is there while the
// one waited for is not means the peer has moved on to (or is still in)
// another operation.
func (c *Comm) mismatch(peer, tag int) string {
	kind, mod, ok := collectives.DescribeTag(tag)
	if !ok || peer < 0 || peer >= c.size {
		return ""
	}
	var src, got, count C.int
	if C.dml_probe(C.int(peer), -1, 0, &src, &got, &count) != C.MPI_SUCCESS || int(got) == tag {
		return ""
	}
	pkind, pmod, ok := collectives.DescribeTag(int(got))
	if !ok {
		return ""
	}
	mine := collectives.NearestSeq(atomic.LoadUint64(&c.coll), mod)
	theirs := collectives.NearestSeq(mine, pmod)
	return fmt.Sprintf("; rank %d has sent %s of collective #%d (tag %d) while this rank waits for %s of collective #%d: the ranks' schedules differ",
		peer, pkind, theirs, int(got), kind, mine)
}

// Isend implements collectives.Comm.
func (c *Comm) Isend(buf []float32, to, tag int) (collectives.Request, error) {
	if err := c.checkPeer(to, false); err != nil {
		return nil, err
	}
	q := &request{c: c, peer: to, tag: tag}
	p := ptr(buf)
	if p != nil {
		q.pin.Pin(&buf[0])
	}
	if err := mpiError(C.dml_isend_f32(p, C.int(len(buf)), C.int(to), C.int(tag), &q.req)); err != nil {
		q.pin.Unpin()
		return nil, fmt.Errorf("rank %d: MPI_Isend to rank %d: %w", c.rank, to, err)
	}
	return q, nil
}

// Irecv implements collectives.Comm.
func (c *Comm) Irecv(buf []float32, from, tag int) (collectives.Request, error) {
	if err := c.checkPeer(from, false); err != nil {
		return nil, err
	}
	q := &request{c: c, peer: from, tag: tag, recv: true, n: len(buf)}
	p := ptr(buf)
	if p != nil {
		q.pin.Pin(&buf[0])
	}
	if err := mpiError(C.dml_irecv_f32(p, C.int(len(buf)), C.int(from), C.int(tag), &q.req)); err != nil {
		q.pin.Unpin()
		return nil, fmt.Errorf("rank %d: MPI_Irecv from rank %d: %w", c.rank, from, err)
	}
	return q, nil
}

// SendBytes implements collectives.Comm. Like every wait, it gives up
// after Timeout (a receiver that stopped, e.g. SIGSTOP, must not hold the
// sender for ever), cancelling the send.
func (c *Comm) SendBytes(buf []byte, to, tag int) error {
	if err := c.checkPeer(to, false); err != nil {
		return err
	}
	var pin runtime.Pinner
	if len(buf) > 0 {
		pin.Pin(&buf[0])
	}
	var req C.MPI_Request
	if err := mpiError(C.dml_isend_bytes(ptr(buf), C.int(len(buf)), C.int(to), C.int(tag), &req)); err != nil {
		pin.Unpin()
		return fmt.Errorf("rank %d: send bytes to rank %d tag %d: %w", c.rank, to, tag, err)
	}
	describe := func() string { return fmt.Sprintf("send bytes to rank %d tag %d", to, tag) }
	limit := c.timeoutDuration()
	first := c.firstSlice(limit)
	rc := C.dml_wait(&req, seconds(first), nil)
	var terr error
	if rc == dmlTimeout {
		rc, terr = c.waitMore(first, limit, describe, to, func(d time.Duration) C.int {
			return C.dml_wait(&req, seconds(d), nil)
		})
	}
	if rc == dmlTimeout {
		if C.dml_cancel(&req, 1) == C.MPI_SUCCESS {
			pin.Unpin()
		} else {
			leak(&pin)
		}
		return terr
	}
	pin.Unpin()
	if err := mpiError(rc); err != nil {
		return fmt.Errorf("rank %d: %s: %w", c.rank, describe(), err)
	}
	return nil
}

// RecvBytes implements collectives.Comm.
func (c *Comm) RecvBytes(from, tag int) ([]byte, int, int, error) {
	return c.RecvBytesWithin(from, tag, c.timeoutDuration())
}

// RecvBytesWithin implements collectives.Comm. It probes until a matching
// message is there and only then receives it, so a timeout leaves no
// posted receive behind.
func (c *Comm) RecvBytesWithin(from, tag int, d time.Duration) ([]byte, int, int, error) {
	if err := c.checkPeer(from, true); err != nil {
		return nil, 0, 0, err
	}
	var src, gotTag, count C.int
	first := c.firstSlice(d)
	rc := C.dml_probe(C.int(from), C.int(tag), seconds(first), &src, &gotTag, &count)
	var terr error
	if rc == dmlTimeout {
		describe := func() string {
			if from == collectives.AnySource {
				return fmt.Sprintf("recv bytes from any rank tag %d", tag)
			}
			return fmt.Sprintf("recv bytes from rank %d tag %d", from, tag)
		}
		rc, terr = c.waitMore(first, d, describe, from, func(d time.Duration) C.int {
			return C.dml_probe(C.int(from), C.int(tag), seconds(d), &src, &gotTag, &count)
		})
	}
	if rc == dmlTimeout {
		return nil, 0, 0, terr
	}
	if err := mpiError(rc); err != nil {
		return nil, 0, 0, fmt.Errorf("rank %d: probe from rank %d tag %d: %w", c.rank, from, tag, err)
	}
	buf := make([]byte, int(count))
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(buf) > 0 {
		pin.Pin(&buf[0])
	}
	if err := mpiError(C.dml_recv_bytes(ptr(buf), count, src, gotTag)); err != nil {
		return nil, int(src), int(gotTag), fmt.Errorf("rank %d: recv bytes from rank %d: %w", c.rank, int(src), err)
	}
	return buf, int(src), int(gotTag), nil
}

// Barrier implements collectives.Comm: MPI_Ibarrier and a wait with the
// deadline (a rank that never comes fails it with ErrTimeout).
func (c *Comm) Barrier() error {
	c.EnterOp("barrier")
	var req C.MPI_Request
	if err := mpiError(C.dml_ibarrier(&req)); err != nil {
		return fmt.Errorf("rank %d: barrier: %w", c.rank, err)
	}
	limit := c.timeoutDuration()
	first := c.firstSlice(limit)
	rc := C.dml_wait(&req, seconds(first), nil)
	var terr error
	if rc == dmlTimeout {
		rc, terr = c.waitMore(first, limit, func() string { return "barrier" }, c.groupPeer(), func(d time.Duration) C.int {
			return C.dml_wait(&req, seconds(d), nil)
		})
	}
	if rc == dmlTimeout {
		return terr // a collective request cannot be cancelled; the job aborts
	}
	if err := mpiError(rc); err != nil {
		return fmt.Errorf("rank %d: barrier: %w", c.rank, err)
	}
	return nil
}

// Abort implements collectives.Comm: it prints err and calls MPI_Abort,
// which ends every rank of the job.
func (c *Comm) Abort(code int, err error) {
	fmt.Fprintf(os.Stderr, "dml: rank %d: %v\n", c.rank, err)
	c.ring.Bye(watch.ByeAbort)
	C.dml_abort(C.int(code))
	os.Exit(code) // MPI_Abort does not return; this is for the singleton case.
}

// NativeAllreduceSum is MPI_Allreduce(MPI_IN_PLACE, …, MPI_SUM): the
// baseline the collectives package measures itself against. It blocks in
// MPI; a watchdog reports it when it stalls and ends the rank at the
// deadline (watchdog.go).
func (c *Comm) NativeAllreduceSum(buf []float32) error {
	if len(buf) == 0 {
		return nil
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&buf[0])
	if c.native != nil {
		c.native.enter(c)
	}
	rc := C.dml_allreduce_sum_f32(ptr(buf), C.int(len(buf)))
	if c.native != nil {
		c.native.leave()
	}
	if err := mpiError(rc); err != nil {
		return fmt.Errorf("rank %d: MPI_Allreduce: %w", c.rank, err)
	}
	return nil
}

// NativeForAuto implements collectives.AutoNativeAdvisor: Auto uses
// MPI_Allreduce only when every rank of the job runs on this node (the
// launcher's local size is the world's), where its thresholds were
// measured; across nodes it picks ring or tree. Every rank answers alike:
// either all ranks share one node or none sees the whole world locally.
func (c *Comm) NativeForAuto() bool { return localRanks() >= c.size }
