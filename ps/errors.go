package ps

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors callers may test with errors.Is.
var (
	// ErrConfig: an invalid Config, or ranks that disagree on it.
	ErrConfig = errors.New("ps: invalid configuration")
	// ErrRejected: a server rejected a request (malformed, keys outside the
	// model, wrong lengths, non-finite values, protocol violation).
	ErrRejected = errors.New("ps: request rejected by server")
	// ErrWorkerMissing: a worker stopped talking to a server while others
	// waited on it, or every worker went silent.
	ErrWorkerMissing = errors.New("ps: worker missing")
	// ErrBadMessage: bytes that do not decode as a ps message.
	ErrBadMessage = errors.New("ps: malformed message")
	// ErrDone: the Worker was used after Done or after a failed call.
	ErrDone = errors.New("ps: worker finished")
	// ErrArgument: a Worker method was called with bad arguments (checked
	// before anything is sent).
	ErrArgument = errors.New("ps: bad argument")
)

// ServerError is the error a worker gets when a server answers a request
// with an error reply. It wraps ErrRejected, or ErrWorkerMissing when the
// server gave up on a missing worker.
type ServerError struct {
	Server int    // the server's rank
	Msg    string // the server's explanation, naming the worker rank
	kind   error
}

// Error formats the server rank and its explanation.
func (e *ServerError) Error() string { return fmt.Sprintf("ps server rank %d: %s", e.Server, e.Msg) }

// Unwrap returns ErrRejected or ErrWorkerMissing.
func (e *ServerError) Unwrap() error { return e.kind }

// MissingWorker describes one worker a server gave up on.
type MissingWorker struct {
	Rank   int           // the worker's rank
	Clock  int           // pushes the server had received from it
	Silent time.Duration // time since the server last heard from it
	Hello  bool          // whether it ever reached NewWorker
}

// MissingError is returned by RunServer when workers went missing. It wraps
// ErrWorkerMissing.
type MissingError struct {
	Server  int             // the reporting server's rank
	Timeout time.Duration   // Config.Timeout
	Missing []MissingWorker // the silent workers
	Held    []int           // ranks of workers that were waiting on them
	Active  []int           // nobody held: ranks of workers that went on without them
}

// Error lists the missing workers and who was waiting on them.
func (e *MissingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ps server rank %d: %d worker(s) silent for more than %v:", e.Server, len(e.Missing), e.Timeout)
	for i, m := range e.Missing {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " rank %d (clock %d, silent %v", m.Rank, m.Clock, m.Silent.Round(time.Millisecond))
		if !m.Hello {
			b.WriteString(", never connected")
		}
		b.WriteString(")")
	}
	if len(e.Held) > 0 {
		fmt.Fprintf(&b, "; ranks %v were waiting on them", e.Held)
	}
	if len(e.Active) > 0 {
		fmt.Fprintf(&b, "; nobody waits on them, and ranks %v went on without them", e.Active)
	}
	return b.String()
}

// Unwrap returns ErrWorkerMissing.
func (e *MissingError) Unwrap() error { return ErrWorkerMissing }
