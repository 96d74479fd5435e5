package trace

import (
	"time"

	"github.com/dml-project/dml/collectives"
)

// Comm returns c with a span (category Collective) around every call that
// communicates; Rank and Size are passed through without one. Arguments and
// results are passed through unchanged, errors included; a span whose call
// failed carries the error.
//
// Spans and their arguments (peer is the other rank, bytes the payload):
//   - "Isend", "Irecv": posting the request (peer, tag, bytes). Waiting for
//     it is a span of its own, "Isend.Wait" / "Irecv.Wait", with the same
//     arguments: that is where the time goes.
//   - "SendBytes" (peer, tag, bytes); "RecvBytes" and "RecvBytesWithin"
//     (peer and tag asked for, -1 for any; then src, got_tag and bytes
//     received; RecvBytesWithin adds deadline_us).
//   - "Barrier"; "Abort" (code); "NativeAllreduceSum" (bytes).
//
// When c implements collectives.NativeAllreducer (MPI), so does the result,
// so the "mpi" algorithm keeps working; other optional interfaces and type
// assertions to the transport's type do not see through the wrapper: apply
// transport settings first, or reach the transport with Unwrap.
//
// With t nil or Nop, Comm returns c itself: tracing off costs nothing.
func Comm(c collectives.Comm, t Tracer) collectives.Comm {
	if !Enabled(t) {
		return c
	}
	return wrapComm(c, t)
}

func wrapComm(c collectives.Comm, t Tracer) collectives.Comm {
	tc := &tracedComm{c: c, t: t}
	if n, ok := c.(collectives.NativeAllreducer); ok {
		return &tracedNativeComm{tracedComm: tc, n: n}
	}
	return tc
}

// Unwrapper is implemented by the decorators: Unwrap returns what they wrap.
type Unwrapper[T any] interface {
	Unwrap() T
}

var (
	_ collectives.Comm               = (*tracedComm)(nil)
	_ collectives.NativeAllreducer   = (*tracedNativeComm)(nil)
	_ Unwrapper[collectives.Comm]    = (*tracedComm)(nil)
	_ collectives.Request            = (*tracedRequest)(nil)
	_ Unwrapper[collectives.Request] = (*tracedRequest)(nil)
)

type tracedComm struct {
	c collectives.Comm
	t Tracer
}

func (tc *tracedComm) Unwrap() collectives.Comm { return tc.c }

func (tc *tracedComm) Rank() int { return tc.c.Rank() }
func (tc *tracedComm) Size() int { return tc.c.Size() }

func (tc *tracedComm) Isend(buf []float32, to, tag int) (collectives.Request, error) {
	sp := tc.t.Begin("Isend").Cat(Collective).Arg("peer", to).Arg("tag", tag).Bytes(4 * len(buf))
	r, err := tc.c.Isend(buf, to, tag)
	sp.Err(err).End()
	return tc.request(r, err, "Isend.Wait", to, tag, len(buf)), err
}

func (tc *tracedComm) Irecv(buf []float32, from, tag int) (collectives.Request, error) {
	sp := tc.t.Begin("Irecv").Cat(Collective).Arg("peer", from).Arg("tag", tag).Bytes(4 * len(buf))
	r, err := tc.c.Irecv(buf, from, tag)
	sp.Err(err).End()
	return tc.request(r, err, "Irecv.Wait", from, tag, len(buf)), err
}

// request wraps a posted request so that its Wait is a span; a failed or
// nil request is returned as it is.
func (tc *tracedComm) request(r collectives.Request, err error, name string, peer, tag, n int) collectives.Request {
	if err != nil || r == nil {
		return r
	}
	return &tracedRequest{r: r, t: tc.t, name: name, peer: peer, tag: tag, n: n}
}

type tracedRequest struct {
	r            collectives.Request
	t            Tracer
	name         string
	peer, tag, n int
}

func (tr *tracedRequest) Unwrap() collectives.Request { return tr.r }

func (tr *tracedRequest) Wait() error {
	sp := tr.t.Begin(tr.name).Cat(Collective).Arg("peer", tr.peer).Arg("tag", tr.tag).Bytes(4 * tr.n)
	err := tr.r.Wait()
	sp.Err(err).End()
	return err
}

func (tc *tracedComm) SendBytes(buf []byte, to, tag int) error {
	sp := tc.t.Begin("SendBytes").Cat(Collective).Arg("peer", to).Arg("tag", tag).Bytes(len(buf))
	err := tc.c.SendBytes(buf, to, tag)
	sp.Err(err).End()
	return err
}

func (tc *tracedComm) RecvBytes(from, tag int) ([]byte, int, int, error) {
	sp := tc.t.Begin("RecvBytes").Cat(Collective).Arg("peer", from).Arg("tag", tag)
	msg, src, gotTag, err := tc.c.RecvBytes(from, tag)
	endRecv(sp, msg, src, gotTag, err)
	return msg, src, gotTag, err
}

func (tc *tracedComm) RecvBytesWithin(from, tag int, d time.Duration) ([]byte, int, int, error) {
	sp := tc.t.Begin("RecvBytesWithin").Cat(Collective).Arg("peer", from).Arg("tag", tag).
		Arg("deadline_us", int(d/time.Microsecond))
	msg, src, gotTag, err := tc.c.RecvBytesWithin(from, tag, d)
	endRecv(sp, msg, src, gotTag, err)
	return msg, src, gotTag, err
}

func endRecv(sp Span, msg []byte, src, gotTag int, err error) {
	if err == nil {
		sp = sp.Arg("src", src).Arg("got_tag", gotTag).Bytes(len(msg))
	}
	sp.Err(err).End()
}

func (tc *tracedComm) Barrier() error {
	sp := tc.t.Begin("Barrier").Cat(Collective)
	err := tc.c.Barrier()
	sp.Err(err).End()
	return err
}

// Abort over MPI does not return, so its span is recorded only by
// transports that do (the in-process one, in tests).
func (tc *tracedComm) Abort(code int, err error) {
	sp := tc.t.Begin("Abort").Cat(Collective).Arg("code", code).Err(err)
	tc.c.Abort(code, err)
	sp.End()
}

type tracedNativeComm struct {
	*tracedComm
	n collectives.NativeAllreducer
}

func (tc *tracedNativeComm) NativeAllreduceSum(buf []float32) error {
	sp := tc.t.Begin("NativeAllreduceSum").Cat(Collective).Bytes(4 * len(buf))
	err := tc.n.NativeAllreduceSum(buf)
	sp.Err(err).End()
	return err
}
