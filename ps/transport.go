package ps

import (
	"errors"
	"fmt"
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
	cfg = cfg.withDefaults()
	s, err := NewServer(cfg, c.Rank(), c.Size(), initial)
	if err != nil {
		return ServerStats{}, err
	}
	start := cfg.Now()
	now := func() time.Duration { return cfg.Now().Sub(start) }
	for !s.Finished() {
		// Poll with a quarter of the timeout, so that keep-alives and the
		// missing-worker check run on time whatever the transport's default.
		b, src, _, err := c.RecvBytesWithin(collectives.AnySource, RequestTag, cfg.Timeout/4)
		t := now()
		if err != nil && !errors.Is(err, collectives.ErrTimeout) {
			return s.Stats(t), fmt.Errorf("ps server rank %d: receive: %w", s.rank, err)
		}
		if err == nil {
			if err := sendAll(c, s.Step(src, b, t)); err != nil {
				return s.Stats(now()), err
			}
		}
		out, merr := s.Tick(t)
		if merr != nil {
			for _, o := range out { // the server is failing already: ignore send failures
				_ = c.SendBytes(o.Msg, o.To, ReplyTag)
			}
			return s.Stats(now()), merr
		}
		if err := sendAll(c, out); err != nil {
			return s.Stats(now()), err
		}
	}
	return s.Stats(now()), nil
}

// sendAll sends a server's replies in order; a failure is fatal.
func sendAll(c Transport, out []Outgoing) error {
	for _, o := range out {
		if err := c.SendBytes(o.Msg, o.To, ReplyTag); err != nil {
			return fmt.Errorf("ps server rank %d: reply to rank %d: %w", c.Rank(), o.To, err)
		}
	}
	return nil
}
