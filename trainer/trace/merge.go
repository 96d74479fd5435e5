package trace

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dml-project/dml/collectives"
)

// Message tags of the clock measurement and the gather, from the
// registry's range (collectives.TagTraceBase).
const (
	TagClock  = collectives.TagTraceBase + iota // ping-pong that measures a rank's clock offset
	TagGather                                   // a rank's encoded spans, to rank 0
)

// ClockSample is one ping-pong between a reference rank and a remote one:
// the reference's clock when it sent the ping (Sent) and when the reply
// came back (Received), and the remote's clock when it answered (Remote).
type ClockSample struct {
	Sent, Remote, Received time.Time
}

// RTT is the round trip, Received − Sent.
func (s ClockSample) RTT() time.Duration { return s.Received.Sub(s.Sent) }

// Offset is the remote clock minus the reference's, assuming the remote
// answered half-way through the round trip (NTP): Remote − (Sent+Received)/2.
// Its error is at most half the difference between the two one-way delays,
// so at most RTT/2.
func (s ClockSample) Offset() time.Duration {
	return s.Remote.Sub(s.Sent) - s.RTT()/2
}

// EstimateOffset picks the sample with the smallest round trip (the one
// least disturbed by queueing, whose delays are the least asymmetric) and
// returns its offset (remote clock − reference clock) and round trip. ok is
// false when there is no sample.
func EstimateOffset(samples []ClockSample) (offset, rtt time.Duration, ok bool) {
	best := -1
	for i, s := range samples {
		if s.RTT() < 0 {
			continue // a clock that went backwards: useless
		}
		if best < 0 || s.RTT() < samples[best].RTT() {
			best = i
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	return samples[best].Offset(), samples[best].RTT(), true
}

// ClockRounds is the number of ping-pongs MeasureOffsets makes per rank.
const ClockRounds = 8

// MeasureOffsets measures every rank's clock against rank 0's with rounds
// ping-pongs each (byte messages with TagClock), rank by rank. Every rank
// of c calls it at the same point (nothing else may use c meanwhile); now is
// the clock the spans are timed with (nil: time.Now). On rank 0 it returns
// offsets[r], rank r's clock minus rank 0's (offsets[0] = 0), for
// GatherSnapshots; on the other ranks it returns nil.
func MeasureOffsets(c collectives.Comm, now func() time.Time, rounds int) ([]time.Duration, error) {
	if now == nil {
		now = time.Now
	}
	rounds = max(rounds, 1)
	collectives.EnterOp(c, "timeline clock measurement")
	var b [8]byte
	if c.Rank() != 0 {
		for range rounds {
			if _, _, _, err := c.RecvBytes(0, TagClock); err != nil {
				return nil, fmt.Errorf("clock ping from rank 0: %w", err)
			}
			binary.LittleEndian.PutUint64(b[:], uint64(now().UnixNano()))
			if err := c.SendBytes(b[:], 0, TagClock); err != nil {
				return nil, fmt.Errorf("clock pong to rank 0: %w", err)
			}
		}
		return nil, nil
	}
	offsets := make([]time.Duration, c.Size())
	samples := make([]ClockSample, rounds)
	for r := 1; r < c.Size(); r++ {
		for i := range samples {
			t0 := now()
			if err := c.SendBytes(b[:], r, TagClock); err != nil {
				return nil, fmt.Errorf("clock ping to rank %d: %w", r, err)
			}
			msg, _, _, err := c.RecvBytes(r, TagClock)
			t1 := now()
			if err != nil {
				return nil, fmt.Errorf("clock pong from rank %d: %w", r, err)
			}
			if len(msg) != 8 {
				return nil, fmt.Errorf("clock pong from rank %d: %d bytes, want 8", r, len(msg))
			}
			remote := time.Unix(0, int64(binary.LittleEndian.Uint64(msg)))
			samples[i] = ClockSample{Sent: t0, Remote: remote, Received: t1}
		}
		offsets[r], _, _ = EstimateOffset(samples)
	}
	return offsets, nil
}

// wireRecord is a Record as GatherSnapshots sends it: times in Unix
// nanoseconds of the sender's clock.
type wireRecord struct {
	N   string   `json:"n"`
	C   Category `json:"c,omitempty"`
	L   Lane     `json:"l,omitempty"`
	S   int64    `json:"s"`
	E   int64    `json:"e"`
	A   []Arg    `json:"a,omitempty"`
	Err string   `json:"x,omitempty"`
}

type wireSnapshot struct {
	Rank    int          `json:"rank"`
	Dropped uint64       `json:"dropped"`
	Spans   []wireRecord `json:"spans"`
}

// EncodeSnapshot is s as bytes (JSON, times in Unix nanoseconds), for
// DecodeSnapshot on another rank.
func EncodeSnapshot(s Snapshot) ([]byte, error) {
	w := wireSnapshot{Rank: s.Rank, Dropped: s.Dropped, Spans: make([]wireRecord, len(s.Spans))}
	for i, r := range s.Spans {
		w.Spans[i] = wireRecord{N: r.Name, C: r.Cat, L: r.Lane, S: r.Start.UnixNano(), E: r.End.UnixNano(), A: r.Args, Err: r.Err}
	}
	return json.Marshal(w)
}

// DecodeSnapshot reverses EncodeSnapshot.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	var w wireSnapshot
	if err := json.Unmarshal(b, &w); err != nil {
		return Snapshot{}, fmt.Errorf("decoding a trace snapshot: %w", err)
	}
	s := Snapshot{Rank: w.Rank, Dropped: w.Dropped, Spans: make([]Record, len(w.Spans))}
	for i, r := range w.Spans {
		s.Spans[i] = Record{Name: r.N, Cat: r.C, Lane: r.L, Rank: w.Rank,
			Start: time.Unix(0, r.S), End: time.Unix(0, r.E), Args: r.A, Err: r.Err}
	}
	return s, nil
}

// GatherSnapshots sends every rank's snapshot to rank 0 (TagGather), which
// puts each on its own clock: rank r's spans are shifted by −offsets[r]
// (offsets from MeasureOffsets). Every rank of c calls it at the same point;
// rank 0 returns the snapshots of all ranks in rank order, the others nil.
// The times of rank 0's own snapshot lose their monotonic reading, so that
// all compare by wall clock.
func GatherSnapshots(c collectives.Comm, own Snapshot, offsets []time.Duration) ([]Snapshot, error) {
	collectives.EnterOp(c, "timeline gather")
	if c.Rank() != 0 {
		b, err := EncodeSnapshot(own)
		if err != nil {
			return nil, err
		}
		if err := c.SendBytes(b, 0, TagGather); err != nil {
			return nil, fmt.Errorf("sending the trace to rank 0: %w", err)
		}
		return nil, nil
	}
	if len(offsets) != c.Size() {
		return nil, fmt.Errorf("trace gather: %d clock offsets for %d ranks", len(offsets), c.Size())
	}
	snaps := make([]Snapshot, c.Size())
	for i := range own.Spans {
		own.Spans[i].Start = own.Spans[i].Start.Round(0)
		own.Spans[i].End = own.Spans[i].End.Round(0)
	}
	snaps[0] = own
	var errs []error
	for r := 1; r < c.Size(); r++ {
		msg, _, _, err := c.RecvBytes(r, TagGather)
		if err != nil {
			errs = append(errs, fmt.Errorf("the trace of rank %d: %w", r, err))
			snaps[r] = Snapshot{Rank: r}
			continue
		}
		s, err := DecodeSnapshot(msg)
		if err != nil {
			errs = append(errs, fmt.Errorf("the trace of rank %d: %w", r, err))
			snaps[r] = Snapshot{Rank: r}
			continue
		}
		s.Shift(-offsets[r])
		snaps[r] = s
	}
	return snaps, errors.Join(errs...)
}

// WriteMerged writes snapshots gathered on one clock (GatherSnapshots) as
// one Chrome trace, times counted from origin, or from the earliest span
// when one started before it.
func WriteMerged(w io.Writer, origin time.Time, snaps []Snapshot) error {
	origin = origin.Round(0)
	for _, s := range snaps {
		for i := range s.Spans {
			if s.Spans[i].Start.Before(origin) {
				origin = s.Spans[i].Start
			}
		}
	}
	return WriteChrome(w, origin, snaps...)
}
