package ps

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/kernels/optim"
)

// rendezvous models MPI's rendezvous protocol for large messages on
// ReplicaTag: an Isend completes only once the receiver has posted the
// matching Irecv.
type rendezvous struct {
	mu     sync.Mutex
	posted map[[2]int]chan struct{} // (from, to) -> one token per posted Irecv
}

func (r *rendezvous) ch(from, to int) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := [2]int{from, to}
	if r.posted[k] == nil {
		r.posted[k] = make(chan struct{}, 1<<16)
	}
	return r.posted[k]
}

type rvComm struct {
	*local.Comm
	rv *rendezvous
}

type rvSend struct {
	ch   <-chan struct{}
	what string
	got  bool // the matching receive was posted
}

// Done is MPI_Test: whether the receive has been posted, without waiting.
func (s *rvSend) Done() bool {
	if s.got {
		return true
	}
	select {
	case <-s.ch:
		s.got = true
	default:
	}
	return s.got
}

func (s *rvSend) Wait() error {
	if s.got {
		return nil
	}
	select {
	case <-s.ch:
		s.got = true
		return nil
	case <-time.After(3 * time.Second):
		pc, _, line, _ := runtime.Caller(1)
		return fmt.Errorf("%s: no matching receive posted in 3 s (rendezvous deadlock), waiting in %s:%d", s.what, runtime.FuncForPC(pc).Name(), line)
	}
}

func (c rvComm) Isend(buf []float32, to, tag int) (collectives.Request, error) {
	r, err := c.Comm.Isend(buf, to, tag)
	if err != nil || tag != ReplicaTag {
		return r, err
	}
	return &rvSend{ch: c.rv.ch(c.Rank(), to), what: fmt.Sprintf("rank %d: replica Isend to %d", c.Rank(), to)}, nil
}

func (c rvComm) Irecv(buf []float32, from, tag int) (collectives.Request, error) {
	if tag == ReplicaTag {
		c.rv.ch(from, c.Rank()) <- struct{}{}
	}
	return c.Comm.Irecv(buf, from, tag)
}

func rendezvousJob(t *testing.T, c Consistency, workers, pushes int) {
	t.Helper()
	cfg := Config{Servers: 2, Consistency: c, Staleness: 2, Optimizer: optim.Momentum, LR: 0.01, Momentum: 0.9, ReplicateEvery: 1, Timeout: 10 * time.Second}.withDefaults()
	p := 64
	initial := make([]float32, p)
	world := local.NewWorld(cfg.Servers + workers)
	world.SetTimeout(10 * time.Second)
	rv := &rendezvous{posted: map[[2]int]chan struct{}{}}
	errs := world.Run(func(c *local.Comm) error {
		if c.Rank() < cfg.Servers {
			_, err := RunServerKeeping(rvComm{c, rv}, cfg, initial, &Keeper{})
			return err
		}
		w, err := NewWorker(c, cfg, p)
		if err != nil {
			return err
		}
		grad := make([]float32, p)
		for range pushes {
			if err := w.Push(grad); err != nil {
				return err
			}
		}
		return w.Done()
	})
	for r, err := range errs[:cfg.Servers] {
		if err != nil {
			t.Errorf("server rank %d: %v", r, err)
		}
	}
}

// TestReplicaRendezvousAsync: under ASP (a replication per update), with
// sends that complete only once the receiver has posted its receive (MPI's
// rendezvous for large messages), the two servers never wait on each
// other (a reviewer's reproduction of a deadlock: replicate waited on its
// earlier send).
func TestReplicaRendezvousAsync(t *testing.T) {
	rendezvousDelay = false
	rendezvousJob(t, ASP, 2, 300)
}

// TestReplicaRendezvousFinish: under BSP, when the last round's header
// arrives after the workers' Done, finish takes the other server's
// replicas before it waits on its own sends (it waited first, and both
// servers stuck).
func TestReplicaRendezvousFinish(t *testing.T) {
	rendezvousDelay = true
	defer func() { rendezvousDelay = false }()
	rendezvousJob(t, BSP, 2, 5)
}

// SendBytes delays a server's replica header a little (a slow link or a
// descheduled sender): nothing MPI rules out.
func (c rvComm) SendBytes(buf []byte, to, tag int) error {
	if rendezvousDelay && tag == RequestTag && c.Rank() < 2 && len(buf) > 0 && msgKind(buf[0]) == kindReplica {
		time.Sleep(2 * time.Millisecond)
	}
	return c.Comm.SendBytes(buf, to, tag)
}

var rendezvousDelay = false
