package trace

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
)

// TestEstimateOffset: a remote clock 7 ms ahead, ping-pongs with one-way
// delays that differ each way. The estimate is the minimum-RTT sample's,
// off by exactly half its delay asymmetry, and within RTT/2 of the truth.
func TestEstimateOffset(t *testing.T) {
	const theta = 7 * time.Millisecond
	ref := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	type delays struct{ fwd, back time.Duration }
	ds := []delays{
		{5 * time.Millisecond, 1 * time.Millisecond},     // rtt 6 ms, error +2 ms
		{300 * time.Microsecond, 900 * time.Microsecond}, // rtt 1.2 ms, error −300 µs: the one
		{40 * time.Millisecond, 100 * time.Microsecond},  // a queued ping: error +20 ms
		{2 * time.Millisecond, 2 * time.Millisecond},     // symmetric but slower
	}
	var samples []ClockSample
	for _, d := range ds {
		sent := ref
		remote := sent.Add(d.fwd).Add(theta) // remote clock = reference clock + theta
		recv := sent.Add(d.fwd + d.back)
		samples = append(samples, ClockSample{Sent: sent, Remote: remote, Received: recv})
		ref = recv.Add(time.Millisecond)
	}
	off, rtt, ok := EstimateOffset(samples)
	if !ok {
		t.Fatal("no estimate from four samples")
	}
	if rtt != 1200*time.Microsecond {
		t.Errorf("rtt %v, want the smallest, 1.2ms", rtt)
	}
	if want := theta - 300*time.Microsecond; off != want {
		t.Errorf("offset %v, want %v (theta + (fwd−back)/2 of the min-RTT sample)", off, want)
	}
	if err := (off - theta).Abs(); err > rtt/2 {
		t.Errorf("error %v above rtt/2 = %v", err, rtt/2)
	}
	// Every sample's own estimate is within its RTT/2 of the truth.
	for i, s := range samples {
		if err := (s.Offset() - theta).Abs(); err > s.RTT()/2 {
			t.Errorf("sample %d: error %v > rtt/2 %v", i, err, s.RTT()/2)
		}
	}

	if _, _, ok := EstimateOffset(nil); ok {
		t.Error("an estimate from no samples")
	}
	// A sample whose clock went backwards (negative RTT) is ignored.
	bad := ClockSample{Sent: ref, Remote: ref, Received: ref.Add(-time.Second)}
	off, _, ok = EstimateOffset([]ClockSample{bad, samples[3]})
	if !ok || off != theta {
		t.Errorf("with a backwards sample: %v %v, want %v true", off, ok, theta)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	clk := newFakeClock()
	r := NewRecorder(Options{Rank: 2, Capacity: 2, Now: clk.Now})
	for i, name := range []string{"dropped", "pull", "answer"} {
		tr := Tracer(r)
		if i == 2 {
			tr = OnLane(r, LaneServer)
		}
		sp := tr.Begin(name).Cat(PS).Arg("staleness", 3)
		clk.Advance(1500 * time.Nanosecond)
		sp.Err(nil).End()
	}
	want := r.Snapshot()
	b, err := EncodeSnapshot(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rank != 2 || got.Dropped != 1 || len(got.Spans) != 2 {
		t.Fatalf("decoded rank %d dropped %d %d spans", got.Rank, got.Dropped, len(got.Spans))
	}
	for i := range want.Spans {
		w, g := want.Spans[i], got.Spans[i]
		if g.Name != w.Name || g.Cat != w.Cat || g.Lane != w.Lane || g.Rank != 2 || !g.Start.Equal(w.Start) || !g.End.Equal(w.End) {
			t.Errorf("span %d: %+v, want %+v", i, g, w)
		}
		if v, _ := g.Arg("staleness"); v != 3 {
			t.Errorf("span %d lost its argument: %v", i, g.Args)
		}
	}
	if got.Spans[1].Lane != LaneServer {
		t.Errorf("lane %v, want server", got.Spans[1].Lane)
	}
	if _, err := DecodeSnapshot([]byte("{")); err == nil {
		t.Error("a broken message decoded")
	}
}

// TestMergeRanks: three in-process ranks whose clocks are skewed by 0,
// +50 ms and −30 ms measure their offsets, each records a step started
// at the same moment, and rank 0 gathers and writes one trace. The
// offsets come out at the skews, every rank's spans are shifted by
// exactly its offset, and the three steps line up in the merged JSON, one
// process per rank. The clocks are fake and stand still (the same moment
// on every rank, plus its skew): on real clocks the goroutines' steps
// began up to 10 ms apart on a loaded machine, and the test failed.
func TestMergeRanks(t *testing.T) {
	skew := []time.Duration{0, 50 * time.Millisecond, -30 * time.Millisecond}
	moment := time.Unix(1_700_000_000, 0)
	w := local.NewWorld(len(skew))
	w.SetTimeout(10 * time.Second)
	var (
		mu      sync.Mutex
		own     = make([]Snapshot, len(skew))
		merged  []Snapshot
		offsets []time.Duration
		out     bytes.Buffer
	)
	errs := w.Run(func(c *local.Comm) error {
		r := c.Rank()
		now := func() time.Time { return moment.Add(skew[r]) }
		rec := NewRecorder(Options{Rank: r, Now: now})
		offs, err := MeasureOffsets(c, now, ClockRounds)
		if err != nil {
			return err
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		sp := rec.Begin("step")
		OnLane(rec, LaneComm).Begin("allreduce").Cat(Collective).Bytes(4096).End()
		sp.End()
		snap := rec.Snapshot()
		mu.Lock()
		own[r] = rec.Snapshot()
		mu.Unlock()
		snaps, err := GatherSnapshots(c, snap, offs)
		if err != nil {
			return err
		}
		if r == 0 {
			merged, offsets = snaps, offs
			return WriteMerged(&out, rec.Origin(), snaps)
		}
		if snaps != nil || offs != nil {
			t.Errorf("rank %d got snapshots or offsets", r)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range skew {
		if offsets[r] != skew[r] {
			t.Errorf("rank %d: offset %v, skew %v", r, offsets[r], skew[r])
		}
		if merged[r].Rank != r || len(merged[r].Spans) != 2 {
			t.Fatalf("merged[%d] = rank %d with %d spans", r, merged[r].Rank, len(merged[r].Spans))
		}
		for i, s := range merged[r].Spans {
			if want := own[r].Spans[i].Start.Add(-offsets[r]); !s.Start.Equal(want) {
				t.Errorf("rank %d span %d starts at %v, want its own %v shifted by −%v", r, i, s.Start, own[r].Spans[i].Start, offsets[r])
			}
		}
	}

	f := parseChrome(t, out.Bytes())
	start := map[int]float64{}
	lanes := map[[2]int]bool{}
	for _, e := range f.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		lanes[[2]int{*e.Pid, *e.Tid}] = true
		if e.Name == "step" {
			start[*e.Pid] = *e.Ts
		}
		if *e.Ts < 0 {
			t.Errorf("event before the origin: %+v", e)
		}
	}
	if len(start) != 3 {
		t.Fatalf("steps of ranks %v, want 0, 1, 2", start)
	}
	for r := 1; r < 3; r++ {
		if d := start[r] - start[0]; d != 0 {
			t.Errorf("rank %d's step starts %.0f µs from rank 0's (skew %v): not aligned", r, d, skew[r])
		}
		if !lanes[[2]int{r, int(LaneStep)}] || !lanes[[2]int{r, int(LaneComm)}] {
			t.Errorf("rank %d lanes %v, want step loop and communication", r, lanes)
		}
	}
}
