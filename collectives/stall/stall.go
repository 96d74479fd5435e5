// Package stall is the stall inspector: it decides, for a rank that waits
// for a peer inside a collective or a parameter-server request, when to
// warn that the operation has stalled and when to give up, and words the
// report (which operation, which step, which peer has not joined).
//
// It does no I/O and reads no clock (CONVENTIONS 2, 15): a transport's
// wait loop passes in how long it has waited and prints or returns what
// the inspector says. collectives/mpi runs it in every wait (Comm.Stall);
// the parameter server's controller has its own view of who is missing
// (ps.Server) and uses the same Policy.
//
// How a rank knows who is missing. Horovod's coordinator collects, each
// cycle, the tensors every rank has submitted and names the ranks that
// have not submitted one. dml has no coordinator: a collective is a fixed
// schedule of point-to-point steps, so the waiting side knows exactly
// which peer it is waiting on (the ring predecessor, the recursive-doubling
// partner, the broadcast parent). Each stalled rank reports that peer with
// the operation, its sequence number and the training step. When one rank
// stops, the ranks around it wait on it, their own successors wait on them,
// and so on: the rank that is waited on and reports no stall of its own is
// the one that has not joined — every rank's line is printed under mpirun,
// so the chain is in front of the user. This is honest (it names only what
// a rank can see) and costs nothing until a wait is already long.
package stall

import (
	"fmt"
	"sync"
	"time"
)

// Policy says when a wait counts as stalled. The zero Policy never warns
// and never aborts.
type Policy struct {
	// Warn: a wait this long prints a report, and again every Warn after
	// (0: never).
	Warn time.Duration
	// Abort: a wait this long fails with the report (0: only the
	// transport's own timeout ends it).
	Abort time.Duration
}

// DefaultWarn is the --stall-warn default, Horovod's 60 s.
const DefaultWarn = 60 * time.Second

// Action is what a wait loop does at a check.
type Action int

const (
	// Continue: keep waiting.
	Continue Action = iota
	// Warn: print the report, keep waiting.
	Warn
	// Abort: stop waiting and fail with the report.
	Abort
)

// String names the action.
func (a Action) String() string {
	switch a {
	case Warn:
		return "warn"
	case Abort:
		return "abort"
	}
	return "continue"
}

// Check is the inspector's decision for a wait that has lasted elapsed
// and has been warned about `warned` times: what to do now, and how long
// to wait before the next check (0: no further check is needed; wait up
// to the transport's own deadline). A wait loop calls it first after
// FirstCheck, then after each returned interval.
func (p Policy) Check(elapsed time.Duration, warned int) (Action, time.Duration) {
	if p.Abort > 0 && elapsed >= p.Abort {
		return Abort, 0
	}
	act := Continue
	if p.Warn > 0 && elapsed >= time.Duration(warned+1)*p.Warn {
		act = Warn
		warned++
	}
	return act, p.next(elapsed, warned)
}

// FirstCheck is how long a wait runs before its first check (0: never):
// the earlier of the first warning and the abort. A wait that ends sooner
// never consults the inspector, so an operation that does not stall pays
// nothing.
func (p Policy) FirstCheck() time.Duration { return p.next(0, 0) }

// next is the time until the next warning or the abort, whichever comes
// first, for a wait at elapsed already warned `warned` times.
func (p Policy) next(elapsed time.Duration, warned int) time.Duration {
	var d time.Duration
	if p.Warn > 0 {
		d = time.Duration(warned+1)*p.Warn - elapsed
	}
	if p.Abort > 0 {
		if a := p.Abort - elapsed; d <= 0 || a < d {
			d = a
		}
	}
	return max(d, 0)
}

// Op is what a rank is doing: the operation it last entered (its name and
// how many operations this rank has entered, which is the same on every
// rank that runs the same schedule) and the training step it last set
// (-1: not known).
type Op struct {
	Name string
	Seq  uint64
	Step int
}

// String is "allreduce #57 at step 12", without the step when unknown, or
// "set-up (no collective yet)".
func (o Op) String() string {
	s := "set-up (no collective yet)"
	if o.Name != "" {
		s = fmt.Sprintf("%s #%d", o.Name, o.Seq)
	}
	if o.Step >= 0 {
		s += fmt.Sprintf(" at step %d", o.Step)
	}
	return s
}

// Tracker holds a rank's current Op. Callers mark operations as they enter
// them (EnterOp) and the training loop marks steps (SetStep); the
// transport's wait loop reads Current when a wait stalls. It is safe for
// concurrent use (the trainer's communication goroutine and its main loop
// both mark), and marking costs an uncontended lock.
type Tracker struct {
	mu sync.Mutex
	op Op
}

// NewTracker returns a Tracker with no operation and an unknown step.
func NewTracker() *Tracker { return &Tracker{op: Op{Step: -1}} }

// EnterOp records that the rank enters the operation name.
func (t *Tracker) EnterOp(name string) {
	t.mu.Lock()
	t.op.Name = name
	t.op.Seq++
	t.mu.Unlock()
}

// SetStep records the training step the rank is in.
func (t *Tracker) SetStep(step int) {
	t.mu.Lock()
	t.op.Step = step
	t.mu.Unlock()
}

// Current is the operation last entered and the step last set.
func (t *Tracker) Current() Op {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.op
}

// Report words a stalled wait: rank `rank`, in op, has waited elapsed for
// `what` (e.g. "recv from rank 3 tag 1048577") on peer `peer` (-1: the
// whole group, as in a barrier). The peer is the rank that has not done
// its part yet — it has not joined the operation, or is itself waiting on
// another (see the package comment).
func Report(rank int, op Op, what string, peer int, elapsed time.Duration) string {
	who := "some rank has not joined"
	if peer >= 0 {
		who = fmt.Sprintf("waiting on rank %d", peer)
	}
	return fmt.Sprintf("stall: rank %d has waited %v in %s, %s: %s", rank, elapsed.Round(time.Millisecond), op, who, what)
}
