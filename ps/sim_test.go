package ps

import (
	"fmt"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
)

// Test harnesses on a fake clock: sim drives a Server state machine with
// raw requests; fakeNet connects a real Worker to state machines (or a
// scripted server) in the test's goroutine. Nothing sleeps.

const ms = time.Millisecond

// reply is one decoded server reply.
type reply struct {
	to int
	m  message
}

func (r reply) String() string {
	if r.m.kind == kindError {
		return fmt.Sprintf("%v to %d: %q", r.m.kind, r.to, r.m.text)
	}
	return fmt.Sprintf("%v to %d", r.m.kind, r.to)
}

// decodeReplies decodes out (copying the bytes: the server reuses them).
func decodeReplies(t *testing.T, out []Outgoing) []reply {
	t.Helper()
	var rs []reply
	for _, o := range out {
		m, err := decode(append([]byte(nil), o.Msg...))
		if err != nil {
			t.Fatalf("server sent undecodable bytes to %d: %v", o.To, err)
		}
		rs = append(rs, reply{o.To, m})
	}
	return rs
}

// sim is one Server and the requests a test feeds it.
type sim struct {
	t   *testing.T
	s   *Server
	cfg Config
	p   int
}

func newSim(t *testing.T, cfg Config, rank, size int, initial []float32) *sim {
	t.Helper()
	cfg = cfg.withDefaults()
	s, err := NewServer(cfg, rank, size, initial)
	if err != nil {
		t.Fatal(err)
	}
	return &sim{t: t, s: s, cfg: cfg, p: len(initial)}
}

// step feeds request b from rank `from` at now.
func (x *sim) step(from int, b []byte, now time.Duration) []reply {
	x.t.Helper()
	return decodeReplies(x.t, x.s.Step(from, b, now))
}

// tick runs the server's timers at now.
func (x *sim) tick(now time.Duration) ([]reply, error) {
	x.t.Helper()
	out, err := x.s.Tick(now)
	return decodeReplies(x.t, out), err
}

// call feeds b and wants exactly one reply, to `from`, of kind want.
func (x *sim) call(from int, b []byte, now time.Duration, want msgKind) message {
	x.t.Helper()
	rs := x.step(from, b, now)
	if len(rs) != 1 || rs[0].to != from || rs[0].m.kind != want {
		x.t.Fatalf("at %v, rank %d's request: replies %v, want one %v to %d", now, from, rs, want, from)
	}
	return rs[0].m
}

// hello connects worker ranks.
func (x *sim) hello(now time.Duration, ranks ...int) {
	x.t.Helper()
	for _, r := range ranks {
		x.call(r, appendHello(nil, helloFor(x.cfg, x.p)), now, kindOK)
	}
}

// push pushes a dense gradient of g everywhere from rank r at clock c.
func (x *sim) push(r, c int, g float32, now time.Duration) {
	x.t.Helper()
	vals := make([]float32, x.s.rng.Len())
	for i := range vals {
		vals[i] = g
	}
	x.call(r, appendPushRange(nil, uint32(c), Float32, int64(x.s.rng.Lo), vals), now, kindOK)
}

// pull is rank r's pull of the server's range at clock c.
func (x *sim) pull(r, c int) []byte {
	return appendPullRange(nil, uint32(c), int64(x.s.rng.Lo), int64(x.s.rng.Hi))
}

// only returns the replies of kind k.
func only(rs []reply, k msgKind) []reply {
	var out []reply
	for _, r := range rs {
		if r.m.kind == k {
			out = append(out, r)
		}
	}
	return out
}

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1e9, 0)} }

func (c *fakeClock) Now() time.Time { return c.t }

// fakeNet is the Transport of one worker rank whose servers are played, in
// the same goroutine, by onSend (a request arrives) and onTick (time
// passes), both at the fake time since the net was made; each returns the
// messages for this worker, per server rank. RecvBytesWithin advances the
// clock in steps of grain, ticking the servers after each, until a reply
// from the wanted server is queued or d has passed (ErrTimeout).
type fakeNet struct {
	rank, size int
	clock      *fakeClock
	start      time.Time
	grain      time.Duration
	onSend     func(server int, b []byte, now time.Duration) [][]byte
	onTick     func(now time.Duration) map[int][][]byte
	inbox      map[int][][]byte // replies per server
}

var _ Transport = (*fakeNet)(nil)

func newFakeNet(rank, size int, clock *fakeClock) *fakeNet {
	return &fakeNet{rank: rank, size: size, clock: clock, start: clock.t, grain: ms, inbox: map[int][][]byte{}}
}

// serveWith makes state machines play the servers (servers[i] is rank i).
func (n *fakeNet) serveWith(servers ...*Server) {
	mine := func(out []Outgoing) [][]byte {
		var bs [][]byte
		for _, o := range out {
			if o.To == n.rank {
				bs = append(bs, append([]byte(nil), o.Msg...))
			}
		}
		return bs
	}
	n.onSend = func(to int, b []byte, now time.Duration) [][]byte {
		return mine(servers[to].Step(n.rank, append([]byte(nil), b...), now))
	}
	n.onTick = func(now time.Duration) map[int][][]byte {
		all := map[int][][]byte{}
		for i, s := range servers {
			out, _ := s.Tick(now)
			all[i] = mine(out)
		}
		return all
	}
}

func (n *fakeNet) now() time.Duration { return n.clock.t.Sub(n.start) }

func (n *fakeNet) Rank() int { return n.rank }
func (n *fakeNet) Size() int { return n.size }

func (n *fakeNet) SendBytes(b []byte, to, tag int) error {
	if tag != RequestTag {
		return fmt.Errorf("fakeNet: tag %d", tag)
	}
	if n.onSend != nil {
		n.inbox[to] = append(n.inbox[to], n.onSend(to, b, n.now())...)
	}
	return nil
}

func (n *fakeNet) RecvBytesWithin(from, tag int, d time.Duration) ([]byte, int, int, error) {
	if tag != ReplyTag || from < 0 {
		return nil, 0, 0, fmt.Errorf("fakeNet: recv from %d tag %d", from, tag)
	}
	for waited := time.Duration(0); ; {
		if q := n.inbox[from]; len(q) > 0 {
			n.inbox[from] = q[1:]
			return q[0], from, tag, nil
		}
		if waited >= d {
			return nil, 0, 0, fmt.Errorf("fakeNet: nothing from rank %d in %v: %w", from, d, collectives.ErrTimeout)
		}
		step := min(n.grain, d-waited)
		n.clock.t = n.clock.t.Add(step)
		waited += step
		if n.onTick != nil {
			for s, bs := range n.onTick(n.now()) {
				n.inbox[s] = append(n.inbox[s], bs...)
			}
		}
	}
}
