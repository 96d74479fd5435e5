package trace

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"time"
)

// WriteChrome writes snapshots as Chrome trace-event JSON, the format
// chrome://tracing and Perfetto (ui.perfetto.dev) open: an object
// {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {"origin":
// origin in RFC 3339, UTC}} in which every span is a
// complete event (ph "X") with ts and dur in microseconds since origin,
// pid the rank, tid the span's Lane (the goroutine role that ran it: step
// loop, communication, server; named by metadata events) and cat its
// Category. Arguments and errors go into the event's args.
//
// Snapshots from several ranks, each on a common clock (Snapshot.Shift),
// merge by passing them together. A snapshot that dropped spans says so in
// its process's label.
func WriteChrome(w io.Writer, origin time.Time, snaps ...Snapshot) error {
	bw := bufio.NewWriter(w)
	cw := chromeWriter{w: bw}
	bw.WriteString(`{"displayTimeUnit":"ms","otherData":{"origin":`)
	bw.Write(appendString(nil, origin.UTC().Format(time.RFC3339Nano)))
	bw.WriteString(`},"traceEvents":[`)
	for _, s := range snaps {
		cw.metadata(s)
	}
	for _, s := range snaps {
		for i := range s.Spans {
			cw.span(&s.Spans[i], origin)
		}
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// WriteChrome writes the Recorder's spans as Chrome trace-event JSON, with
// times counted from its Origin.
func (r *Recorder) WriteChrome(w io.Writer) error {
	return WriteChrome(w, r.origin, r.Snapshot())
}

type chromeWriter struct {
	w     *bufio.Writer
	n     int
	field []byte
}

// begin starts an event object; the caller appends fields and '}'.
func (c *chromeWriter) begin() []byte {
	b := c.field[:0]
	if c.n > 0 {
		b = append(b, ',')
	}
	c.n++
	return append(b, "\n{"...)
}

func (c *chromeWriter) end(b []byte) {
	b = append(b, '}')
	c.w.Write(b)
	c.field = b
}

// metadata names a rank's process and its lanes (threads), in lane order.
func (c *chromeWriter) metadata(s Snapshot) {
	label := "rank " + strconv.Itoa(s.Rank)
	c.meta(s.Rank, -1, "process_name", "name", label)
	c.metaInt(s.Rank, -1, "process_sort_index", s.Rank)
	if s.Dropped > 0 {
		c.meta(s.Rank, -1, "process_labels", "labels",
			"dropped the "+strconv.FormatUint(s.Dropped, 10)+" oldest spans (recorder full)")
	}
	var used [256]bool
	for i := range s.Spans {
		used[s.Spans[i].Lane] = true
	}
	for lane, u := range used {
		if u {
			c.meta(s.Rank, lane, "thread_name", "name", Lane(lane).String())
			c.metaInt(s.Rank, lane, "thread_sort_index", lane)
		}
	}
}

func (c *chromeWriter) metaHead(pid, tid int, name string) []byte {
	b := c.begin()
	b = append(b, `"name":`...)
	b = appendString(b, name)
	b = append(b, `,"ph":"M","pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	if tid >= 0 {
		b = append(b, `,"tid":`...)
		b = strconv.AppendInt(b, int64(tid), 10)
	}
	return b
}

func (c *chromeWriter) meta(pid, tid int, name, key, val string) {
	b := c.metaHead(pid, tid, name)
	b = append(b, `,"args":{`...)
	b = appendString(b, key)
	b = append(b, ':')
	b = appendString(b, val)
	c.end(append(b, '}'))
}

func (c *chromeWriter) metaInt(pid, tid int, name string, v int) {
	b := c.metaHead(pid, tid, name)
	b = append(b, `,"args":{"sort_index":`...)
	b = strconv.AppendInt(b, int64(v), 10)
	c.end(append(b, '}'))
}

func (c *chromeWriter) span(r *Record, origin time.Time) {
	b := c.begin()
	b = append(b, `"name":`...)
	b = appendString(b, r.Name)
	b = append(b, `,"cat":`...)
	b = appendString(b, r.Cat.String())
	b = append(b, `,"ph":"X","ts":`...)
	b = appendMicros(b, r.Start.Sub(origin))
	b = append(b, `,"dur":`...)
	b = appendMicros(b, r.Duration())
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(r.Rank), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(r.Lane), 10)
	if len(r.Args) > 0 || r.Err != "" {
		b = append(b, `,"args":{`...)
		for i, a := range r.Args {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, a.Key)
			b = append(b, ':')
			b = strconv.AppendInt(b, a.Value, 10)
		}
		if r.Err != "" {
			if len(r.Args) > 0 {
				b = append(b, ',')
			}
			b = append(b, `"error":`...)
			b = appendString(b, r.Err)
		}
		b = append(b, '}')
	}
	c.end(b)
}

// appendMicros writes d in microseconds with nanosecond precision.
func appendMicros(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, float64(d)/1e3, 'f', 3, 64)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
