package trace

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
)

// fakeComm records every call and returns fixed results (and callLog.err).
type fakeComm struct {
	callLog
	req *fakeRequest
	msg []byte
}

func newFakeComm() *fakeComm {
	return &fakeComm{req: &fakeRequest{}, msg: []byte("hello")}
}

type fakeRequest struct {
	waits int
	err   error
}

func (r *fakeRequest) Wait() error { r.waits++; return r.err }

func (f *fakeComm) Rank() int { f.record("Rank"); return 5 }
func (f *fakeComm) Size() int { f.record("Size"); return 9 }
func (f *fakeComm) Isend(buf []float32, to, tag int) (collectives.Request, error) {
	return f.req, f.record("Isend", buf, to, tag)
}
func (f *fakeComm) Irecv(buf []float32, from, tag int) (collectives.Request, error) {
	return f.req, f.record("Irecv", buf, from, tag)
}
func (f *fakeComm) SendBytes(buf []byte, to, tag int) error {
	return f.record("SendBytes", buf, to, tag)
}
func (f *fakeComm) RecvBytes(from, tag int) ([]byte, int, int, error) {
	return f.msg, 4, 77, f.record("RecvBytes", from, tag)
}
func (f *fakeComm) RecvBytesWithin(from, tag int, d time.Duration) ([]byte, int, int, error) {
	return f.msg, 3, 66, f.record("RecvBytesWithin", from, tag, d)
}
func (f *fakeComm) Barrier() error            { return f.record("Barrier") }
func (f *fakeComm) Abort(code int, err error) { f.record("Abort", code, err) }

// fakeNativeComm also has a native AllReduce.
type fakeNativeComm struct{ *fakeComm }

func (f fakeNativeComm) NativeAllreduceSum(buf []float32) error {
	return f.record("NativeAllreduceSum", buf)
}

var commCases = map[string]methodCase{
	"Rank":               {},
	"Size":               {},
	"Isend":              {span: true, cat: Collective},
	"Irecv":              {span: true, cat: Collective},
	"SendBytes":          {span: true, cat: Collective},
	"RecvBytes":          {span: true, cat: Collective},
	"RecvBytesWithin":    {span: true, cat: Collective},
	"Barrier":            {span: true, cat: Collective},
	"Abort":              {span: true, cat: Collective, errArg: 2},
	"NativeAllreduceSum": {span: true, cat: Collective},
}

// unwrapRequests replaces a traced Request among a Comm method's results by
// the one it wraps.
func unwrapRequests(t *testing.T) func(string, []reflect.Value) {
	return func(method string, out []reflect.Value) {
		for i, v := range out {
			if req, ok := v.Interface().(*tracedRequest); ok {
				out[i] = reflect.ValueOf(req.Unwrap())
			}
		}
	}
}

func TestCommForwardsEveryMethod(t *testing.T) {
	for _, native := range []bool{false, true} {
		fake := newFakeComm()
		var inner collectives.Comm = fake
		if native {
			inner = fakeNativeComm{fake}
		}
		rec := NewRecorder(Options{})
		c := Comm(inner, rec)
		if u := c.(Unwrapper[collectives.Comm]).Unwrap(); u != inner {
			t.Fatalf("Unwrap gives %v, not the wrapped Comm", u)
		}
		_, isNative := c.(collectives.NativeAllreducer)
		if isNative != native {
			t.Fatalf("wrapping a Comm that is NativeAllreducer=%v gives one that is %v", native, isNative)
		}
		gen := &argGen{}
		checkForwarding(t, reflect.TypeFor[collectives.Comm](), c, inner, &fake.callLog, rec, gen, commCases, unwrapRequests(t))
		if native {
			checkForwarding(t, reflect.TypeFor[collectives.NativeAllreducer](), c, inner, &fake.callLog, rec, gen, commCases, nil)
		}
	}
}

