package trace

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestNopDoesNotAllocate(t *testing.T) {
	err := errors.New("boom")
	var tr Tracer = Nop
	allocs := testing.AllocsPerRun(1000, func() {
		tr.Begin("step").Cat(Compute).Arg("layer", 3).Bytes(4096).Err(err).End()
	})
	if allocs != 0 {
		t.Fatalf("a Nop span allocates %v times, want 0", allocs)
	}
}

func TestRecorderSteadyStateDoesNotAllocate(t *testing.T) {
	r := NewRecorder(Options{Capacity: 8})
	err := errors.New("boom")
	span := func() {
		outer := r.Begin("step")
		r.Begin("Gemm").Cat(Compute).Arg("m", 1).Arg("n", 2).Err(err).End()
		outer.End()
	}
	for range 16 { // fill the ring and the span pool
		span()
	}
	if allocs := testing.AllocsPerRun(1000, span); allocs != 0 {
		t.Fatalf("recording two spans allocates %v times once warm, want 0", allocs)
	}
}

func TestEnabled(t *testing.T) {
	if Enabled(nil) || Enabled(Nop) || Enabled(OrNop(nil)) {
		t.Error("Enabled is true for nil or Nop")
	}
	r := NewRecorder(Options{})
	if !Enabled(r) || OrNop(r) != Tracer(r) {
		t.Error("Enabled(Recorder) false or OrNop replaced it")
	}
}

func TestCategoryNames(t *testing.T) {
	want := []string{"other", "compute", "collective", "ps", "wait", "update", "io"}
	cs := Categories()
	if len(cs) != len(want) {
		t.Fatalf("%d categories, want %d", len(cs), len(want))
	}
	for i, c := range cs {
		if c.String() != want[i] {
			t.Errorf("category %d is %q, want %q", i, c, want[i])
		}
	}
	if s := Category(42).String(); s != "Category(42)" {
		t.Errorf("Category(42) prints %q", s)
	}
}

