package trace

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestConcatAttempts: two attempts' traces, the second begun 1.5 s after
// the first, become one: the second's events move by 1.5 s, each
// attempt's ranks are processes of their own, named by attempt and rank;
// a file without an origin is refused.
func TestConcatAttempts(t *testing.T) {
	clk := newFakeClock()
	var traces []AttemptTrace
	for k := range 2 {
		recs := []*Recorder{NewRecorder(Options{Rank: 0, Now: clk.Now}), NewRecorder(Options{Rank: 1, Now: clk.Now})}
		var snaps []Snapshot
		for _, r := range recs {
			clk.Advance(time.Millisecond)
			r.Begin("step").End()
			snaps = append(snaps, r.Snapshot())
		}
		var buf bytes.Buffer
		if err := WriteChrome(&buf, recs[0].Origin(), snaps...); err != nil {
			t.Fatal(err)
		}
		traces = append(traces, AttemptTrace{Attempt: k, JSON: buf.Bytes()})
		clk.Advance(1500*time.Millisecond - 2*time.Millisecond)
	}
	var out bytes.Buffer
	if err := ConcatAttempts(&out, traces); err != nil {
		t.Fatal(err)
	}
	f := parseChrome(t, out.Bytes())
	names := map[int]string{}
	var steps []chromeEvent
	for _, e := range f.TraceEvents {
		if e.Name == "process_name" {
			names[*e.Pid], _ = e.Args["name"].(string)
		}
		if e.Ph == "X" {
			steps = append(steps, e)
		}
	}
	want := map[int]string{0: "attempt 0, rank 0", 1: "attempt 0, rank 1", 1000: "attempt 1, rank 0", 1001: "attempt 1, rank 1"}
	for pid, n := range want {
		if names[pid] != n {
			t.Errorf("process %d named %q, want %q (all: %v)", pid, names[pid], n, names)
		}
	}
	if len(steps) != 4 {
		t.Fatalf("%d spans, want 4", len(steps))
	}
	// Each attempt's rank 0 stepped 1 ms after its start, its rank 1 1 ms
	// later; attempt 1 began 1.5 s after attempt 0.
	for i, wantTs := range []float64{1000, 2000, 1.5e6 + 1000, 1.5e6 + 2000} {
		if got := *steps[i].Ts; got < wantTs-1 || got > wantTs+1 || *steps[i].Pid != []int{0, 1, 1000, 1001}[i] {
			t.Errorf("span %d at %v µs of process %d, want %v µs", i, got, *steps[i].Pid, wantTs)
		}
	}
	var o struct {
		OtherData struct{ Origin string } `json:"otherData"`
	}
	json.Unmarshal(out.Bytes(), &o)
	if o.OtherData.Origin == "" {
		t.Error("no origin in the concatenated trace")
	}
	if err := ConcatAttempts(&out, []AttemptTrace{{Attempt: 3, JSON: []byte(`{"traceEvents":[]}`)}}); err == nil || !strings.Contains(err.Error(), "attempt 3") {
		t.Errorf("a trace without an origin: %v", err)
	}
}
