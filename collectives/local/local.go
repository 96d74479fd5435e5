// Package local is an in-process collectives.Comm: N ranks are N goroutines in
// one process, exchanging messages through per-rank mailboxes. It is the
// transport for unit tests (deterministic message order per sender and tag,
// race-detector friendly) and for single-process runs.
//
// Sends are buffered: Isend copies the buffer and completes at once, as an MPI
// eager send does. Receives match on (source, tag) in arrival order.
package local

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/internal/crash"
)

// DefaultTimeout bounds how long a receive or barrier waits for a peer.
const DefaultTimeout = collectives.DefaultTimeout

type message struct {
	src, tag int
	f32      []float32
	bytes    []byte
	isBytes  bool
}

type mailbox struct {
	mu      sync.Mutex
	pending []message
	changed chan struct{} // closed and replaced on every delivery
}

// World is a group of in-process ranks.
type World struct {
	size    int
	boxes   []*mailbox
	timeout time.Duration

	barrierMu    sync.Mutex
	barrierCond  *sync.Cond
	barrierCount int
	barrierGen   int

	abortOnce sync.Once
	aborted   chan struct{}
	abortErr  error
}

// NewWorld returns a world of size ranks with the default timeout.
func NewWorld(size int) *World {
	if size < 1 {
		panic(fmt.Sprintf("local.NewWorld: size %d < 1", size))
	}
	w := &World{size: size, timeout: DefaultTimeout, aborted: make(chan struct{})}
	w.boxes = make([]*mailbox, size)
	for i := range w.boxes {
		w.boxes[i] = &mailbox{changed: make(chan struct{})}
	}
	w.barrierCond = sync.NewCond(&w.barrierMu)
	return w
}

// SetTimeout changes how long a receive or barrier waits (tests use short ones).
func (w *World) SetTimeout(d time.Duration) { w.timeout = d }

// Comm returns rank r's communicator.
func (w *World) Comm(r int) *Comm {
	if r < 0 || r >= w.size {
		panic(fmt.Sprintf("local.World.Comm: rank %d not in [0,%d)", r, w.size))
	}
	return &Comm{w: w, rank: r}
}

// Run starts fn on every rank in its own goroutine and returns the ranks'
// errors (nil entries for ranks that succeeded) once all have returned. A
// rank that panics aborts the world (the others' waits fail at once, as
// MPI_Abort would end them) and the panic is raised again on Run's caller,
// with the rank's stack (internal/crash).
func (w *World) Run(fn func(c *Comm) error) []error {
	errs := make([]error, w.size)
	panics := make([]*crash.Panic, w.size)
	var wg sync.WaitGroup
	for r := 0; r < w.size; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			defer func() {
				if panics[r] != nil {
					w.abortOnce.Do(func() {
						w.abortErr = fmt.Errorf("rank %d panicked: %v", r, panics[r].Value)
						close(w.aborted)
					})
					w.barrierMu.Lock()
					w.barrierCond.Broadcast()
					w.barrierMu.Unlock()
				}
			}()
			defer crash.Capture(&panics[r])
			errs[r] = fn(w.Comm(r))
		}(r)
	}
	wg.Wait()
	crash.Repanic(crash.First(panics))
	return errs
}

// Aborted reports the error passed to Abort, or nil.
func (w *World) Aborted() error {
	select {
	case <-w.aborted:
		return w.abortErr
	default:
		return nil
	}
}

// Comm is one rank's view of a World.
type Comm struct {
	w    *World
	rank int
}

var _ collectives.Comm = (*Comm)(nil)

// Rank implements collectives.Comm.
func (c *Comm) Rank() int { return c.rank }

// Size implements collectives.Comm.
func (c *Comm) Size() int { return c.w.size }

func (c *Comm) checkPeer(p int, wildcard bool) error {
	if wildcard && p == collectives.AnySource {
		return nil
	}
	if p < 0 || p >= c.w.size {
		return fmt.Errorf("rank %d: peer %d not in [0,%d): %w", c.rank, p, c.w.size, collectives.ErrBadRank)
	}
	return nil
}

func (c *Comm) deliver(to int, m message) {
	b := c.w.boxes[to]
	b.mu.Lock()
	b.pending = append(b.pending, m)
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// take removes and returns the first pending message matching (src, tag),
// waiting up to the world's timeout.
func (c *Comm) take(src, tag int, what string, timeout time.Duration) (message, error) {
	b := c.w.boxes[c.rank]
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		b.mu.Lock()
		for i, m := range b.pending {
			if (src == collectives.AnySource || m.src == src) && (tag == collectives.AnyTag || m.tag == tag) {
				b.pending = append(b.pending[:i], b.pending[i+1:]...)
				b.mu.Unlock()
				return m, nil
			}
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-c.w.aborted:
			return message{}, fmt.Errorf("rank %d: %s: job aborted: %w", c.rank, what, c.w.abortErr)
		case <-timer.C:
			return message{}, fmt.Errorf("rank %d: %s from rank %d tag %d: no message after %v: %w",
				c.rank, what, src, tag, timeout, collectives.ErrTimeout)
		}
	}
}

