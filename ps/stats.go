package ps

import (
	"fmt"
	"time"
)

// Histogram counts small non-negative integers: Counts[v] is how often v
// was seen.
type Histogram struct {
	Counts []int
}

// Add counts one occurrence of v (v < 0 counts as 0).
func (h *Histogram) Add(v int) {
	v = max(v, 0)
	for len(h.Counts) <= v {
		h.Counts = append(h.Counts, 0)
	}
	h.Counts[v]++
}

// Max is the largest value seen, or -1 if none.
func (h Histogram) Max() int {
	for v := len(h.Counts) - 1; v >= 0; v-- {
		if h.Counts[v] > 0 {
			return v
		}
	}
	return -1
}

// Total is the number of values seen.
func (h Histogram) Total() int {
	n := 0
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Mean is the average value seen (0 if none).
func (h Histogram) Mean() float64 {
	n, s := 0, 0
	for v, c := range h.Counts {
		n += c
		s += v * c
	}
	if n == 0 {
		return 0
	}
	return float64(s) / float64(n)
}

func (h Histogram) clone() Histogram { return Histogram{Counts: append([]int(nil), h.Counts...)} }

// WorkerStats is what a worker measured.
type WorkerStats struct {
	Rank   int
	Pulls  int // Pull and PullKeys calls completed
	Pushes int // Push and PushKeys calls completed (the worker's clock)

	// Staleness at each pull: the largest, over the servers, of the puller's
	// clock minus the slowest unfinished worker's clock when it was served.
	Staleness    Histogram
	MaxStaleness int

	Elapsed     time.Duration // since NewWorker returned
	WaitSeconds float64       // time spent inside Pull/Push/... waiting for servers
	HeldSeconds float64       // of which servers reported holding the requests (max over servers per call)

	BytesSent     int64 // all request bytes
	BytesReceived int64 // all reply bytes
	// PushBytes are the bytes of push messages as sent (after filters);
	// PushBytesUnfiltered what the same pushes would have taken without
	// filters (dense or keyed float32), so the filters' saving shows.
	PushBytes           int64
	PushBytesUnfiltered int64
}

// PullsPerSecond is Pulls over Elapsed.
func (s WorkerStats) PullsPerSecond() float64 { return perSecond(s.Pulls, s.Elapsed) }

// PushesPerSecond is Pushes over Elapsed.
func (s WorkerStats) PushesPerSecond() float64 { return perSecond(s.Pushes, s.Elapsed) }

// String is a one-line summary.
func (s WorkerStats) String() string {
	return fmt.Sprintf("worker rank %d: %d pulls, %d pushes in %v (%.1f push/s), max staleness %d (mean %.2f), waited %.3fs (held %.3fs), sent %d B (pushes %d B, %d B unfiltered)",
		s.Rank, s.Pulls, s.Pushes, s.Elapsed.Round(time.Millisecond), s.PushesPerSecond(), s.MaxStaleness,
		s.Staleness.Mean(), s.WaitSeconds, s.HeldSeconds, s.BytesSent, s.PushBytes, s.PushBytesUnfiltered)
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ServerStats is what a server measured, and its final weights.
type ServerStats struct {
	Rank  int
	Range Range // the keys this server owns

	Pushes   int // pushes applied (or, under BSP, accumulated)
	Pulls    int // pulls served
	Updates  int // optimizer steps applied (BSP: one per round)
	Rejected int // requests answered with an error
	// Rejections holds the first few rejection messages.
	Rejections []string

	// Staleness of every pull served (the puller's clock minus the slowest
	// unfinished worker's clock), and its maximum.
	Staleness    Histogram
	MaxStaleness int
	// DSSPGrants[r] counts DSSP controller decisions granting r extra
	// iterations (nil unless DSSP).
	DSSPGrants []int
	// HeldSeconds is the total time requests spent held by the controller.
	HeldSeconds float64

	Elapsed       time.Duration
	BytesReceived int64
	BytesSent     int64
	// ReplicasSent counts the copies of the range sent to the previous
	// server (replica.go), ReplicaBytes their values' bytes (not in
	// BytesSent).
	ReplicasSent int
	ReplicaBytes int64

	// Weights are the final values of Range.
	Weights []float32
}

// String is a one-line summary.
func (s ServerStats) String() string {
	return fmt.Sprintf("server rank %d %v: %d pushes, %d pulls, %d updates, %d rejected in %v, max staleness %d (mean %.2f), held %.3fs, recv %d B, sent %d B",
		s.Rank, s.Range, s.Pushes, s.Pulls, s.Updates, s.Rejected, s.Elapsed.Round(time.Millisecond),
		s.MaxStaleness, s.Staleness.Mean(), s.HeldSeconds, s.BytesReceived, s.BytesSent)
}
