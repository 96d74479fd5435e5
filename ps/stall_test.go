package ps

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestServerStallWarnings: on a fake clock, a BSP server whose workers 1
// and 2 are held for clock 1 while worker 3 has not pushed for clock 0
// names rank 3, the clock and the held ranks once every StallWarn, and
// stops when the round completes.
func TestServerStallWarnings(t *testing.T) {
	cfg := Config{Servers: 1, Consistency: BSP, LR: 0.5, Timeout: time.Second, StallWarn: 100 * ms}
	x := newSim(t, cfg, 0, 4, make([]float32, 4))
	x.hello(0, 1, 2, 3)
	x.push(1, 0, 1, 5*ms)
	x.push(2, 0, 1, 6*ms)
	if rs := x.step(1, x.pull(1, 1), 10*ms); len(rs) != 0 {
		t.Fatalf("held pull answered: %v", rs)
	}
	if rs := x.step(2, x.pull(2, 1), 20*ms); len(rs) != 0 {
		t.Fatalf("held pull answered: %v", rs)
	}
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{
		{50 * ms, 0},
		{110*ms - 1, 0},
		{110 * ms, 1}, // StallWarn after the oldest held request (10ms)
		{150 * ms, 0},
		{209 * ms, 0},
		{230 * ms, 1}, // the second interval, reported once though checked late
		{240 * ms, 0},
	} {
		if _, err := x.tick(tc.at); err != nil {
			t.Fatalf("tick at %v: %v", tc.at, err)
		}
		ws := x.s.Warnings()
		if len(ws) != tc.want {
			t.Fatalf("tick at %v: warnings %q, want %d", tc.at, ws, tc.want)
		}
		for _, w := range ws {
			for _, part := range []string{"ps server rank 0", "bsp", "worker ranks [1 2] held", "at clock 0", "rank 3 (has not pushed for clock 0"} {
				if !strings.Contains(w, part) {
					t.Errorf("tick at %v: warning %q lacks %q", tc.at, w, part)
				}
			}
		}
	}
	// Rank 3 pushes: the round completes, the held pulls are served, and
	// the stall is over.
	x.step(3, appendPushRange(nil, 0, Float32, 0, []float32{1, 1, 1, 1}), 250*ms)
	for _, at := range []time.Duration{300 * ms, 500 * ms} {
		if _, err := x.tick(at); err != nil {
			t.Fatal(err)
		}
		if ws := x.s.Warnings(); len(ws) != 0 {
			t.Fatalf("tick at %v after the round: %q", at, ws)
		}
	}
}

// TestServerStallWarningsOff: StallWarn zero reports nothing, and ASP,
// which holds nobody, never reports.
func TestServerStallWarningsOff(t *testing.T) {
	for _, cfg := range []Config{
		{Servers: 1, Consistency: BSP, Timeout: time.Second},
		{Servers: 1, Consistency: ASP, Timeout: time.Second, StallWarn: 10 * ms},
	} {
		x := newSim(t, cfg, 0, 3, make([]float32, 2))
		x.hello(0, 1, 2)
		x.push(1, 0, 1, 1*ms)
		x.step(1, x.pull(1, 1), 2*ms)
		for at := 10 * ms; at < 500*ms; at += 10 * ms {
			if _, err := x.tick(at); err != nil {
				t.Fatal(err)
			}
		}
		if ws := x.s.Warnings(); len(ws) != 0 {
			t.Errorf("%v, StallWarn %v: %q", cfg.Consistency, cfg.StallWarn, ws)
		}
	}
}

// TestServerWaitStalled: a worker warns about a silent server once per
// StallWarn of silence, never while keep-alives come, and never with
// StallWarn zero.
func TestServerWaitStalled(t *testing.T) {
	t0 := time.Unix(100, 0)
	sw := serverWait{server: 0, limit: time.Second, last: t0}
	const warn = 100 * ms
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{
		{50 * ms, false}, {100*ms - 1, false}, {100 * ms, true}, {150 * ms, false},
		{250 * ms, true}, // late: one warning for the second interval
		{299 * ms, false}, {300 * ms, true},
	} {
		if got := sw.stalled(t0.Add(tc.at), warn); got != tc.want {
			t.Fatalf("stalled at %v = %v, want %v", tc.at, got, tc.want)
		}
	}
	// A keep-alive at 350ms: silence starts again.
	if _, keep, err := sw.receive(appendWait(nil), t0.Add(350*ms)); !keep || err != nil {
		t.Fatal(keep, err)
	}
	if sw.stalled(t0.Add(440*ms), warn) || !sw.stalled(t0.Add(450*ms), warn) {
		t.Error("after a keep-alive at 350ms: want the next warning at 450ms")
	}
	if sw.stalled(t0.Add(time.Hour), 0) {
		t.Error("warned with StallWarn 0")
	}
}

// TestBeat: held workers hear from their server twice per StallWarn when
// that is sooner than Timeout/4.
func TestBeat(t *testing.T) {
	for _, tc := range []struct {
		timeout, warn, want time.Duration
	}{
		{4 * time.Second, 0, time.Second},
		{4 * time.Second, 10 * time.Second, time.Second},
		{5 * time.Minute, time.Minute, 30 * time.Second},
	} {
		if got := (Config{Timeout: tc.timeout, StallWarn: tc.warn}).beat(); got != tc.want {
			t.Errorf("timeout %v warn %v: beat %v, want %v", tc.timeout, tc.warn, got, tc.want)
		}
	}
}

// TestASPSilentWorkerNamed: under ASP nobody waits on a worker, so a
// stopped one holds nobody; the server warns about it once every StallWarn
// of silence while the others push on, and gives up on it, naming it,
// after Timeout, without waiting for the others to finish.
func TestASPSilentWorkerNamed(t *testing.T) {
	cfg := Config{Servers: 1, Consistency: ASP, Timeout: 200 * ms, StallWarn: 50 * ms}
	x := newSim(t, cfg, 0, 4, make([]float32, 4))
	x.hello(0, 1, 2, 3)
	x.push(3, 0, 1, 1*ms) // then rank 3 stops
	var warns []string
	var merr *MissingError
	for at, c := 5*ms, 0; at <= 400*ms && merr == nil; at, c = at+5*ms, c+1 {
		x.push(1, c, 1, at)
		x.push(2, c, 1, at)
		_, err := x.tick(at)
		warns = append(warns, x.s.Warnings()...)
		if err != nil && !errors.As(err, &merr) {
			t.Fatal(err)
		}
		if merr != nil && at < 200*ms {
			t.Fatalf("gave up at %v, before Timeout: %v", at, merr)
		}
	}
	if merr == nil || len(merr.Missing) != 1 || merr.Missing[0].Rank != 3 || !slices.Equal(merr.Active, []int{1, 2}) {
		t.Fatalf("err %v, want rank 3 missing while ranks 1 and 2 went on", merr)
	}
	if !strings.Contains(merr.Error(), "rank 3 (clock 1, silent ") || !strings.Contains(merr.Error(), "ranks [1 2] went on without them") {
		t.Errorf("error %q does not name rank 3 and the ranks that went on", merr)
	}
	// Warned at 50, 100, 150 and 200 ms of silence (the last with the error).
	if len(warns) != 4 {
		t.Fatalf("warnings %q, want 4 (one per StallWarn of silence)", warns)
	}
	for _, w := range warns {
		if !strings.Contains(w, "worker rank 3 silent for ") || !strings.Contains(w, "while worker ranks [1 2] are active") {
			t.Errorf("warning %q does not name rank 3 and the active ranks", w)
		}
	}
}
