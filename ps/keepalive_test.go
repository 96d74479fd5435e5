package ps

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
)

// Keep-alives, on a fake clock: the server's (Tick) and the worker's
// (serverWait, and a Worker over fakeNet).

// TestServerSendsKeepAlives: a held request gets a keep-alive exactly every
// Timeout/4 of fake time until it is served; the answer says how long it was
// held.
func TestServerSendsKeepAlives(t *testing.T) {
	cfg := Config{Servers: 1, Consistency: BSP, LR: 0.5, Timeout: 200 * ms}
	x := newSim(t, cfg, 0, 3, make([]float32, 4))
	x.hello(0, 1, 2)
	x.push(1, 0, 1, 1*ms)
	if rs := x.step(1, x.pull(1, 1), 2*ms); len(rs) != 0 { // held: rank 2 has not pushed step 0
		t.Fatalf("held pull answered: %v", rs)
	}
	for _, tc := range []struct {
		at    time.Duration
		waits int
	}{
		{2 * ms, 0},
		{52*ms - 1, 0},
		{52 * ms, 1}, // Timeout/4 after the request arrived
		{53 * ms, 0},
		{102*ms - 1, 0},
		{102 * ms, 1},
		{149 * ms, 0},
	} {
		rs, err := x.tick(tc.at)
		if err != nil {
			t.Fatalf("tick at %v: %v", tc.at, err)
		}
		if len(rs) != tc.waits || (tc.waits == 1 && (rs[0].to != 1 || rs[0].m.kind != kindWait)) {
			t.Errorf("tick at %v: %v, want %d keep-alive(s) to rank 1", tc.at, rs, tc.waits)
		}
	}
	// Rank 2's push completes round 0: its ok, then rank 1's pull is served.
	vals := make([]float32, 4)
	for i := range vals {
		vals[i] = 3
	}
	rs := x.step(2, appendPushRange(nil, 0, Float32, 0, vals), 150*ms)
	if len(rs) != 2 || rs[0].to != 2 || rs[0].m.kind != kindOK || rs[1].to != 1 || rs[1].m.kind != kindValues {
		t.Fatalf("replies %v, want ok to 2, values to 1", rs)
	}
	if m := rs[1].m; m.staleness != 0 || m.held != 148*ms {
		t.Errorf("pull answered with staleness %d, held %v; want 0, 148ms", m.staleness, m.held)
	}
	// The round averaged 1 and 3: w = 0 - 0.5*2.
	assertClose(t, "weights", rs[1].m.floats(), []float32{-1, -1, -1, -1}, 0, 0)
	if rs, _ := x.tick(400 * ms); len(only(rs, kindWait)) != 0 {
		t.Errorf("keep-alives with nothing held: %v", rs)
	}
}

// TestServerWaitBookkeeping works a worker's wait for one server by hand:
// keep-alives move the deadline, errors become *ServerError.
func TestServerWaitBookkeeping(t *testing.T) {
	t0 := time.Unix(100, 0)
	sw := serverWait{server: 1, limit: 80 * ms, last: t0}
	if sw.expired(t0.Add(80*ms - 1)) {
		t.Error("expired before the limit")
	}
	if !sw.expired(t0.Add(80 * ms)) {
		t.Error("not expired at the limit")
	}
	if _, keep, err := sw.receive(appendWait(nil), t0.Add(70*ms)); !keep || err != nil {
		t.Fatalf("keep-alive: keep %v, err %v", keep, err)
	}
	if sw.expired(t0.Add(149*ms)) || !sw.expired(t0.Add(150*ms)) {
		t.Error("a keep-alive at 70ms should move the deadline to 150ms")
	}
	if sw.silence(t0.Add(100*ms)) != 30*ms {
		t.Errorf("silence %v, want 30ms", sw.silence(t0.Add(100*ms)))
	}
	m, keep, err := sw.receive(appendOK(nil, 5*ms), t0.Add(100*ms))
	if keep || err != nil || m.kind != kindOK || m.held != 5*ms {
		t.Errorf("ok reply: %v %v %v", m.kind, keep, err)
	}
	for _, tc := range []struct {
		code uint8
		want error
	}{{codeRejected, ErrRejected}, {codeMissing, ErrWorkerMissing}} {
		_, _, err := sw.receive(appendError(nil, tc.code, "why"), t0)
		var se *ServerError
		if !errors.As(err, &se) || !errors.Is(err, tc.want) || se.Server != 1 || se.Msg != "why" {
			t.Errorf("error reply code %d: %v, want a *ServerError from rank 1 wrapping %v", tc.code, err, tc.want)
		}
	}
	if _, _, err := sw.receive([]byte{0xee}, t0); !errors.Is(err, ErrBadMessage) || !strings.Contains(err.Error(), "server rank 1") {
		t.Errorf("garbage: %v", err)
	}
}

