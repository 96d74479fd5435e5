package ps

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
)

// Faults. The rules run on the Server state machine and on a Worker over
// fakeNet, on a fake clock; TestMissingWorkerEndToEnd checks the wiring
// over the local transport.

// runUntilHeld plays workers 1 and 2 (pull, push, pull, ...) from clock
// `from` at 1ms a request, and worker 3 up to its push of step deadAfter-1,
// until both live workers have a pull held. It returns the time of rank 3's
// last request and the time after the last request.
func runUntilHeld(x *sim, deadAfter int) (lastDead, now time.Duration) {
	x.t.Helper()
	now = 10 * ms
	held := map[int]bool{}
	clock := map[int]int{}
	for len(held) < 2 {
		for _, r := range []int{1, 2, 3} {
			if held[r] || (r == 3 && clock[r] == deadAfter) {
				continue
			}
			now += ms
			if rs := x.step(r, x.pull(r, clock[r]), now); len(rs) == 0 {
				held[r] = true
				if r == 3 {
					x.t.Fatalf("rank 3 was held at clock %d", clock[r])
				}
				continue
			}
			if r == 3 {
				lastDead = now
			}
			now += ms
			x.push(r, clock[r], 1, now)
			if r == 3 {
				lastDead = now
			}
			clock[r]++
			if clock[r] > 50 {
				x.t.Fatalf("nobody was held after 50 steps")
			}
		}
	}
	return lastDead, now
}

// TestMissingWorkerDetected: under BSP and SSP a worker that stops (no
// Done) while others wait on it is reported exactly when it has been silent
// for more than Timeout of fake time, by rank and clock; a request just
// before the deadline keeps it alive. Every unfinished worker is told.
func TestMissingWorkerDetected(t *testing.T) {
	const timeout, deadAfter = 300 * ms, 2
	for _, cons := range []Consistency{BSP, SSP} {
		for _, lateRequest := range []bool{false, true} {
			name := cons.String() + "/silent"
			if lateRequest {
				name = cons.String() + "/request just before the deadline"
			}
			t.Run(name, func(t *testing.T) {
				cfg := Config{Servers: 1, Consistency: cons, Staleness: 1, Timeout: timeout}
				x := newSim(t, cfg, 0, 4, make([]float32, 5))
				x.hello(10*ms, 1, 2, 3)
				last, now := runUntilHeld(x, deadAfter)
				if now >= last+timeout {
					t.Fatalf("setup too slow: %v", now)
				}
				if lateRequest { // rank 3 pulls (it may: it is the slowest) 1ns before the deadline
					last += timeout - 1
					x.call(3, x.pull(3, deadAfter), last, kindValues)
				}
				for _, at := range []time.Duration{now, last + timeout/2, last + timeout} {
					if rs, err := x.tick(at); err != nil || len(only(rs, kindError)) > 0 {
						t.Fatalf("tick at %v (rank 3 last heard at %v): %v, %v; want no verdict", at, last, rs, err)
					}
				}
				rs, err := x.tick(last + timeout + 1)
				var merr *MissingError
				if !errors.As(err, &merr) || !errors.Is(err, ErrWorkerMissing) {
					t.Fatalf("tick 1ns after the deadline: err = %v, want a *MissingError", err)
				}
				if len(merr.Missing) != 1 || merr.Missing[0] != (MissingWorker{Rank: 3, Clock: deadAfter, Silent: timeout + 1, Hello: true}) {
					t.Errorf("missing = %+v, want rank 3 at clock %d silent %v", merr.Missing, deadAfter, timeout+1)
				}
				if len(merr.Held) != 2 || merr.Held[0] != 1 || merr.Held[1] != 2 {
					t.Errorf("held = %v, want [1 2]", merr.Held)
				}
				if !strings.Contains(merr.Error(), "rank 3 (clock 2, silent 300ms)") || !strings.Contains(merr.Error(), "ranks [1 2] were waiting") {
					t.Errorf("message %q", merr)
				}
				errs := only(rs, kindError)
				if len(errs) != 3 {
					t.Fatalf("error replies %v, want one to each of ranks 1, 2, 3", rs)
				}
				for i, r := range errs {
					if r.to != i+1 || r.m.code != codeMissing || r.m.text != merr.Error() {
						t.Errorf("reply %d: %v code %d, want the missing error to rank %d", i, r, r.m.code, i+1)
					}
				}
			})
		}
	}
}

