package trace

import (
	"sync"
	"time"
)

// DefaultCapacity is the number of spans a Recorder keeps when
// Options.Capacity is zero (about 15 MB once full: 232 bytes a span).
const DefaultCapacity = 1 << 16

// Options configure a Recorder. The zero value is usable: rank 0,
// DefaultCapacity spans, the wall clock.
type Options struct {
	// Rank is the rank the spans belong to (the timeline's process id).
	Rank int
	// Capacity is the most spans kept; once full, each new span overwrites
	// the oldest and counts as dropped. Zero means DefaultCapacity.
	Capacity int
	// Now is the clock; nil means time.Now. Tests pass a fake clock.
	Now func() time.Time
}

// Arg is one argument of a recorded span.
type Arg struct {
	Key   string
	Value int64
}

// Record is a finished span.
type Record struct {
	Name       string
	Cat        Category
	Rank       int
	Lane       Lane // the goroutine role that ran it: the timeline's thread
	Start, End time.Time
	Args       []Arg  // in the order they were attached; nil if none
	Err        string // the error the operation returned, if any
}

// Duration is End − Start.
func (r Record) Duration() time.Duration { return r.End.Sub(r.Start) }

// Arg returns the value of the argument key and whether the span has it.
func (r Record) Arg(key string) (int64, bool) {
	for _, a := range r.Args {
		if a.Key == key {
			return a.Value, true
		}
	}
	return 0, false
}

// Snapshot is a copy of what a Recorder holds: the spans of one rank in the
// order they ended, oldest first, and how many older ones were overwritten.
type Snapshot struct {
	Rank    int
	Spans   []Record
	Dropped uint64
}

// Shift moves every span by d (to put a rank's spans on another rank's
// clock once their offset is measured).
func (s Snapshot) Shift(d time.Duration) {
	for i := range s.Spans {
		s.Spans[i].Start = s.Spans[i].Start.Add(d)
		s.Spans[i].End = s.Spans[i].End.Add(d)
	}
}

// Recorder is a Tracer that keeps the most recent Capacity spans in memory.
// Any number of goroutines may begin and end spans and read snapshots at the
// same time (one mutex, held for a few stores per span). A span is recorded
// when it ends; spans still open are not in snapshots.
//
// Spans are pooled: in steady state Begin and End do not allocate, which is
// why a span must not be used after End.
type Recorder struct {
	rank   int
	cap    int
	now    func() time.Time
	origin time.Time

	mu sync.Mutex
	// ring holds span i (i = total%cap) at chunks[i/chunkLen][i%chunkLen];
	// chunks are allocated as the ring fills, so that it never copies.
	chunks [][]entry
	total  uint64 // spans ever recorded
	held   int    // spans held: min(total, cap)
	free   []*span
}

// entry is a span as stored: its arguments inline, so recording does not
// allocate.
type entry struct {
	name       string
	cat        Category
	lane       Lane
	nargs      uint8
	start, end time.Time
	args       [MaxArgs]Arg
	err        string
}

// NewRecorder returns an empty Recorder. Its origin, the time timelines are
// drawn from, is the clock's reading now.
func NewRecorder(o Options) *Recorder {
	r := &Recorder{rank: o.Rank, cap: o.Capacity, now: o.Now}
	if r.cap <= 0 {
		r.cap = DefaultCapacity
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.origin = r.now()
	return r
}

// Rank is the rank the Recorder was made for.
func (r *Recorder) Rank() int { return r.rank }

// Origin is the clock's reading when the Recorder was made.
func (r *Recorder) Origin() time.Time { return r.origin }

// Begin starts a span at the clock's current time, on LaneStep (OnLane
// gives a Tracer for another lane).
func (r *Recorder) Begin(name string) Span { return r.begin(name, LaneStep) }

func (r *Recorder) begin(name string, lane Lane) Span {
	r.mu.Lock()
	var s *span
	if n := len(r.free); n > 0 {
		s = r.free[n-1]
		r.free = r.free[:n-1]
	} else {
		s = &span{r: r}
	}
	r.mu.Unlock()
	s.e = entry{name: name, lane: lane}
	s.ended = false
	s.e.start = r.now()
	return s
}

// span is a Recorder's open span.
type span struct {
	r     *Recorder
	e     entry
	ended bool
}

func (s *span) Cat(c Category) Span { s.e.cat = c; return s }

func (s *span) Arg(key string, v int) Span {
	if int(s.e.nargs) < MaxArgs {
		s.e.args[s.e.nargs] = Arg{Key: key, Value: int64(v)}
		s.e.nargs++
	}
	return s
}

func (s *span) Bytes(n int) Span { return s.Arg("bytes", n) }

func (s *span) Err(err error) Span {
	if err != nil {
		s.e.err = err.Error()
	}
	return s
}

// End records the span. A second End of the same span, before it is
// reused, is ignored.
func (s *span) End() {
	r := s.r
	end := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	s.e.end = end
	r.store(&s.e)
	r.free = append(r.free, s)
}

// store puts e into the ring (r.mu held).
func (r *Recorder) store(e *entry) {
	i := int(r.total % uint64(r.cap))
	c := i / chunkLen
	if c == len(r.chunks) {
		r.chunks = append(r.chunks, make([]entry, min(chunkLen, r.cap-c*chunkLen)))
	}
	r.chunks[c][i%chunkLen] = *e
	r.total++
	r.held = min(r.held+1, r.cap)
}

// Complete records a finished span whose times someone else measured, on
// tracer t: a wait known only after the fact, such as the time a parameter
// server held a request (which the worker learns from the reply). start and
// end are readings of the tracer's clock; args beyond MaxArgs are dropped.
// Tracers that are not a Recorder (or a lane of one), Nop included, ignore
// it.
func Complete(t Tracer, name string, cat Category, start, end time.Time, args ...Arg) {
	var r *Recorder
	lane := LaneStep
	switch t := t.(type) {
	case *Recorder:
		r = t
	case *laneTracer:
		r, lane = t.r, t.lane
	default:
		return
	}
	e := entry{name: name, cat: cat, lane: lane, start: start, end: end}
	e.nargs = uint8(copy(e.args[:], args))
	r.mu.Lock()
	r.store(&e)
	r.mu.Unlock()
}

// Len is the number of spans held.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// Dropped is the number of spans overwritten because the Recorder was full.
func (r *Recorder) Dropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped()
}

func (r *Recorder) dropped() uint64 { return r.total - uint64(r.held) }

// chunkLen is the number of spans in one of the ring's chunks.
const chunkLen = 1024

// Snapshot copies the spans held, oldest first.
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	es := make([]entry, r.held)
	// The oldest span is at total%cap once the ring has wrapped, else at 0.
	first := 0
	if r.held == r.cap {
		first = int(r.total % uint64(r.cap))
	}
	for k := range es {
		i := (first + k) % r.cap
		es[k] = r.chunks[i/chunkLen][i%chunkLen]
	}
	snap := Snapshot{Rank: r.rank, Dropped: r.dropped()}
	r.mu.Unlock()

	nargs := 0
	for i := range es {
		nargs += int(es[i].nargs)
	}
	args := make([]Arg, 0, nargs)
	snap.Spans = make([]Record, len(es))
	for i := range es {
		e := &es[i]
		rec := Record{Name: e.name, Cat: e.cat, Rank: r.rank, Lane: e.lane, Start: e.start, End: e.end, Err: e.err}
		if e.nargs > 0 {
			lo := len(args)
			args = append(args, e.args[:e.nargs]...)
			rec.Args = args[lo:len(args):len(args)]
		}
		snap.Spans[i] = rec
	}
	return snap
}
