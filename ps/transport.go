package ps

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/dml-project/dml/collectives"
)

// Transport is what the parameter server and its workers need from a
// communicator (CONVENTIONS 17): tagged byte messages between ranks. Every
// collectives.Comm is one. Received messages belong to the receiver.
type Transport interface {
	// Rank is this rank's index in [0, Size()).
	Rank() int
	// Size is the number of ranks.
	Size() int
	// SendBytes sends a byte message (blocking until buf may be reused).
	SendBytes(buf []byte, to, tag int) error
	// RecvBytesWithin receives one byte message from rank `from` (or
	// collectives.AnySource) with tag `tag`, waiting at most d; after d it
	// fails with an error wrapping collectives.ErrTimeout and leaves
	// nothing behind.
	RecvBytesWithin(from, tag int, d time.Duration) (msg []byte, src, gotTag int, err error)
}

var _ Transport = collectives.Comm(nil)

// floatTransport is what a Transport needs, besides byte messages, to move
// float32 values apart from their headers (see flagValuesFollow): the
// sender's slice goes to the receiver's without staging copies (the MPI
// transport pins both in place). Every collectives.Comm is one.
type floatTransport interface {
	Isend(buf []float32, to, tag int) (collectives.Request, error)
	Irecv(buf []float32, from, tag int) (collectives.Request, error)
}

var _ floatTransport = collectives.Comm(nil)

// sendFloats sends vs to rank `to` on PayloadTag and waits until vs may be
// reused.
func sendFloats(ft floatTransport, vs []float32, to int) error {
	r, err := ft.Isend(vs, to, PayloadTag)
	if err != nil {
		return err
	}
	return r.Wait()
}

// recvFloats receives exactly len(dst) float32s from rank `from` on
// PayloadTag into dst.
func recvFloats(ft floatTransport, dst []float32, from int) error {
	r, err := ft.Irecv(dst, from, PayloadTag)
	if err != nil {
		return err
	}
	return r.Wait()
}

// RunServer serves this rank's key range until every worker has called Done.
// initial is the full model (length P, the same on every rank); the server
// copies its own range out of it and never writes to it. The final weights
// of the range come back in ServerStats.Weights.
//
// RunServer is the I/O driver of a Server: it receives requests, hands them
// to Server.Step with the time from cfg.Now, sends the replies, and calls
// Server.Tick after every receive (and every Timeout/4 when nothing
// arrives). Requests that break the protocol are answered with an error
// naming the worker rank; the server goes on serving.
//
// RunServer returns an error when the transport fails, or a *MissingError
// (wrapping ErrWorkerMissing) when workers went silent for cfg.Timeout while
// others waited on them; the caller should then Abort the job. Before
// returning that error it tells every unfinished worker.
//
// The server uses c from the calling goroutine only.
func RunServer(c Transport, cfg Config, initial []float32) (ServerStats, error) {
	return RunServerKeeping(c, cfg, initial, nil)
}

// RunServerKeeping is RunServer keeping, in k (nil: a keeper of its own),
// what the server's last word needs (replica.go): Keeper.Held may be
// called from another goroutine while it serves. With
// cfg.ReplicateEvery > 0 and more than one server it replicates its range
// to the previous server and keeps the next server's, which takes a
// transport that moves float32 values (every collectives.Comm).
func RunServerKeeping(c Transport, cfg Config, initial []float32, k *Keeper) (ServerStats, error) {
	cfg = cfg.withDefaults()
	s, err := NewServer(cfg, c.Rank(), c.Size(), initial)
	if err != nil {
		return ServerStats{}, err
	}
	start := cfg.Now()
	now := func() time.Duration { return cfg.Now().Sub(start) }
	ft, _ := c.(floatTransport)
	if k == nil {
		k = &Keeper{}
	}
	if cfg.ReplicateEvery > 0 && cfg.Servers > 1 && ft == nil {
		return ServerStats{}, fmt.Errorf("ps server rank %d: replication (ReplicateEvery %d) needs a transport that moves float32 values: %w", s.rank, cfg.ReplicateEvery, ErrConfig)
	}
	k.start(s, initial)
	collectives.EnterOp(c, "ps serve")
	poll := cfg.Timeout / 4
	if cfg.StallWarn > 0 {
		poll = min(poll, cfg.StallWarn/4) // stall warnings on time too
	}
	for !s.Finished() {
		// Poll with a quarter of the timeout (or of the stall warning time),
		// so that keep-alives, stall warnings and the missing-worker check
		// run on time whatever the transport's default.
		b, src, _, err := c.RecvBytesWithin(collectives.AnySource, RequestTag, poll)
		t := now()
		if err != nil && !errors.Is(err, collectives.ErrTimeout) {
			return s.Stats(t), fmt.Errorf("ps server rank %d: receive: %w", s.rank, err)
		}
		if err == nil && src < cfg.Servers && src != s.rank && k.every > 0 {
			// A replica from the next server (replica.go).
			if err := k.receive(ft, src, b); err != nil {
				return s.Stats(now()), err
			}
		} else if err == nil {
			// Values that follow apart go straight into the server's buffer.
			var payload []float32
			if ft != nil {
				if payload = s.PayloadFor(src, b); payload != nil {
					if err := recvFloats(ft, payload, src); err != nil {
						return s.Stats(now()), fmt.Errorf("ps server rank %d: values from rank %d: %w", s.rank, src, err)
					}
				}
			}
			k.mu.Lock() // Keeper.Held reads the weights between requests
			out := s.StepWith(src, b, payload, t)
			k.mu.Unlock()
			if err := sendAll(c, out); err != nil {
				return s.Stats(now()), err
			}
			// The replica after the replies (its copy is not in their
			// way): the workers' next step gives it time to arrive, and
			// Held pairs rounds whether it did or not.
			if err := k.replicate(c, ft); err != nil {
				return s.Stats(now()), err
			}
		}
		k.mu.Lock()
		out, merr := s.Tick(t)
		k.mu.Unlock()
		for _, w := range s.Warnings() {
			if cfg.Warn != nil {
				cfg.Warn(w)
			} else {
				fmt.Fprintf(os.Stderr, "dml: %s\n", w)
			}
		}
		if merr != nil {
			for _, o := range out { // the server is failing already: ignore send failures
				_ = c.SendBytes(o.Msg, o.To, ReplyTag)
			}
			return s.Stats(now()), merr
		}
		if err := sendAll(c, out); err != nil {
			return s.Stats(now()), err
		}
		if err := k.replicate(c, ft); err != nil { // a round Tick completed
			return s.Stats(now()), err
		}
	}
	if err := k.finish(c, ft, cfg.Timeout); err != nil {
		return s.Stats(now()), err
	}
	return s.Stats(now()), nil
}

// sendAll sends a server's replies in order; a failure is fatal.
func sendAll(c Transport, out []Outgoing) error {
	for _, o := range out {
		if err := c.SendBytes(o.Msg, o.To, ReplyTag); err != nil {
			return fmt.Errorf("ps server rank %d: reply to rank %d: %w", c.Rank(), o.To, err)
		}
		if o.Vals != nil {
			ft, ok := c.(floatTransport)
			if !ok { // unreachable: only a worker on a float transport asks for values apart
				return fmt.Errorf("ps server rank %d: reply to rank %d: values apart on a bytes-only transport", c.Rank(), o.To)
			}
			if err := sendFloats(ft, o.Vals, o.To); err != nil {
				return fmt.Errorf("ps server rank %d: values to rank %d: %w", c.Rank(), o.To, err)
			}
		}
	}
	return nil
}