// TestCommRequestWait checks that a traced request's Wait waits for the
// transport's request, returns its error, and is a span of its own.
func TestCommRequestWait(t *testing.T) {
	clk := newFakeClock()
	rec := NewRecorder(Options{Now: clk.Now})
	fake := newFakeComm()
	c := Comm(fake, rec)
	buf := make([]float32, 10)
	for _, werr := range []error{nil, errors.New("peer vanished")} {
		fake.req.err = werr
		waits := fake.req.waits
		for _, op := range []string{"Isend", "Irecv"} {
			var r collectives.Request
			var err error
			if op == "Isend" {
				r, err = c.Isend(buf, 2, 42)
			} else {
				r, err = c.Irecv(buf, 2, 42)
			}
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Millisecond)
			if got := r.Wait(); got != werr {
				t.Errorf("%s: Wait returned %v, want %v", op, got, werr)
			}
			snap := rec.Snapshot()
			s := snap.Spans[len(snap.Spans)-1]
			peer, _ := s.Arg("peer")
			tag, _ := s.Arg("tag")
			bytes, _ := s.Arg("bytes")
			if s.Name != op+".Wait" || s.Cat != Collective || peer != 2 || tag != 42 || bytes != 40 {
				t.Errorf("%s: wait span %+v", op, s)
			}
			if (s.Err != "") != (werr != nil) {
				t.Errorf("%s: wait span error %q for a Wait that returned %v", op, s.Err, werr)
			}
		}
		if fake.req.waits != waits+2 {
			t.Errorf("the transport's requests were waited %d times, want 2", fake.req.waits-waits)
		}
	}

	// A failed post comes back exactly as the transport returned it.
	fake.err = errors.New("bad rank")
	r, err := c.Isend(buf, 99, 1)
	if err != fake.err || r != collectives.Request(fake.req) {
		t.Errorf("failed Isend returned %v, %v; want the transport's %v, %v", r, err, fake.req, fake.err)
	}
}

func TestCommOffReturnsTheComm(t *testing.T) {
	fake := newFakeComm()
	if c := Comm(fake, Nop); c != collectives.Comm(fake) {
		t.Error("Comm(c, Nop) wrapped c")
	}
	if c := Comm(fake, nil); c != collectives.Comm(fake) {
		t.Error("Comm(c, nil) wrapped c")
	}
}

// TestCommRingAllreduce runs the ring and recursive doubling over traced
// in-process Comms: same results as untraced, and every rank recorded its
// sends, receives and waits.
func TestCommRingAllreduce(t *testing.T) {
	const ranks, n = 3, 1000
	for _, algo := range []collectives.Algorithm{collectives.Ring, collectives.Tree} {
		input := func(rank int) []float32 {
			b := make([]float32, n)
			for i := range b {
				b[i] = float32(rank*n + i)
			}
			return b
		}
		run := func(traced bool) ([][]float32, []*Recorder) {
			w := local.NewWorld(ranks)
			out := make([][]float32, ranks)
			recs := make([]*Recorder, ranks)
			for r := range recs {
				recs[r] = NewRecorder(Options{Rank: r})
			}
			errs := w.Run(func(c *local.Comm) error {
				var cc collectives.Comm = c
				if traced {
					cc = Comm(c, recs[c.Rank()])
				}
				buf := input(c.Rank())
				err := collectives.Allreduce(cc, buf, collectives.Sum, algo)
				out[c.Rank()] = buf
				return err
			})
			for r, err := range errs {
				if err != nil {
					t.Fatalf("%s: rank %d: %v", algo, r, err)
				}
			}
			return out, recs
		}
		plain, _ := run(false)
		traced, recs := run(true)
		for r := range ranks {
			if !reflect.DeepEqual(plain[r], traced[r]) {
				t.Fatalf("%s: rank %d's traced result differs from the untraced one", algo, r)
			}
			names := map[string]int{}
			for _, s := range recs[r].Snapshot().Spans {
				names[s.Name]++
				if s.Rank != r || s.Cat != Collective || s.Err != "" {
					t.Errorf("%s: rank %d recorded %+v", algo, r, s)
				}
			}
			// A request may be waited on more than once (the ring does).
			if names["Isend"] == 0 || names["Irecv"] == 0 ||
				names["Isend.Wait"] < names["Isend"] || names["Irecv.Wait"] < names["Irecv"] {
				t.Errorf("%s: rank %d's spans %v: want Isends and Irecvs, each waited for", algo, r, names)
			}
		}
	}
}