type doneRequest struct{ err error }

// Done implements collectives.Tester: a local send is done when made.
func (doneRequest) Done() bool { return true }

func (r doneRequest) Wait() error { return r.err }

type recvRequest struct {
	c    *Comm
	buf  []float32
	from int
	tag  int
	once sync.Once
	err  error
}

func (r *recvRequest) Wait() error {
	r.once.Do(func() {
		m, err := r.c.take(r.from, r.tag, "recv", r.c.w.timeout)
		if err != nil {
			r.err = err
			return
		}
		if m.isBytes || len(m.f32) != len(r.buf) {
			n := len(m.f32)
			if m.isBytes {
				n = len(m.bytes)
			}
			r.err = fmt.Errorf("rank %d: recv from rank %d tag %d: got %d elements, want %d: %w",
				r.c.rank, r.from, r.tag, n, len(r.buf), collectives.ErrLengthMismatch)
			return
		}
		copy(r.buf, m.f32)
	})
	return r.err
}

// Isend implements collectives.Comm; the data is copied, so the request is
// complete when Isend returns.
func (c *Comm) Isend(buf []float32, to, tag int) (collectives.Request, error) {
	if err := c.checkPeer(to, false); err != nil {
		return nil, err
	}
	c.deliver(to, message{src: c.rank, tag: tag, f32: append([]float32(nil), buf...)})
	return doneRequest{}, nil
}

// Irecv implements collectives.Comm. Matching happens in Wait.
func (c *Comm) Irecv(buf []float32, from, tag int) (collectives.Request, error) {
	if err := c.checkPeer(from, false); err != nil {
		return nil, err
	}
	return &recvRequest{c: c, buf: buf, from: from, tag: tag}, nil
}

// SendBytes implements collectives.Comm.
func (c *Comm) SendBytes(buf []byte, to, tag int) error {
	if err := c.checkPeer(to, false); err != nil {
		return err
	}
	c.deliver(to, message{src: c.rank, tag: tag, bytes: append([]byte(nil), buf...), isBytes: true})
	return nil
}

// RecvBytes implements collectives.Comm.
func (c *Comm) RecvBytes(from, tag int) ([]byte, int, int, error) {
	return c.RecvBytesWithin(from, tag, c.w.timeout)
}

// RecvBytesWithin implements collectives.Comm.
func (c *Comm) RecvBytesWithin(from, tag int, d time.Duration) ([]byte, int, int, error) {
	if err := c.checkPeer(from, true); err != nil {
		return nil, 0, 0, err
	}
	m, err := c.take(from, tag, "recv bytes", d)
	if err != nil {
		return nil, 0, 0, err
	}
	if !m.isBytes {
		return nil, m.src, m.tag, fmt.Errorf("rank %d: recv bytes from rank %d tag %d: got a float32 message: %w",
			c.rank, m.src, m.tag, collectives.ErrLengthMismatch)
	}
	return m.bytes, m.src, m.tag, nil
}

// Barrier implements collectives.Comm.
func (c *Comm) Barrier() error {
	w := c.w
	w.barrierMu.Lock()
	defer w.barrierMu.Unlock()
	gen := w.barrierGen
	w.barrierCount++
	if w.barrierCount == w.size {
		w.barrierCount = 0
		w.barrierGen++
		w.barrierCond.Broadcast()
		return nil
	}
	deadline := time.Now().Add(w.timeout)
	timer := time.AfterFunc(w.timeout, func() {
		w.barrierMu.Lock()
		w.barrierCond.Broadcast()
		w.barrierMu.Unlock()
	})
	defer timer.Stop()
	for gen == w.barrierGen {
		if err := w.Aborted(); err != nil {
			return fmt.Errorf("rank %d: barrier: job aborted: %w", c.rank, err)
		}
		if !time.Now().Before(deadline) {
			w.barrierCount--
			return fmt.Errorf("rank %d: barrier: %d of %d ranks arrived after %v: %w",
				c.rank, w.barrierCount+1, w.size, w.timeout, collectives.ErrTimeout)
		}
		w.barrierCond.Wait()
	}
	return nil
}

// Abort implements collectives.Comm. It records err and wakes every waiting
// rank, whose pending and later calls then fail. When AbortExits is true (the
// default, as MPI_Abort) it also exits the process with code; tests set it to
// false, and then Abort returns.
func (c *Comm) Abort(code int, err error) {
	w := c.w
	w.abortOnce.Do(func() {
		w.abortErr = fmt.Errorf("rank %d aborted (code %d): %w", c.rank, code, err)
		close(w.aborted)
	})
	w.barrierMu.Lock()
	w.barrierCond.Broadcast()
	w.barrierMu.Unlock()
	if AbortExits {
		fmt.Fprintf(os.Stderr, "dml: %v\n", w.abortErr)
		os.Exit(code)
	}
}

// AbortExits makes Abort exit the process (as MPI_Abort does). Tests set it
// to false so that Abort only fails the other ranks' pending calls.
var AbortExits = true