// TestOnlySlowestCountAsMissing: while workers are held, a silent worker
// ahead of the slowest is not reported (it holds nobody back); the silent
// slowest one is.
func TestOnlySlowestCountAsMissing(t *testing.T) {
	cfg := Config{Servers: 1, Consistency: BSP, Timeout: 100 * ms}
	x := newSim(t, cfg, 0, 4, make([]float32, 3))
	x.hello(0, 1, 2, 3)
	x.push(1, 0, 1, 1*ms)
	if rs := x.step(1, x.pull(1, 1), 2*ms); len(rs) != 0 {
		t.Fatalf("pull not held: %v", rs)
	}
	x.push(2, 0, 1, 3*ms) // rank 2 pushed step 0 and goes quiet; rank 3 never pushes
	_, err := x.tick(time.Second)
	var merr *MissingError
	if !errors.As(err, &merr) || len(merr.Missing) != 1 || merr.Missing[0].Rank != 3 || merr.Missing[0].Clock != 0 {
		t.Fatalf("err = %v, want only rank 3 (clock 0) missing", err)
	}
}

// TestAllWorkersSilent: when nobody is held but every remaining worker has
// gone quiet (ASP; a worker that never connects), the server gives up once
// the last of them has been silent for more than Timeout.
func TestAllWorkersSilent(t *testing.T) {
	cfg := Config{Servers: 1, Consistency: ASP, Timeout: 200 * ms}
	x := newSim(t, cfg, 0, 3, make([]float32, 4))
	x.hello(5*ms, 1)
	x.push(1, 0, 1, 10*ms) // then rank 1 disappears; rank 2 never connects
	for _, at := range []time.Duration{200 * ms, 200*ms + 1, 210 * ms} {
		if _, err := x.tick(at); err != nil {
			t.Fatalf("tick at %v: %v (rank 1 was heard at 10ms)", at, err)
		}
	}
	rs, err := x.tick(210*ms + 1)
	var merr *MissingError
	if !errors.As(err, &merr) || len(merr.Missing) != 2 || !merr.Missing[0].Hello || merr.Missing[1].Hello ||
		merr.Missing[1].Silent != 210*ms+1 || len(merr.Held) != 0 {
		t.Fatalf("err = %v (%+v), want both workers missing, rank 2 never connected", err, merr)
	}
	if !strings.Contains(err.Error(), "rank 2 (clock 0") || !strings.Contains(err.Error(), "never connected") {
		t.Errorf("message %q", err)
	}
	if len(rs) != 2 || rs[0].to != 1 || rs[1].to != 2 {
		t.Errorf("replies %v, want the error to ranks 1 and 2", rs)
	}
}

