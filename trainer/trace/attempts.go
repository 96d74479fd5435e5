package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Timelines of a job that was restarted (dml launch): each attempt wrote
// its own Chrome trace (WriteChrome, with its origin in otherData), merged
// by its rank 0 or, where the attempt ended in a failure, one per rank.
// ConcatAttempts lays them on one time axis, so that a job's timeline
// carries on across its restarts: every event moves by its file's origin
// less the earliest one, and attempt k's rank r becomes process
// k*AttemptPIDs + r, named "attempt k, rank r" (Perfetto shows each
// attempt's ranks as their own tracks, in order).

// AttemptPIDs is how far apart two attempts' process ids are.
const AttemptPIDs = 1000

// AttemptTrace is one trace file of attempt Attempt.
type AttemptTrace struct {
	Attempt int
	JSON    []byte
}

type chromeIn struct {
	OtherData struct {
		Origin string `json:"origin"`
	} `json:"otherData"`
	TraceEvents []map[string]any `json:"traceEvents"`
}

// ConcatAttempts writes the attempts' traces as one Chrome trace. A file
// that is not a trace with an origin is an error naming its attempt.
func ConcatAttempts(w io.Writer, traces []AttemptTrace) error {
	files := make([]chromeIn, len(traces))
	origins := make([]time.Time, len(traces))
	var first time.Time
	for i, t := range traces {
		if err := json.Unmarshal(t.JSON, &files[i]); err != nil {
			return fmt.Errorf("attempt %d's timeline: %w", t.Attempt, err)
		}
		o, err := time.Parse(time.RFC3339Nano, files[i].OtherData.Origin)
		if err != nil {
			return fmt.Errorf("attempt %d's timeline: no origin (otherData.origin): %w", t.Attempt, err)
		}
		origins[i] = o
		if i == 0 || o.Before(first) {
			first = o
		}
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(`{"displayTimeUnit":"ms","otherData":{"origin":`)
	bw.Write(appendString(nil, first.UTC().Format(time.RFC3339Nano)))
	bw.WriteString(`},"traceEvents":[`)
	n := 0
	for i, f := range files {
		shift := float64(origins[i].Sub(first).Nanoseconds()) / 1e3
		k := traces[i].Attempt
		for _, e := range f.TraceEvents {
			pid, _ := e["pid"].(float64)
			e["pid"] = k*AttemptPIDs + int(pid)
			if ts, ok := e["ts"].(float64); ok {
				e["ts"] = ts + shift
			}
			if e["name"] == "process_name" && e["ph"] == "M" {
				e["args"] = map[string]any{"name": "attempt " + strconv.Itoa(k) + ", rank " + strconv.Itoa(int(pid))}
			}
			if e["name"] == "process_sort_index" && e["ph"] == "M" {
				e["args"] = map[string]any{"sort_index": k*AttemptPIDs + int(pid)}
			}
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			if n > 0 {
				bw.WriteByte(',')
			}
			bw.WriteByte('\n')
			bw.Write(b)
			n++
		}
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}
