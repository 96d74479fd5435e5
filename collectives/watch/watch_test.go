package watch

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/stall"
)

// events collects what the rings of a test report.
type events struct {
	mu      sync.Mutex
	deaths  map[int][]Death // by the reporting rank
	notices map[int][]Death
	ch      chan struct{}
}

func newEvents() *events {
	return &events{deaths: map[int][]Death{}, notices: map[int][]Death{}, ch: make(chan struct{}, 100)}
}

// ring starts an in-process ring of n ranks over loopback; cfg adjusts
// rank r's configuration.
func ring(t *testing.T, n int, ev *events, cfg func(r int, c *Config)) []*Ring {
	t.Helper()
	rings := make([]*Ring, n)
	recs := make([][]byte, n)
	for r := range n {
		c := Config{Rank: r, Size: n, Heartbeat: 20 * time.Millisecond,
			Status: func() stall.Op { return stall.Op{Name: "allreduce", Seq: uint64(10 + r), Step: 5} },
			OnDeath: func(d Death) {
				ev.mu.Lock()
				ev.deaths[r] = append(ev.deaths[r], d)
				ev.mu.Unlock()
				ev.ch <- struct{}{}
			},
			OnNotice: func(d Death) {
				ev.mu.Lock()
				ev.notices[r] = append(ev.notices[r], d)
				ev.mu.Unlock()
				ev.ch <- struct{}{}
			},
			Logf: t.Logf,
		}
		if cfg != nil {
			cfg(r, &c)
		}
		var err error
		if rings[r], err = Listen(c); err != nil {
			t.Fatal(err)
		}
		recs[r] = rings[r].Addr()
	}
	for _, r := range rings {
		r.Start(recs)
	}
	t.Cleanup(func() {
		for _, r := range rings {
			r.Close()
			r.Wait()
		}
	})
	return rings
}

// wait waits for k reports, at most d.
func (ev *events) wait(t *testing.T, k int, d time.Duration) {
	t.Helper()
	for range k {
		select {
		case <-ev.ch:
		case <-time.After(d):
			t.Fatalf("reports: deaths %v, notices %v; want %d in all", ev.deaths, ev.notices, k)
		}
	}
}

// until waits for cond, polling; the deadline is a hang guard only.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("never: %s", what)
		}
	}
}

// connected waits until every ring has heard its predecessor.
func connected(t *testing.T, rs []*Ring) {
	t.Helper()
	until(t, "every rank hears its predecessor", func() bool {
		for _, r := range rs {
			if r.Predecessor() == nil {
				return false
			}
		}
		return true
	})
}

// ended closes every ring and waits for its goroutines: no report can
// come after it.
func ended(rs []*Ring) {
	for _, r := range rs {
		r.Close()
	}
	for _, r := range rs {
		r.Wait()
	}
}

func (ev *events) none(t *testing.T, after string) {
	t.Helper()
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.deaths)+len(ev.notices) > 0 {
		t.Fatalf("deaths %v, notices %v %s", ev.deaths, ev.notices, after)
	}
}

// TestRingDeath: a rank whose connection closes without a bye (a process
// killed outright) is reported by its successor, with the operation and
// step of its last status, and every other live rank is told.
func TestRingDeath(t *testing.T) {
	ev := newEvents()
	rs := ring(t, 4, ev, nil)
	connected(t, rs)
	rs[1].Close() // no bye: a death
	ev.wait(t, 3, 5*time.Second)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.deaths[2]) != 1 || len(ev.deaths) != 1 {
		t.Fatalf("deaths %v, want one, found by rank 2", ev.deaths)
	}
	d := ev.deaths[2][0]
	if d.Rank != 1 || d.By != 2 || d.Silent || d.Op != (stall.Op{Name: "allreduce", Seq: 11, Step: 5}) || d.Ago > time.Second {
		t.Fatalf("death %+v, want rank 1 found by 2 in allreduce #11 at step 5", d)
	}
	s := d.String()
	for _, w := range []string{"rank 1 (pid ", "ended without a word", "last heard of in allreduce #11 at step 5", "found by rank 2"} {
		if !strings.Contains(s, w) {
			t.Errorf("%q lacks %q", s, w)
		}
	}
	for _, r := range []int{3, 0} {
		if len(ev.notices[r]) != 1 || ev.notices[r][0].Rank != 1 || ev.notices[r][0].Op.Seq != 11 {
			t.Errorf("rank %d was told %v, want rank 1's death", r, ev.notices[r])
		}
	}
}