// TestFinishedWorkersAreNotMissing: a worker that said done is never
// reported, and a server whose workers have all finished has nothing left
// to check.
func TestFinishedWorkersAreNotMissing(t *testing.T) {
	cfg := Config{Servers: 1, Consistency: BSP, Timeout: 100 * ms}
	x := newSim(t, cfg, 0, 3, make([]float32, 2))
	x.hello(0, 1, 2)
	x.call(1, appendDone(nil, 0), ms, kindOK)
	if x.s.Finished() {
		t.Fatal("finished with rank 2 still connected")
	}
	x.push(2, 0, 1, 50*ms) // rank 2 alone: not held
	x.call(2, x.pull(2, 1), 51*ms, kindValues)
	if _, err := x.tick(151 * ms); err != nil {
		t.Fatalf("tick: %v", err)
	}
	x.call(2, appendDone(nil, 1), 152*ms, kindOK)
	if !x.s.Finished() {
		t.Fatal("not finished after every worker's done")
	}
	if rs, err := x.tick(time.Hour); err != nil || len(rs) != 0 {
		t.Errorf("tick after the end: %v, %v", rs, err)
	}
	if st := x.s.Stats(time.Hour); st.Updates != 1 || st.Elapsed != time.Hour {
		t.Errorf("stats: %d updates, elapsed %v", st.Updates, st.Elapsed)
	}
}

// TestWorkerTimesOutWithoutServer: a worker whose server never answers
// fails with a clear error after exactly 2*Timeout of fake time.
func TestWorkerTimesOutWithoutServer(t *testing.T) {
	clk := newFakeClock()
	n := newFakeNet(1, 2, clk) // no server behind it
	_, err := NewWorker(n, Config{Servers: 1, Timeout: 50 * ms, Now: clk.Now}, 4)
	if !errors.Is(err, collectives.ErrTimeout) || !strings.Contains(err.Error(), "no reply from server rank 0 for 100ms") {
		t.Fatalf("err = %v, want a timeout naming server rank 0", err)
	}
	if n.now() != 100*ms {
		t.Errorf("gave up after %v, want 2*Timeout = 100ms", n.now())
	}
}

// TestConfigMismatchRejected: a worker whose configuration differs from
// the server's is refused with the field named, and, never coming back, is
// reported missing (as never connected) after Timeout.
func TestConfigMismatchRejected(t *testing.T) {
	clk := newFakeClock()
	cfg := Config{Servers: 1, LR: 0.1, Timeout: 200 * ms, Now: clk.Now}
	srv, err := NewServer(cfg, 0, 2, make([]float32, 4))
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNet(1, 2, clk)
	n.serveWith(srv)
	bad := cfg
	bad.LR = 0.2
	_, err = NewWorker(n, bad, 4)
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "lr 0.2, server has 0.1") ||
		!strings.Contains(err.Error(), "worker rank 1") {
		t.Errorf("worker error = %v", err)
	}
	if _, err := srv.Tick(200 * ms); err != nil {
		t.Errorf("tick at Timeout: %v", err)
	}
	_, err = srv.Tick(200*ms + 1)
	var merr *MissingError
	if !errors.As(err, &merr) || len(merr.Missing) != 1 || merr.Missing[0].Hello {
		t.Errorf("server error = %v, want rank 1 missing, never connected", err)
	}
}

