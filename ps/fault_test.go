package ps

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
)

// TestMissingWorkerReported: a worker that stops pushing (without Done)
// under BSP or SSP makes the server report it, by rank and clock, after
// Timeout, and the workers waiting on it get an error instead of hanging.
func TestMissingWorkerReported(t *testing.T) {
	for _, cons := range []Consistency{BSP, SSP} {
		t.Run(cons.String(), func(t *testing.T) {
			const deadRank, deadAfter = 3, 2
			cfg := Config{Servers: 1, Consistency: cons, Staleness: 1, Timeout: 300 * time.Millisecond}
			start := time.Now()
			res := runJob(t, 4, 20*time.Millisecond, cfg, make([]float32, 5), func(w *Worker) (bool, error) {
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
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("took %v to notice", el)
			}
			var merr *MissingError
			if !errors.As(res.errs[0], &merr) || !errors.Is(res.errs[0], ErrWorkerMissing) {
				t.Fatalf("server error = %v, want a *MissingError", res.errs[0])
			}
			if len(merr.Missing) != 1 || merr.Missing[0].Rank != deadRank || merr.Missing[0].Clock != deadAfter || !merr.Missing[0].Hello {
				t.Fatalf("missing = %+v, want rank %d at clock %d", merr.Missing, deadRank, deadAfter)
			}
			if len(merr.Held) == 0 {
				t.Errorf("no held workers reported: %v", merr)
			}
			if !strings.Contains(merr.Error(), "rank 3 (clock 2") {
				t.Errorf("message %q does not name rank 3 and its clock", merr)
			}
			t.Logf("server: %v", merr)
			for _, r := range []int{1, 2} {
				if !errors.Is(res.errs[r], ErrWorkerMissing) || !strings.Contains(res.errs[r].Error(), "rank 3") {
					t.Errorf("worker %d error = %v, want ErrWorkerMissing naming rank 3", r, res.errs[r])
				}
			}
			if res.errs[deadRank] != nil {
				t.Errorf("dead worker error = %v", res.errs[deadRank])
			}
		})
	}
}

// TestAllWorkersSilent: when nobody is held but every remaining worker has
// gone quiet (ASP, workers that never connect), the server still gives up.
func TestAllWorkersSilent(t *testing.T) {
	world := local.NewWorld(3)
	world.SetTimeout(20 * time.Millisecond)
	cfg := Config{Servers: 1, Consistency: ASP, Timeout: 200 * time.Millisecond}
	errs := world.Run(func(c *local.Comm) error {
		switch c.Rank() {
		case 0:
			_, err := RunServer(c, cfg, make([]float32, 4))
			return err
		case 1:
			w, err := NewWorker(c, cfg, 4)
			if err != nil {
				return err
			}
			return w.Push(make([]float32, 4)) // then disappears
		}
		return nil // rank 2 never connects
	})
	var merr *MissingError
	if !errors.As(errs[0], &merr) || len(merr.Missing) != 2 || merr.Missing[1].Hello {
		t.Fatalf("server error = %v, want both workers missing, rank 2 never connected", errs[0])
	}
	if !strings.Contains(errs[0].Error(), "rank 2 (clock 0") || !strings.Contains(errs[0].Error(), "never connected") {
		t.Errorf("message %q", errs[0])
	}
}

// TestWorkerTimesOutWithoutServer: a worker whose server never answers
// fails with a clear error after 2*Timeout.
func TestWorkerTimesOutWithoutServer(t *testing.T) {
	world := local.NewWorld(2)
	world.SetTimeout(10 * time.Millisecond)
	cfg := Config{Servers: 1, Timeout: 50 * time.Millisecond}
	start := time.Now()
	errs := world.Run(func(c *local.Comm) error {
		if c.Rank() == 0 {
			return nil // no server
		}
		_, err := NewWorker(c, cfg, 4)
		return err
	})
	err := errs[1]
	if !errors.Is(err, collectives.ErrTimeout) || !strings.Contains(err.Error(), "no reply from server rank 0") {
		t.Fatalf("err = %v, want a timeout naming server rank 0", err)
	}
	if el := time.Since(start); el < 100*time.Millisecond || el > 3*time.Second {
		t.Errorf("gave up after %v, want about 2*Timeout", el)
	}
}

// TestConfigMismatchRejected: a worker whose configuration differs from
// the server's is refused, with the field named.
func TestConfigMismatchRejected(t *testing.T) {
	world := local.NewWorld(2)
	world.SetTimeout(20 * time.Millisecond)
	cfg := Config{Servers: 1, LR: 0.1, Timeout: 200 * time.Millisecond}
	errs := world.Run(func(c *local.Comm) error {
		if c.Rank() == 0 {
			_, err := RunServer(c, cfg, make([]float32, 4))
			return err
		}
		bad := cfg
		bad.LR = 0.2
		_, err := NewWorker(c, bad, 4)
		return err
	})
	if !errors.Is(errs[1], ErrRejected) || !strings.Contains(errs[1].Error(), "lr 0.2, server has 0.1") ||
		!strings.Contains(errs[1].Error(), "worker rank 1") {
		t.Errorf("worker error = %v", errs[1])
	}
	if !errors.Is(errs[0], ErrWorkerMissing) {
		t.Errorf("server error = %v, want ErrWorkerMissing (the refused worker never comes back)", errs[0])
	}
}

// rawCall sends b to server `to` as a request and returns its decoded reply
// (skipping keep-alives). Failures are reported with t.Errorf, so worker
// goroutines may call it; they then get a zero message.
func rawCall(t *testing.T, c *local.Comm, to int, b []byte) message {
	t.Helper()
	if err := c.SendBytes(b, to, RequestTag); err != nil {
		t.Errorf("send to %d: %v", to, err)
		return message{}
	}
	for {
		r, _, _, err := c.RecvBytes(to, ReplyTag)
		if err != nil {
			t.Errorf("reply from %d: %v", to, err)
			return message{}
		}
		m, err := decode(r)
		if err != nil {
			t.Errorf("reply from %d: %v", to, err)
			return message{}
		}
		if m.kind != kindWait {
			return m
		}
	}
}

// TestBadRequestsRejected sends malformed and invalid requests straight
// over the transport: each is answered with an error naming the worker rank,
// and the server's weights and clocks are unchanged.
func TestBadRequestsRejected(t *testing.T) {
	const p = 10 // two servers: [0,5) and [5,10)
	initial := make([]float32, p)
	for i := range initial {
		initial[i] = float32(i) + 0.5
	}
	cfg := Config{Servers: 2, Consistency: BSP, Timeout: 5 * time.Second}.withDefaults()
	world := local.NewWorld(3)
	world.SetTimeout(time.Second)
	stats := make([]ServerStats, 2)
	errs := world.Run(func(c *local.Comm) error {
		if c.Rank() < 2 {
			st, err := RunServer(c, cfg, initial)
			stats[c.Rank()] = st
			return err
		}
		hello := appendHello(nil, helloFor(cfg, p))
		badHello := helloFor(cfg, p)
		badHello.consistency = ASP
		bad := []struct {
			name string
			to   int
			b    []byte
			want string
		}{
			{"before hello", 0, appendPullRange(nil, 0, 0, 5), "before hello"},
			{"wrong config", 0, appendHello(nil, badHello), "consistency asp, server has bsp"},
			{"hello", 0, hello, ""},
			{"hello", 1, hello, ""},
			{"garbage", 0, []byte{0xee, 1, 2}, "unknown message kind 238"},
			{"empty", 0, nil, "empty message"},
			{"reply kind", 0, appendOK(nil, 0), "ok is not a request"},
			{"keys of the other server", 0, appendPushRange(nil, 0, Float32, 3, []float32{1, 1, 1}), "not within the server's range [0,5)"},
			{"range past the model", 1, appendPushRange(nil, 0, Float32, 8, []float32{1, 1, 1}), "not within the server's range [5,10)"},
			{"negative range", 0, appendPullRange(nil, 0, 3, 1), "not within"},
			{"wrong clock", 0, appendPushRange(nil, 5, Float32, 0, []float32{1}), "clock 5, but the server has received 0"},
			{"NaN", 0, appendPushKeys(nil, 0, Float32, []int64{1}, []float32{float32(math.NaN())}), "non-finite value NaN at key 1"},
			{"Inf fp16", 1, appendPushKeys(nil, 0, Float16, []int64{6}, []float32{float32(math.Inf(1))}), "non-finite value +Inf at key 6"},
			{"key outside", 1, appendPullKeys(nil, 0, []int64{5, 10}), "keys 5..10 not within"},
			{"truncated", 0, appendPushRange(nil, 0, Float32, 0, []float32{1, 2, 3})[:20], "malformed"},
			{"bad encoding", 0, func() []byte { b := appendPushRange(nil, 0, Float32, 0, []float32{1}); b[1] = 7; return b }(), "unknown value encoding"},
		}
		for _, tc := range bad {
			m := rawCall(t, c, tc.to, tc.b)
			if tc.want == "" {
				if m.kind != kindOK {
					t.Errorf("%s: reply %v %q, want ok", tc.name, m.kind, m.text)
				}
				continue
			}
			if m.kind != kindError || m.code != codeRejected || !strings.Contains(m.text, "worker rank 2") || !strings.Contains(m.text, tc.want) {
				t.Errorf("%s: reply %v %q, want an error naming worker rank 2 and %q", tc.name, m.kind, m.text, tc.want)
			}
		}
		// The state is untouched: clock 0 is still current and the weights are the initial ones.
		for s, r := range Partition(p, 2) {
			m := rawCall(t, c, s, appendPullRange(nil, 0, int64(r.Lo), int64(r.Hi)))
			if m.kind != kindValues {
				t.Errorf("pull from server %d: %v %q", s, m.kind, m.text)
				continue
			}
			assertClose(t, "weights after bad requests", m.floats(), initial[r.Lo:r.Hi], 0, 0)
		}
		for s := range 2 {
			if m := rawCall(t, c, s, appendDone(nil, 0)); m.kind != kindOK {
				t.Errorf("done: %v %q", m.kind, m.text)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if stats[0].Pushes != 0 || stats[1].Pushes != 0 || stats[0].Updates != 0 {
		t.Errorf("pushes %d, %d, updates %d: rejected pushes were applied", stats[0].Pushes, stats[1].Pushes, stats[0].Updates)
	}
	if stats[0].Rejected+stats[1].Rejected != 14 {
		t.Errorf("rejected %d + %d, want 14", stats[0].Rejected, stats[1].Rejected)
	}
	t.Logf("server 0 rejections: %q", stats[0].Rejections)
}

// TestWorkerValidatesArguments: bad arguments fail before anything is
// sent, and do not break the Worker.
func TestWorkerValidatesArguments(t *testing.T) {
	cfg := Config{Servers: 1, Consistency: ASP, Timeout: 5 * time.Second}
	res := runJob(t, 2, time.Second, cfg, make([]float32, 4), func(w *Worker) (bool, error) {
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
		return true, w.Push(make([]float32, 4)) // still usable
	})
	res.mustSucceed(t)
	if res.servers[0].Pushes != 1 || res.servers[0].Rejected != 0 {
		t.Errorf("server saw %d pushes, %d rejections", res.servers[0].Pushes, res.servers[0].Rejected)
	}
}
