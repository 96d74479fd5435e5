// Package trace records spans — named, timed intervals of a rank's work
// (forward, backward, each collective, push, pull, a wait, the optimizer
// update) — through one small interface, so that a timeline, a per-step
// time breakdown or a stall inspector can be built on them later.
//
// The seam is Tracer: Begin(name) starts a span, Span.End ends it. Spans are
// annotated by chaining before End:
//
//	sp := tr.Begin("backward").Cat(trace.Compute).Arg("layers", n)
//	...
//	sp.End()
//
// Implementations:
//   - Nop: records nothing and costs nothing measurable: Begin and the span
//     methods do not allocate (tested with testing.AllocsPerRun).
//   - Recorder: keeps the latest spans in memory (a bounded ring with a
//     count of the spans it overwrote), for one or more writing goroutines
//     and concurrent readers, and writes them as Chrome trace-event JSON
//     (WriteChrome), which chrome://tracing and Perfetto open.
//
// Decorators put spans around every call of a seam without touching the code
// behind it: Comm wraps a collectives.Comm, Backend a kernels.Backend.
//
// A span's Lane is the goroutine role that ran it (OnLane: the step loop,
// a communication goroutine, a serving loop), a timeline's thread; its
// Category is what kind of work it was. Complete records a span measured
// after the fact (a parameter server's hold of a request).
//
// Several ranks: MeasureOffsets estimates each rank's clock offset against
// rank 0 at start-up (ping-pongs, the minimum-RTT sample, NTP-style),
// GatherSnapshots sends every rank's spans to rank 0 onto its clock, and
// WriteMerged writes them as one trace with a process per rank.
//
// Costing nothing when off: a caller with tracing off does not wrap (Comm and
// Backend given Nop or nil return their argument itself, so the same wiring
// code serves both) and passes Nop where code wants a Tracer; a Nop span is a
// few non-allocating interface calls.
//
// Time comes from a clock the Recorder is given (Options.Now), so tests run on
// a fake clock; nesting (a step span holding forward and backward) is time
// containment, there are no parent links.
//
// This package imports collectives and kernels for its decorators, so those
// two cannot import it; spans from inside them come from the decorators.
package trace

import "fmt"

// Tracer starts spans. Implementations say which goroutines may use them;
// Nop and Recorder may be used by any number at once.
type Tracer interface {
	// Begin starts a span named name (the operation: "forward", "Gemm",
	// "Isend"), of category Other until Cat says otherwise. The span ends
	// when its End is called.
	Begin(name string) Span
}

// Span is one interval of work, started by Tracer.Begin. The annotation
// methods return the span itself so that they chain; they and End are
// called by the goroutine that began the span. End is called exactly once,
// and the span is not touched after End: a Recorder reuses its spans.
type Span interface {
	// Cat sets the span's category (a timeline's "cat": its colour and filter).
	Cat(c Category) Span
	// Arg attaches an integer argument (a size, a layer, a peer rank).
	// Keys should be constant strings; a span keeps the first MaxArgs.
	Arg(key string, v int) Span
	// Bytes attaches the number of bytes the operation moved (Arg "bytes").
	Bytes(n int) Span
	// Err records err's message when err is not nil (the call failed).
	Err(err error) Span
	// End ends the span at the tracer's current time.
	End()
}

// MaxArgs is the number of arguments a recorded span keeps; further Arg
// calls are ignored.
const MaxArgs = 6

// Category says what kind of work a span is; a timeline shows it as the
// event's "cat" (its rows are Lanes, the goroutine roles).
type Category uint8

// The categories. Other is the zero value: a span given no category (the
// step that contains the others, for instance).
const (
	Other      Category = iota // not classified: a step, a phase
	Compute                    // forward, backward, kernel ops
	Collective                 // communication: collectives and the messages under them
	PS                         // parameter-server requests: push, pull
	Wait                       // waiting: a consistency controller, a device Sync
	Update                     // the optimizer update
	IO                         // data loading, host↔device copies, checkpoints
	numCategories
)

var categoryNames = [numCategories]string{"other", "compute", "collective", "ps", "wait", "update", "io"}

// String returns the category's name as a timeline shows it ("compute").
func (c Category) String() string {
	if c < numCategories {
		return categoryNames[c]
	}
	return fmt.Sprintf("Category(%d)", int(c))
}

// Categories lists every category, in order.
func Categories() []Category {
	cs := make([]Category, numCategories)
	for i := range cs {
		cs[i] = Category(i)
	}
	return cs
}

// Nop is the tracer that records nothing. Its spans are a zero-size value:
// Begin, the annotations and End neither allocate nor read a clock.
var Nop Tracer = nopTracer{}

type nopTracer struct{}

func (nopTracer) Begin(string) Span { return nopSpan{} }

type nopSpan struct{}

func (s nopSpan) Cat(Category) Span    { return s }
func (s nopSpan) Arg(string, int) Span { return s }
func (s nopSpan) Bytes(int) Span       { return s }
func (s nopSpan) Err(error) Span       { return s }
func (nopSpan) End()                   {}

// Enabled reports whether t records anything: false for nil and Nop. Wiring
// code uses it to decide whether to wrap a seam at all.
func Enabled(t Tracer) bool {
	_, nop := t.(nopTracer)
	return t != nil && !nop
}

// OrNop returns t, or Nop when t is nil, so a struct field left unset traces
// nothing.
func OrNop(t Tracer) Tracer {
	if t == nil {
		return Nop
	}
	return t
}