// TestBadRequestsRejected sends malformed and invalid requests to the
// servers: each is answered with an error naming the worker rank, and the
// servers' weights and clocks are unchanged.
func TestBadRequestsRejected(t *testing.T) {
	const p = 10 // two servers: [0,5) and [5,10)
	initial := make([]float32, p)
	for i := range initial {
		initial[i] = float32(i) + 0.5
	}
	cfg := Config{Servers: 2, Consistency: BSP, Timeout: 5 * time.Second}
	xs := []*sim{newSim(t, cfg, 0, 3, initial), newSim(t, cfg, 1, 3, initial)}
	hello := appendHello(nil, helloFor(xs[0].cfg, p))
	badHello := helloFor(xs[0].cfg, p)
	badHello.consistency = ASP
	for _, tc := range []struct {
		name string
		from int
		to   int
		b    []byte
		want string
	}{
		{"before hello", 2, 0, appendPullRange(nil, 0, 0, 5), "before hello"},
		{"wrong config", 2, 0, appendHello(nil, badHello), "consistency asp, server has bsp"},
		{"hello", 2, 0, hello, ""},
		{"hello", 2, 1, hello, ""},
		{"from a server", 1, 0, hello, "rank 1 is not a worker rank"},
		{"garbage", 2, 0, []byte{0xee, 1, 2}, "unknown message kind 238"},
		{"empty", 2, 0, nil, "empty message"},
		{"reply kind", 2, 0, appendOK(nil, 0), "ok is not a request"},
		{"keys of the other server", 2, 0, appendPushRange(nil, 0, Float32, 3, []float32{1, 1, 1}), "not within the server's range [0,5)"},
		{"range past the model", 2, 1, appendPushRange(nil, 0, Float32, 8, []float32{1, 1, 1}), "not within the server's range [5,10)"},
		{"negative range", 2, 0, appendPullRange(nil, 0, 3, 1), "not within"},
		{"wrong clock", 2, 0, appendPushRange(nil, 5, Float32, 0, []float32{1}), "clock 5, but the server has received 0"},
		{"NaN", 2, 0, appendPushKeys(nil, 0, Float32, []int64{1}, []float32{float32(math.NaN())}), "non-finite value NaN at key 1"},
		{"Inf fp16", 2, 1, appendPushKeys(nil, 0, Float16, []int64{6}, []float32{float32(math.Inf(1))}), "non-finite value +Inf at key 6"},
		{"key outside", 2, 1, appendPullKeys(nil, 0, []int64{5, 10}), "keys 5..10 not within"},
		{"truncated", 2, 0, appendPushRange(nil, 0, Float32, 0, []float32{1, 2, 3})[:20], "malformed"},
		{"bad encoding", 2, 0, func() []byte { b := appendPushRange(nil, 0, Float32, 0, []float32{1}); b[1] = 7; return b }(), "unknown value encoding"},
	} {
		rs := xs[tc.to].step(tc.from, tc.b, ms)
		if len(rs) != 1 || rs[0].to != tc.from {
			t.Errorf("%s: replies %v, want one to rank %d", tc.name, rs, tc.from)
			continue
		}
		m := rs[0].m
		if tc.want == "" {
			if m.kind != kindOK {
				t.Errorf("%s: reply %v %q, want ok", tc.name, m.kind, m.text)
			}
			continue
		}
		who := "worker rank 2"
		if tc.from < 2 {
			who = "rank 1"
		}
		if m.kind != kindError || m.code != codeRejected || !strings.Contains(m.text, who) || !strings.Contains(m.text, tc.want) {
			t.Errorf("%s: reply %v %q, want an error naming %s and %q", tc.name, m.kind, m.text, who, tc.want)
		}
	}
	// The state is untouched: clock 0 is still current and the weights are the initial ones.
	for s, r := range Partition(p, 2) {
		m := xs[s].call(2, appendPullRange(nil, 0, int64(r.Lo), int64(r.Hi)), 2*ms, kindValues)
		assertClose(t, "weights after bad requests", m.floats(), initial[r.Lo:r.Hi], 0, 0)
		xs[s].call(2, appendDone(nil, 0), 3*ms, kindOK)
	}
	st0, st1 := xs[0].s.Stats(0), xs[1].s.Stats(0)
	if st0.Pushes != 0 || st1.Pushes != 0 || st0.Updates != 0 {
		t.Errorf("pushes %d, %d, updates %d: rejected pushes were applied", st0.Pushes, st1.Pushes, st0.Updates)
	}
	if st0.Rejected+st1.Rejected != 15 {
		t.Errorf("rejected %d + %d, want 15", st0.Rejected, st1.Rejected)
	}
	t.Logf("server 0 rejections: %q", st0.Rejections)
}

