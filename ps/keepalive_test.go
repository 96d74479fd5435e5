package ps

import (
	"errors"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/collectives/local"
)

// TestServerSendsKeepAlives: a held request gets keep-alive messages every
// Timeout/4 until it is served.
func TestServerSendsKeepAlives(t *testing.T) {
	const p = 4
	cfg := Config{Servers: 1, Consistency: BSP, Timeout: 200 * time.Millisecond}.withDefaults()
	world := local.NewWorld(3)
	world.SetTimeout(10 * time.Millisecond)
	waits := 0
	errs := world.Run(func(c *local.Comm) error {
		switch c.Rank() {
		case 0:
			_, err := RunServer(c, cfg, make([]float32, p))
			return err
		case 1: // pushes step 0, then its pull for step 1 is held until rank 2 pushes
			call := func(b []byte) message { return rawCall(t, c, 0, b) }
			call(appendHello(nil, helloFor(cfg, p)))
			call(appendPushRange(nil, 0, Float32, 0, make([]float32, p)))
			if err := c.SendBytes(appendPullRange(nil, 1, 0, p), 0, RequestTag); err != nil {
				return err
			}
			for {
				b, _, _, err := c.RecvBytes(0, ReplyTag)
				if errors.Is(err, collectives.ErrTimeout) {
					continue // the transport's poll interval
				}
				if err != nil {
					return err
				}
				m, err := decode(b)
				if err != nil {
					return err
				}
				if m.kind == kindWait {
					waits++
					continue
				}
				if m.kind != kindValues || m.staleness != 0 || m.held < 100*time.Millisecond {
					t.Errorf("reply %v staleness %d held %v", m.kind, m.staleness, m.held)
				}
				break
			}
			call(appendDone(nil, 1))
		case 2: // pushes step 0 after 150 ms (< Timeout, so it is not missing)
			call := func(b []byte) message { return rawCall(t, c, 0, b) }
			call(appendHello(nil, helloFor(cfg, p)))
			time.Sleep(150 * time.Millisecond)
			call(appendPushRange(nil, 0, Float32, 0, make([]float32, p)))
			call(appendDone(nil, 1))
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if waits < 2 {
		t.Errorf("%d keep-alives in 150 ms at Timeout/4 = 50 ms, want at least 2", waits)
	}
}

// TestWorkerHonoursKeepAlives: a worker keeps waiting past 2*Timeout as long
// as its server sends keep-alives.
func TestWorkerHonoursKeepAlives(t *testing.T) {
	cfg := Config{Servers: 1, Timeout: 40 * time.Millisecond}
	world := local.NewWorld(2)
	world.SetTimeout(5 * time.Millisecond)
	errs := world.Run(func(c *local.Comm) error {
		if c.Rank() == 0 { // a server that holds the hello for 200 ms = 5 Timeouts
			if _, _, _, err := c.RecvBytes(1, RequestTag); err != nil {
				return err
			}
			for i := 0; i < 10; i++ {
				time.Sleep(20 * time.Millisecond)
				if err := c.SendBytes(appendWait(nil), 1, ReplyTag); err != nil {
					return err
				}
			}
			return c.SendBytes(appendOK(nil, 200*time.Millisecond), 1, ReplyTag)
		}
		_, err := NewWorker(c, cfg, 4)
		return err
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("errors %v", errs)
	}
}

// TestUnevenStepsBSP: workers that run different numbers of steps under BSP
// finish: a worker's Done releases the rounds it will not join.
func TestUnevenStepsBSP(t *testing.T) {
	cfg := Config{Servers: 2, Consistency: BSP, LR: 0.1, Timeout: 5 * time.Second}
	res := runJob(t, 5, time.Second, cfg, make([]float32, 6), func(w *Worker) (bool, error) {
		steps := 2 + 2*(w.rank-2) // 2, 4, 6 steps
		model := make([]float32, 6)
		g := []float32{1, 1, 1, 1, 1, 1}
		for s := 0; s < steps; s++ {
			if err := w.Pull(model); err != nil {
				return false, err
			}
			if err := w.Push(g); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	res.mustSucceed(t)
	// Six rounds, each averaging gradients of 1: the model moved by 6*lr.
	assertClose(t, "model", res.model(), []float32{-0.6, -0.6, -0.6, -0.6, -0.6, -0.6}, 1e-6, 1e-6)
	if u := res.servers[0].Updates; u != 6 {
		t.Errorf("%d updates, want 6", u)
	}
}

// TestWorkerAfterDone: a Worker may not be used after Done.
func TestWorkerAfterDone(t *testing.T) {
	cfg := Config{Servers: 1, Consistency: ASP, Timeout: 5 * time.Second}
	res := runJob(t, 2, time.Second, cfg, make([]float32, 2), func(w *Worker) (bool, error) {
		if err := w.Done(); err != nil {
			return false, err
		}
		if err := w.Push(make([]float32, 2)); !errors.Is(err, ErrDone) {
			t.Errorf("push after done: %v, want ErrDone", err)
		}
		if err := w.Done(); !errors.Is(err, ErrDone) {
			t.Errorf("second done: %v, want ErrDone", err)
		}
		return false, nil
	})
	res.mustSucceed(t)
}
