package trace_test

import (
	"fmt"
	"os"
	"time"

	"github.com/dml-project/dml/trainer/trace"
)

// A training step traced by a Recorder on a fake clock, written as Chrome
// trace-event JSON. With tracing off the same code runs with trace.Nop.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	rec := trace.NewRecorder(trace.Options{Rank: 1, Now: clock})

	var tr trace.Tracer = rec // trace.Nop when tracing is off
	step := tr.Begin("step").Arg("step", 0)
	fwd := tr.Begin("forward").Cat(trace.Compute)
	now = now.Add(1500 * time.Microsecond)
	fwd.End()
	// Work a goroutine of another role runs goes on its own lane (thread).
	ar := trace.OnLane(tr, trace.LaneComm).Begin("allreduce").Cat(trace.Collective).Bytes(4096)
	now = now.Add(250 * time.Microsecond)
	ar.End()
	step.End()

	for _, s := range rec.Snapshot().Spans {
		fmt.Printf("%-9s %-10v %v\n", s.Name, s.Cat, s.Duration())
	}
	rec.WriteChrome(os.Stdout)
	// Output:
	// forward   compute    1.5ms
	// allreduce collective 250µs
	// step      other      1.75ms
	// {"displayTimeUnit":"ms","otherData":{"origin":"2026-01-01T00:00:00Z"},"traceEvents":[
	// {"name":"process_name","ph":"M","pid":1,"args":{"name":"rank 1"}},
	// {"name":"process_sort_index","ph":"M","pid":1,"args":{"sort_index":1}},
	// {"name":"thread_name","ph":"M","pid":1,"tid":0,"args":{"name":"step loop"}},
	// {"name":"thread_sort_index","ph":"M","pid":1,"tid":0,"args":{"sort_index":0}},
	// {"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"communication"}},
	// {"name":"thread_sort_index","ph":"M","pid":1,"tid":1,"args":{"sort_index":1}},
	// {"name":"forward","cat":"compute","ph":"X","ts":0.000,"dur":1500.000,"pid":1,"tid":0},
	// {"name":"allreduce","cat":"collective","ph":"X","ts":1500.000,"dur":250.000,"pid":1,"tid":1,"args":{"bytes":4096}},
	// {"name":"step","cat":"other","ph":"X","ts":0.000,"dur":1750.000,"pid":1,"tid":0,"args":{"step":0}}
	// ]}
}