// TestHeldRequestBlocksAnother: a worker may not send a second request
// while one is held; a request after done is refused.
func TestHeldRequestBlocksAnother(t *testing.T) {
	x := newSim(t, Config{Servers: 1, Consistency: BSP}, 0, 3, make([]float32, 2))
	x.hello(0, 1, 2)
	x.push(1, 0, 1, ms)
	x.step(1, x.pull(1, 1), 2*ms) // held
	m := x.call(1, x.pull(1, 1), 3*ms, kindError)
	if !strings.Contains(m.text, "its pull is still being held") {
		t.Errorf("second request: %q", m.text)
	}
	// Rank 2's done releases rank 1's pull (nobody is left to wait for).
	if rs := x.step(2, appendDone(nil, 0), 4*ms); len(rs) != 2 || rs[0].m.kind != kindOK || rs[1].to != 1 || rs[1].m.kind != kindValues {
		t.Fatalf("done: replies %v, want ok to 2, values to 1", rs)
	}
	m = x.call(2, x.pull(2, 0), 5*ms, kindError)
	if !strings.Contains(m.text, "already said done") {
		t.Errorf("after done: %q", m.text)
	}
}

// TestWorkerValidatesArguments: bad arguments fail before anything is
// sent, and do not break the Worker.
func TestWorkerValidatesArguments(t *testing.T) {
	clk := newFakeClock()
	cfg := Config{Servers: 1, Consistency: ASP, Now: clk.Now}
	srv, err := NewServer(cfg, 0, 2, make([]float32, 4))
	if err != nil {
		t.Fatal(err)
	}
	n := newFakeNet(1, 2, clk)
	n.serveWith(srv)
	w, err := NewWorker(n, cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		w.Pull(make([]float32, 3)),
		w.Push(make([]float32, 5)),
		w.Push([]float32{0, float32(math.NaN()), 0, 0}),
		w.PullKeys([]int64{2, 1}, make([]float32, 2)),
		w.PullKeys([]int64{4}, make([]float32, 1)),
		w.PushKeys([]int64{0, 1}, make([]float32, 1)),
	} {
		if !errors.Is(err, ErrArgument) {
			t.Errorf("err = %v, want ErrArgument", err)
		}
	}
	if err := w.Push(make([]float32, 4)); err != nil { // still usable
		t.Fatal(err)
	}
	if st := srv.Stats(0); st.Pushes != 1 || st.Rejected != 0 {
		t.Errorf("server saw %d pushes, %d rejections", st.Pushes, st.Rejected)
	}
}

// TestMissingWorkerEndToEnd is the wiring over the local transport and the
// real clock: RunServer returns the *MissingError naming the worker that
// stopped, and the workers waiting on it get ErrWorkerMissing instead of
// hanging. (The exact timing rules are tested on the fake clock above; the
// timeout here is long enough that a live worker is never mistaken.)
func TestMissingWorkerEndToEnd(t *testing.T) {
	const deadRank, deadAfter = 3, 2
	cfg := Config{Servers: 1, Consistency: BSP, Timeout: time.Second}
	res := runJob(t, 4, 20*ms, cfg, make([]float32, 5), func(w *Worker) (bool, error) {
		model := make([]float32, 5)
		for s := 0; s < 20; s++ {
			if w.rank == deadRank && s == deadAfter {
				return false, nil // stops talking, no Done
			}
			if err := w.Pull(model); err != nil {
				return false, err
			}
			if err := w.Push(model); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	var merr *MissingError
	if !errors.As(res.errs[0], &merr) || len(merr.Missing) != 1 || merr.Missing[0].Rank != deadRank ||
		merr.Missing[0].Clock != deadAfter {
		t.Fatalf("server error = %v, want rank %d missing at clock %d", res.errs[0], deadRank, deadAfter)
	}
	for _, r := range []int{1, 2} {
		if !errors.Is(res.errs[r], ErrWorkerMissing) || !strings.Contains(res.errs[r].Error(), "rank 3 (clock 2") {
			t.Errorf("worker %d error = %v, want ErrWorkerMissing naming rank 3", r, res.errs[r])
		}
	}
	if res.errs[deadRank] != nil {
		t.Errorf("dead worker error = %v", res.errs[deadRank])
	}
}