// TestRecorderSpans records a step holding forward, backward and an
// AllReduce on a fake clock and checks every field of every span.
func TestRecorderSpans(t *testing.T) {
	clk := newFakeClock()
	origin := clk.Now()
	r := NewRecorder(Options{Rank: 3, Now: clk.Now})
	if !r.Origin().Equal(origin) || r.Rank() != 3 {
		t.Fatalf("origin %v rank %d, want %v and 3", r.Origin(), r.Rank(), origin)
	}

	clk.Advance(1 * time.Millisecond)
	step := r.Begin("step").Arg("step", 7)
	fwd := r.Begin("forward").Cat(Compute)
	clk.Advance(2 * time.Millisecond)
	fwd.End()
	bwd := r.Begin("backward").Cat(Compute)
	clk.Advance(3 * time.Millisecond)
	bwd.End()
	ar := r.Begin("allreduce").Cat(Collective).Bytes(940584)
	clk.Advance(4 * time.Millisecond)
	ar.Err(errors.New("rank 1 timed out")).End()
	up := r.Begin("update").Cat(Update)
	for i := range MaxArgs + 2 { // the extra two are ignored
		up.Arg(fmt.Sprint("a", i), i)
	}
	clk.Advance(500 * time.Microsecond)
	up.End()
	step.End()

	snap := r.Snapshot()
	if snap.Rank != 3 || snap.Dropped != 0 {
		t.Fatalf("snapshot rank %d dropped %d, want 3 and 0", snap.Rank, snap.Dropped)
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	want := []struct {
		name   string
		cat    Category
		start  time.Duration // from origin
		dur    time.Duration
		nargs  int
		hasErr bool
	}{ // in the order they ended
		{"forward", Compute, ms(1), ms(2), 0, false},
		{"backward", Compute, ms(3), ms(3), 0, false},
		{"allreduce", Collective, ms(6), ms(4), 1, true},
		{"update", Update, ms(10), ms(0.5), MaxArgs, false},
		{"step", Other, ms(1), ms(9.5), 1, false},
	}
	if len(snap.Spans) != len(want) || r.Len() != len(want) {
		t.Fatalf("%d spans (Len %d), want %d: %+v", len(snap.Spans), r.Len(), len(want), snap.Spans)
	}
	for i, w := range want {
		s := snap.Spans[i]
		if s.Name != w.name || s.Cat != w.cat || s.Rank != 3 || s.Start.Sub(origin) != w.start ||
			s.Duration() != w.dur || len(s.Args) != w.nargs || (s.Err != "") != w.hasErr {
			t.Errorf("span %d = %s %v rank %d start %v dur %v args %v err %q; want %s %v start %v dur %v, %d args, error %v",
				i, s.Name, s.Cat, s.Rank, s.Start.Sub(origin), s.Duration(), s.Args, s.Err,
				w.name, w.cat, w.start, w.dur, w.nargs, w.hasErr)
		}
	}
	if v, ok := snap.Spans[2].Arg("bytes"); !ok || v != 940584 {
		t.Errorf("allreduce bytes = %d, %v", v, ok)
	}
	if snap.Spans[2].Err != "rank 1 timed out" {
		t.Errorf("allreduce error %q", snap.Spans[2].Err)
	}
	if v, ok := snap.Spans[4].Arg("step"); !ok || v != 7 {
		t.Errorf("step arg = %d, %v", v, ok)
	}
	if _, ok := snap.Spans[4].Arg("bytes"); ok {
		t.Error("step has a bytes arg it was not given")
	}
	for i, a := range snap.Spans[3].Args {
		if a.Key != fmt.Sprint("a", i) || a.Value != int64(i) {
			t.Errorf("update arg %d = %+v", i, a)
		}
	}
}

func TestRecorderIgnoresSecondEnd(t *testing.T) {
	r := NewRecorder(Options{})
	s := r.Begin("once")
	s.End()
	s.End()
	if n := r.Len(); n != 1 {
		t.Fatalf("%d spans after ending one span twice, want 1", n)
	}
}

// TestRecorderRing overflows a small recorder: the newest spans are kept, in
// order, and the overwritten ones are counted.
func TestRecorderRing(t *testing.T) {
	clk := newFakeClock()
	r := NewRecorder(Options{Capacity: 3, Now: clk.Now})
	for n := 1; n <= 8; n++ {
		s := r.Begin(fmt.Sprint("s", n)).Arg("n", n)
		clk.Advance(time.Duration(n) * time.Microsecond)
		s.End()

		snap := r.Snapshot()
		keep := min(n, 3)
		if len(snap.Spans) != keep || snap.Dropped != uint64(n-keep) || r.Dropped() != uint64(n-keep) {
			t.Fatalf("after %d spans: %d kept, %d dropped; want %d and %d", n, len(snap.Spans), snap.Dropped, keep, n-keep)
		}
		for i, s := range snap.Spans {
			want := n - keep + 1 + i
			v, _ := s.Arg("n")
			if s.Name != fmt.Sprint("s", want) || v != int64(want) || s.Duration() != time.Duration(want)*time.Microsecond {
				t.Fatalf("after %d spans: span %d is %s n=%d dur %v, want s%d", n, i, s.Name, v, s.Duration(), want)
			}
		}
	}
}

func TestSnapshotShift(t *testing.T) {
	clk := newFakeClock()
	r := NewRecorder(Options{Now: clk.Now})
	s := r.Begin("x")
	clk.Advance(time.Second)
	s.End()
	snap := r.Snapshot()
	snap.Shift(-250 * time.Millisecond)
	got := snap.Spans[0]
	if got.Start.Sub(r.Origin()) != -250*time.Millisecond || got.Duration() != time.Second {
		t.Fatalf("shifted span starts at %v for %v", got.Start.Sub(r.Origin()), got.Duration())
	}
}

// TestRecorderConcurrent has two writers and a reader at once (run it with
// -race); every span ends up kept or counted as dropped.
func TestRecorderConcurrent(t *testing.T) {
	r := NewRecorder(Options{Rank: 1, Capacity: 100})
	const writers, perWriter = 2, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				outer := r.Begin("step").Arg("writer", w)
				r.Begin("op").Cat(Compute).Arg("i", i).End()
				outer.End()
			}
		}()
	}
	done := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			snap := r.Snapshot()
			if len(snap.Spans) > 100 {
				readerErr <- fmt.Errorf("snapshot of %d spans from a recorder of 100", len(snap.Spans))
				return
			}
			if err := r.WriteChrome(discard{}); err != nil {
				readerErr <- err
				return
			}
		}
	}()
	wg.Wait()
	close(done)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	if got := uint64(r.Len()) + r.Dropped(); got != 2*writers*perWriter {
		t.Fatalf("kept + dropped = %d, want %d", got, 2*writers*perWriter)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestRecorderChunks: a capacity over several chunks (the last one short)
// wraps like a flat ring: the newest cap spans, oldest first.
func TestRecorderChunks(t *testing.T) {
	const capacity = 2*chunkLen + 500
	r := NewRecorder(Options{Capacity: capacity})
	const total = 3*capacity + 77
	for i := range total {
		r.Begin("s").Arg("i", i).End()
	}
	snap := r.Snapshot()
	if len(snap.Spans) != capacity || snap.Dropped != total-capacity || r.Len() != capacity {
		t.Fatalf("%d spans, %d dropped; want %d, %d", len(snap.Spans), snap.Dropped, capacity, total-capacity)
	}
	for k, s := range snap.Spans {
		if v, _ := s.Arg("i"); v != int64(total-capacity+k) {
			t.Fatalf("span %d is number %d, want %d", k, v, total-capacity+k)
		}
	}
	if n := len(r.chunks); n != 3 || len(r.chunks[2]) != 500 {
		t.Errorf("%d chunks (last %d long), want 3 (last 500)", n, len(r.chunks[len(r.chunks)-1]))
	}
}

func TestComplete(t *testing.T) {
	clk := newFakeClock()
	r := NewRecorder(Options{Rank: 1, Now: clk.Now})
	t0 := clk.Now()
	Complete(r, "held", Wait, t0, t0.Add(time.Millisecond), Arg{"server", 0})
	Complete(OnLane(r, LaneComm), "x", PS, t0, t0, make([]Arg, MaxArgs+2)...)
	Complete(Nop, "ignored", Wait, t0, t0)
	Complete(nil, "ignored", Wait, t0, t0)
	s := r.Snapshot().Spans
	if len(s) != 2 {
		t.Fatalf("%d spans, want 2", len(s))
	}
	if s[0].Name != "held" || s[0].Cat != Wait || s[0].Lane != LaneStep || s[0].Duration() != time.Millisecond || len(s[0].Args) != 1 || s[0].Rank != 1 {
		t.Errorf("first span %+v", s[0])
	}
	if s[1].Lane != LaneComm || len(s[1].Args) != MaxArgs {
		t.Errorf("second span on lane %v with %d args", s[1].Lane, len(s[1].Args))
	}
}
