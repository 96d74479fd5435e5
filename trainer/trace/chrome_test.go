package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// chromeEvent is the part of a trace event that chrome://tracing and
// Perfetto need.
type chromeEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat"`
	Ph   string         `json:"ph"`
	Ts   *float64       `json:"ts"`
	Dur  *float64       `json:"dur"`
	Pid  *int           `json:"pid"`
	Tid  *int           `json:"tid"`
	Args map[string]any `json:"args"`
}

type chromeFile struct {
	TraceEvents     []chromeEvent `json:"traceEvents"`
	DisplayTimeUnit string        `json:"displayTimeUnit"`
}

func parseChrome(t *testing.T, b []byte) chromeFile {
	t.Helper()
	var f chromeFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("trace is not JSON: %v\n%s", err, b)
	}
	return f
}

// TestWriteChrome writes two ranks' spans (one rank shifted onto the other's
// clock, one that dropped spans) and checks every event Chrome needs.
func TestWriteChrome(t *testing.T) {
	clk := newFakeClock()
	r0 := NewRecorder(Options{Rank: 0, Now: clk.Now})
	r1 := NewRecorder(Options{Rank: 1, Capacity: 2, Now: clk.Now})

	clk.Advance(1500 * time.Nanosecond)
	s := r0.Begin("Gemm").Cat(Compute).Arg("m", 64).Arg("n", 256)
	clk.Advance(2*time.Millisecond + 3*time.Nanosecond)
	s.End()
	r0.Begin(`odd "name"` + "\n<tab>").Cat(PS).Err(errors.New(`bad "key"`)).End()

	comm := OnLane(r1, LaneComm)
	for _, name := range []string{"lost", "Isend", "Irecv.Wait"} {
		tr := Tracer(r1)
		if name == "Irecv.Wait" {
			tr = comm
		}
		sp := tr.Begin(name).Cat(Collective).Bytes(4096)
		clk.Advance(10 * time.Microsecond)
		sp.End()
	}
	snap1 := r1.Snapshot()
	snap1.Shift(time.Millisecond) // rank 1's clock is 1 ms behind

	var buf bytes.Buffer
	if err := WriteChrome(&buf, r0.Origin(), r0.Snapshot(), snap1); err != nil {
		t.Fatal(err)
	}
	f := parseChrome(t, buf.Bytes())
	if f.DisplayTimeUnit != "ms" {
		t.Errorf("displayTimeUnit %q", f.DisplayTimeUnit)
	}

	var spans []chromeEvent
	meta := map[[2]int]map[string]any{} // (pid, tid) → name → args
	for _, e := range f.TraceEvents {
		if e.Pid == nil {
			t.Fatalf("event without pid: %+v", e)
		}
		switch e.Ph {
		case "X":
			if e.Ts == nil || e.Dur == nil || e.Tid == nil || e.Name == "" || e.Cat == "" {
				t.Fatalf("complete event lacks a field: %+v", e)
			}
			spans = append(spans, e)
		case "M":
			tid := -1
			if e.Tid != nil {
				tid = *e.Tid
			}
			k := [2]int{*e.Pid, tid}
			if meta[k] == nil {
				meta[k] = map[string]any{}
			}
			meta[k][e.Name] = e.Args
		default:
			t.Fatalf("unexpected phase %q", e.Ph)
		}
	}

	want := []struct {
		name, cat string
		ts, dur   float64
		pid, tid  int
	}{
		{"Gemm", "compute", 1.5, 2000.003, 0, int(LaneStep)},
		{`odd "name"` + "\n<tab>", "ps", 2001.503, 0, 0, int(LaneStep)},
		{"Isend", "collective", 3011.503, 10, 1, int(LaneStep)},
		{"Irecv.Wait", "collective", 3021.503, 10, 1, int(LaneComm)},
	}
	if len(spans) != len(want) {
		t.Fatalf("%d spans, want %d: %+v", len(spans), len(want), spans)
	}
	for i, w := range want {
		e := spans[i]
		if e.Name != w.name || e.Cat != w.cat || *e.Ts != w.ts || *e.Dur != w.dur || *e.Pid != w.pid || *e.Tid != w.tid {
			t.Errorf("span %d = %q %s ts %v dur %v pid %d tid %d; want %q %s ts %v dur %v pid %d tid %d",
				i, e.Name, e.Cat, *e.Ts, *e.Dur, *e.Pid, *e.Tid, w.name, w.cat, w.ts, w.dur, w.pid, w.tid)
		}
	}
	if a := spans[0].Args; a["m"] != 64.0 || a["n"] != 256.0 || len(a) != 2 {
		t.Errorf("Gemm args %v", a)
	}
	if a := spans[1].Args; a["error"] != `bad "key"` || len(a) != 1 {
		t.Errorf("error args %v", a)
	}
	if a := spans[2].Args; a["bytes"] != 4096.0 {
		t.Errorf("Isend args %v", a)
	}

	for pid, name := range []string{"rank 0", "rank 1"} {
		if got := meta[[2]int{pid, -1}]["process_name"]; got.(map[string]any)["name"] != name {
			t.Errorf("pid %d process_name %v, want %q", pid, got, name)
		}
	}
	if got, ok := meta[[2]int{1, -1}]["process_labels"]; !ok || got.(map[string]any)["labels"] != "dropped the 1 oldest spans (recorder full)" {
		t.Errorf("rank 1's label %v, want the dropped count", got)
	}
	if _, ok := meta[[2]int{0, -1}]["process_labels"]; ok {
		t.Error("rank 0 dropped nothing but has a label")
	}
	for _, k := range [][2]int{{0, int(LaneStep)}, {1, int(LaneStep)}, {1, int(LaneComm)}} {
		want := Lane(k[1]).String()
		if got := meta[k]["thread_name"]; got == nil || got.(map[string]any)["name"] != want {
			t.Errorf("lane %v named %v, want %q", k, got, want)
		}
	}
	if _, ok := meta[[2]int{0, int(LaneComm)}]; ok {
		t.Error("rank 0 has a communication lane but no spans on it")
	}
}

func TestWriteChromeEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := NewRecorder(Options{}).WriteChrome(&buf); err != nil {
		t.Fatal(err)
	}
	f := parseChrome(t, buf.Bytes())
	for _, e := range f.TraceEvents {
		if e.Ph != "M" {
			t.Errorf("an empty recorder wrote %+v", e)
		}
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteChromeReportsWriteErrors(t *testing.T) {
	r := NewRecorder(Options{})
	for range 10000 {
		r.Begin("x").End()
	}
	if err := r.WriteChrome(failWriter{}); err == nil {
		t.Fatal("a failing writer gave no error")
	}
}