// keepAliveServer scripts a server that holds the worker's hello, sends a
// keep-alive every `every` until `until`, and answers ok at `answer` (never,
// if answer < 0).
func keepAliveServer(n *fakeNet, every, until, answer time.Duration) {
	var sent time.Duration
	helloAt := time.Duration(-1)
	n.onSend = func(_ int, _ []byte, now time.Duration) [][]byte {
		helloAt, sent = now, now
		return nil
	}
	n.onTick = func(now time.Duration) map[int][][]byte {
		if helloAt < 0 {
			return nil
		}
		if answer >= 0 && now >= helloAt+answer {
			helloAt = -1
			return map[int][][]byte{0: {appendOK(nil, answer)}}
		}
		if now <= helloAt+until && now-sent >= every {
			sent = now
			return map[int][][]byte{0: {appendWait(nil)}}
		}
		return nil
	}
}

// TestWorkerHonoursKeepAlives: a worker keeps waiting past 2*Timeout as long
// as its server sends keep-alives, and gives up exactly 2*Timeout after the
// last one when they stop.
func TestWorkerHonoursKeepAlives(t *testing.T) {
	const timeout = 40 * ms
	t.Run("kept alive", func(t *testing.T) {
		clk := newFakeClock()
		n := newFakeNet(1, 2, clk)
		keepAliveServer(n, 20*ms, time.Hour, 200*ms) // 5 Timeouts
		if _, err := NewWorker(n, Config{Servers: 1, Timeout: timeout, Now: clk.Now}, 4); err != nil {
			t.Fatal(err)
		}
		if n.now() != 200*ms {
			t.Errorf("NewWorker returned at %v, want 200ms (the answer)", n.now())
		}
	})
	t.Run("keep-alives stop", func(t *testing.T) {
		clk := newFakeClock()
		n := newFakeNet(1, 2, clk)
		keepAliveServer(n, 20*ms, 100*ms, -1) // the last keep-alive at 100ms
		_, err := NewWorker(n, Config{Servers: 1, Timeout: timeout, Now: clk.Now}, 4)
		if !errors.Is(err, collectives.ErrTimeout) || !strings.Contains(err.Error(), "no reply from server rank 0 for 80ms") {
			t.Fatalf("err = %v, want a timeout naming server rank 0 after 80ms", err)
		}
		if n.now() != 180*ms {
			t.Errorf("gave up at %v, want 180ms (last keep-alive + 2*Timeout)", n.now())
		}
	})
}

// TestWorkerOverStateMachine: a Worker over fakeNet against a Server state
// machine: the held pull is kept alive by the server's ticks well past
// 2*Timeout, and answered when the other worker (fed by hand) pushes.
func TestWorkerOverStateMachine(t *testing.T) {
	clk := newFakeClock()
	cfg := Config{Servers: 1, Consistency: BSP, LR: 1, Timeout: 40 * ms, Now: clk.Now}
	srv, err := NewServer(cfg, 0, 3, make([]float32, 2))
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNet(1, 3, clk)
	n.serveWith(srv)
	// Rank 2 is played by hand, between the server's ticks: it says hello,
	// pulls every 30ms (so that it is never silent for Timeout) and pushes
	// step 0 (gradient 4) at 500ms.
	other := 0
	tick := n.onTick
	n.onTick = func(now time.Duration) map[int][][]byte {
		var out []Outgoing
		switch {
		case other == 0:
			out = srv.Step(2, appendHello(nil, helloFor(cfg.withDefaults(), 2)), now)
			other++
		case other == 1 && now%(30*ms) == 0 && now < 500*ms:
			out = srv.Step(2, appendPullRange(nil, 0, 0, 2), now)
		case other == 1 && now >= 500*ms:
			out = srv.Step(2, appendPushRange(nil, 0, Float32, 0, []float32{4, 4}), now)
			other++
		}
		var mine [][]byte
		for _, o := range out {
			if o.To == 1 {
				mine = append(mine, append([]byte(nil), o.Msg...))
			}
		}
		all := tick(now)
		all[0] = append(mine, all[0]...)
		return all
	}
	w, err := NewWorker(n, cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	model := make([]float32, 2)
	if err := w.Pull(model); err != nil {
		t.Fatal(err)
	}
	if err := w.Push([]float32{2, 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.Pull(model); err != nil { // held until 500ms
		t.Fatal(err)
	}
	if n.now() != 500*ms {
		t.Errorf("pull for step 1 answered at %v, want 500ms", n.now())
	}
	assertClose(t, "model", model, []float32{-3, -3}, 0, 0) // mean of 2 and 4, lr 1
	if st := w.Stats(); st.HeldSeconds < 0.45 || st.WaitSeconds < 0.45 {
		t.Errorf("held %.3fs, waited %.3fs; want about 0.5s each", st.HeldSeconds, st.WaitSeconds)
	}
}
