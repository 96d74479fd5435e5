// Package collectives holds the Comm seam (how ranks exchange buffers) and the
// collective algorithms written once against its point-to-point part
// (PointToPoint): ring AllReduce, recursive doubling AllReduce for small
// messages, broadcast and all-gather.
//
// Transports live in their own packages: collectives/mpi (MPI over gompi and
// a small cgo shim) and collectives/local (goroutines in one process).
package collectives

import (
	"errors"
	"fmt"
	"time"
)

// DefaultTimeout is how long a wait for a peer lasts when nothing says
// otherwise: the one default of dml's timeouts (the transports', the
// parameter server's, the trainer's and the command line's --timeout).
const DefaultTimeout = 5 * time.Minute

// Comm is a communicator: a fixed group of Size() ranks that exchange tagged
// messages point to point. It is the full seam every transport implements
// (collectives/mpi, collectives/local); its consumers each declare the part
// they use: the algorithms in this package need only PointToPoint, the
// parameter server only byte messages (ps.Transport).
//
// Buffers: the caller owns every buffer. A buffer passed to Send, Recv or
// their non-blocking forms must not be touched by the caller until the call
// returns (blocking forms) or its Request has completed (Isend/Irecv). Messages
// between one pair of ranks with one tag arrive in the order they were sent.
//
// Concurrency: a Comm is used by one goroutine at a time per rank, unless an
// implementation says otherwise.
type Comm interface {
	PointToPoint

	// SendBytes sends a byte message (blocking until buf may be reused).
	SendBytes(buf []byte, to, tag int) error
	// RecvBytes receives one byte message from rank `from` (or AnySource) with
	// tag `tag` (or AnyTag), returning the message and where it came from.
	// It waits up to the transport's timeout, then fails with ErrTimeout.
	RecvBytes(from, tag int) (msg []byte, src, gotTag int, err error)
	// RecvBytesWithin is RecvBytes with its own deadline d (a server loop
	// that must also notice silent peers polls with a short one). A receive
	// that times out leaves nothing behind: the next call can still get
	// the message it was waiting for.
	RecvBytesWithin(from, tag int, d time.Duration) (msg []byte, src, gotTag int, err error)

	// Barrier returns once every rank has entered it.
	Barrier() error
	// Abort stops every rank of the job with the given exit code, after
	// reporting err. Over MPI it does not return; the in-process transport
	// may return in tests, after which every other rank's calls fail.
	Abort(code int, err error)
}

// PointToPoint is what the collective algorithms in this package need from a
// transport (CONVENTIONS 17): rank, size and non-blocking float32 sends and
// receives. Buffer ownership and ordering are as for Comm. Every Comm is a
// PointToPoint.
type PointToPoint interface {
	// Rank is this rank's index in [0, Size()).
	Rank() int
	// Size is the number of ranks.
	Size() int

	// Isend starts sending buf to rank `to` with tag `tag`.
	Isend(buf []float32, to, tag int) (Request, error)
	// Irecv starts receiving exactly len(buf) float32s from rank `from`.
	// A message of a different length completes the request with an error
	// wrapping ErrLengthMismatch.
	Irecv(buf []float32, from, tag int) (Request, error)
}

// Request is an outstanding non-blocking operation.
type Request interface {
	// Wait blocks until the operation completes.
	Wait() error
}

// Tester is a Request that can say, without waiting, whether it has
// completed (the MPI transport's sends). A request that is not one is
// taken as done only once waited for.
type Tester interface {
	Done() bool
}

// AnySource and AnyTag are wildcards for RecvBytes.
const (
	AnySource = -1
	AnyTag    = -1
)

// Sentinel errors callers may test with errors.Is.
var (
	// ErrLengthMismatch: ranks passed buffers of different lengths to one
	// collective, or a message was not the size its receiver expected.
	ErrLengthMismatch = errors.New("buffer length mismatch between ranks")
	// ErrBadRank: a peer rank outside [0, Size()).
	ErrBadRank = errors.New("rank out of range")
	// ErrTimeout: a peer did not answer in time.
	ErrTimeout = errors.New("timed out waiting for peer")
)