// TestRingByeIsNoDeath: ranks that end normally (bye, then close) over
// real connections report nothing (the orders and interleavings are
// TestRulesByeIsNoDeath's): once every ring is closed and its goroutines
// have ended, no report came and none can come.
func TestRingByeIsNoDeath(t *testing.T) {
	ev := newEvents()
	rs := ring(t, 3, ev, nil)
	connected(t, rs)
	rs[2].Bye(ByeSignal)
	rs[2].Close()
	rs[0].Bye(ByeEnd)
	rs[0].Close()
	rs[1].Bye(ByeEnd)
	ended(rs)
	ev.none(t, "after normal ends")
}

// TestRingSilence: a predecessor that sends nothing for the quiet limit
// (a stopped process, a node gone without closing its connections) is
// reported as silent.
func TestRingSilence(t *testing.T) {
	ev := newEvents()
	ring(t, 2, ev, func(r int, c *Config) {
		if r == 0 {
			c.Heartbeat = time.Hour // one status, then silence
		}
		c.Quiet = func() time.Duration { return 300 * time.Millisecond }
	})
	ev.wait(t, 1, 5*time.Second)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	d := ev.deaths[1]
	if len(d) != 1 || d[0].Rank != 0 || !d[0].Silent || !strings.Contains(d[0].String(), "has sent nothing for") {
		t.Fatalf("deaths %v, want rank 0 silent, found by rank 1", ev.deaths)
	}
}

// TestRingStrayConnection: a connection that is not the predecessor's (a
// port scan, another job) is dropped; the predecessor still gets in.
func TestRingStrayConnection(t *testing.T) {
	ev := newEvents()
	var first *Ring
	rs := ring(t, 2, ev, func(r int, c *Config) {})
	connected(t, rs)
	first = rs[0]
	c, err := net.Dial("tcp", first.ln.Addr().String())
	if err == nil {
		writeRecord(c, kindHello, hello{nonce: 1, rank: 1, pid: 1, host: "x"}.encode())
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if k, _, err := readRecord(c); err == nil && k == kindOK {
			t.Error("a hello with the wrong nonce was accepted")
		}
		c.Close()
	}
	rs[1].Close()
	ev.wait(t, 1, 5*time.Second)
	if ev.deaths[0][0].Rank != 1 {
		t.Fatalf("deaths %v, want rank 1's found by rank 0", ev.deaths)
	}
}

// TestRingByeAtOnce: ranks that end right after start-up (a usage error
// found by every rank), before their connections are made, report nothing:
// the bye waits for the connection being made.
func TestRingByeAtOnce(t *testing.T) {
	for range 20 {
		ev := newEvents()
		rs := ring(t, 3, ev, nil)
		for _, r := range rs {
			r.Bye(ByeEnd)
		}
		ended(rs)
		ev.none(t, "after an end at once")
	}
}

// TestRingAbortMutes: once a rank says it aborts the job, the launcher
// kills the others; their ends are not reported as deaths, on any rank.
func TestRingAbortMutes(t *testing.T) {
	ev := newEvents()
	rs := ring(t, 4, ev, nil)
	connected(t, rs)
	rs[1].Bye(ByeAbort)
	until(t, "the abort's notice goes round", func() bool {
		for _, r := range rs {
			r.rmu.Lock()
			m := r.rules.muted
			r.rmu.Unlock()
			if !m {
				return false
			}
		}
		return true
	})
	rs[1].Close()
	rs[3].Close() // killed by the launcher, without a bye
	ended(rs)
	ev.none(t, "after an abort")
}