// Send is the blocking form of Isend.
func Send(c PointToPoint, buf []float32, to, tag int) error {
	r, err := c.Isend(buf, to, tag)
	if err != nil {
		return err
	}
	return r.Wait()
}

// Recv is the blocking form of Irecv.
func Recv(c PointToPoint, buf []float32, from, tag int) error {
	r, err := c.Irecv(buf, from, tag)
	if err != nil {
		return err
	}
	return r.Wait()
}

// SendRecv sends send to rank `to` while receiving recv from rank `from`,
// both with tag `tag`, without deadlocking when every rank does the same.
func SendRecv(c PointToPoint, send []float32, to int, recv []float32, from, tag int) error {
	rr, err := c.Irecv(recv, from, tag)
	if err != nil {
		return fmt.Errorf("recv from rank %d: %w", from, err)
	}
	sr, err := c.Isend(send, to, tag)
	if err != nil {
		return fmt.Errorf("send to rank %d: %w", to, err)
	}
	if err := sr.Wait(); err != nil {
		rr.Wait()
		return fmt.Errorf("send to rank %d: %w", to, err)
	}
	if err := rr.Wait(); err != nil {
		return fmt.Errorf("recv from rank %d: %w", from, err)
	}
	return nil
}

// OpMarker is implemented by transports that run a stall inspector
// (collectives/mpi): a wait that stalls is reported with the operation its
// rank last entered and the training step last set. Callers mark through
// EnterOp and SetStep below, which do nothing on other transports.
type OpMarker interface {
	// EnterOp records that this rank enters the operation name (a
	// constant such as "allreduce", "broadcast", "ps push").
	EnterOp(name string)
	// SetStep records the training step this rank is in.
	SetStep(step int)
}

// EnterOp tells c's stall inspector, if it has one, that this rank enters
// the operation name. Collectives in this package call it; so should any
// algorithm (a decentralized strategy's neighbour exchange) that waits on
// peers under its own name. Decorators that wrap a Comm (trace.Comm) are
// seen through by their Unwrap method.
func EnterOp(c any, name string) {
	if m := opMarker(c); m != nil {
		m.EnterOp(name)
	}
}

// SetStep tells c's stall inspector, if it has one, the training step this
// rank is in: the training loop calls it once per step.
func SetStep(c any, step int) {
	if m := opMarker(c); m != nil {
		m.SetStep(step)
	}
}

// opMarker finds the OpMarker in c or what c wraps, or nil.
func opMarker(c any) OpMarker {
	m, _ := unwrapTo[OpMarker](c)
	return m
}

// unwrapTo finds an implementation of T in c or in what c wraps (through
// decorators' Unwrap methods, as trace.Comm's).
func unwrapTo[T any](c any) (T, bool) {
	for c != nil {
		if v, ok := c.(T); ok {
			return v, true
		}
		u, ok := c.(interface{ Unwrap() Comm })
		if !ok {
			break
		}
		c = u.Unwrap()
	}
	var zero T
	return zero, false
}

// AutoNativeAdvisor is implemented by transports whose native AllReduce
// Auto's thresholds (auto.go) may not fit: NativeForAuto false makes Auto
// choose between ring and tree only, as on a transport without one. The
// MPI transport says false when the job spans nodes: its thresholds were
// measured over shared memory, and over TCP between two hosts
// MPI_Allreduce took 12.2 ms per step against the ring's 1.7 ms on the MLP's
// 134 KiB gradient (bench sweep on the test cluster, 1 Gbit/s links).
// Every rank must answer alike.
type AutoNativeAdvisor interface {
	NativeForAuto() bool
}

// nativeForAuto asks c, or what it wraps, whether Auto may use its native
// AllReduce (true when it does not say).
func nativeForAuto(c any) bool {
	if a, ok := unwrapTo[AutoNativeAdvisor](c); ok {
		return a.NativeForAuto()
	}
	return true
}
