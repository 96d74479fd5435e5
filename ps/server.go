package ps

import (
	"errors"
	"fmt"
	"time"

	"github.com/dml-project/dml/collectives"
)

// maxRejections is how many rejection messages ServerStats keeps.
const maxRejections = 16

// RunServer serves this rank's key range until every worker has called Done.
// initial is the full model (length P, the same on every rank); the server
// copies its own range out of it and never writes to it. The final weights
// of the range come back in ServerStats.Weights.
//
// Requests that break the protocol (malformed bytes, unknown kinds, keys
// outside the server's range, wrong lengths, non-finite values, a clock that
// disagrees with the server's, a configuration that differs from the
// server's) are answered with an error naming the worker rank and do not
// touch the server's state; the server goes on serving.
//
// RunServer returns an error when the transport fails, or a *MissingError
// (wrapping ErrWorkerMissing) when workers went silent for cfg.Timeout while
// others waited on them; the caller should then Abort the job. Before
// returning that error it tells every unfinished worker.
//
// The server uses c from the calling goroutine only.
func RunServer(c collectives.Comm, cfg Config, initial []float32) (ServerStats, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(c.Size()); err != nil {
		return ServerStats{}, err
	}
	rank := c.Rank()
	if rank >= cfg.Servers {
		return ServerStats{}, fmt.Errorf("ps: RunServer on rank %d, but only ranks 0..%d are servers: %w",
			rank, cfg.Servers-1, ErrConfig)
	}
	s, err := newServer(c, cfg, initial)
	if err != nil {
		return ServerStats{}, err
	}
	return s.run()
}

// request is a validated request waiting to be served.
type request struct {
	msg     message
	worker  int
	arrived time.Duration
	vals    []float32 // decoded push values
}

type server struct {
	c     collectives.Comm
	cfg   Config
	rank  int
	rng   Range
	nw    int // number of workers
	hello helloInfo
	start time.Time

	ctl Controller
	upd *updater
	bsp *bspRound // nil unless BSP

	said      []bool // worker said hello
	finished  []bool
	pending   []*request // at most one held request per worker
	lastHeard []time.Duration
	lastBeat  []time.Duration

	stats ServerStats
	out   []byte    // reply buffer
	keyed []float32 // gather buffer for keyed pulls
}

func newServer(c collectives.Comm, cfg Config, initial []float32) (*server, error) {
	nw := c.Size() - cfg.Servers
	ctl, err := NewController(cfg, nw)
	if err != nil {
		return nil, err
	}
	rng := Partition(len(initial), cfg.Servers)[c.Rank()]
	w := append([]float32(nil), initial[rng.Lo:rng.Hi]...)
	s := &server{
		c: c, cfg: cfg, rank: c.Rank(), rng: rng, nw: nw, hello: helloFor(cfg, len(initial)),
		start: cfg.Now(), ctl: ctl, upd: newUpdater(cfg, w),
		said: make([]bool, nw), finished: make([]bool, nw), pending: make([]*request, nw),
		lastHeard: make([]time.Duration, nw), lastBeat: make([]time.Duration, nw),
	}
	if cfg.Consistency == BSP {
		s.bsp = newBSPRound(nw, rng.Len())
	}
	s.stats.Rank, s.stats.Range = s.rank, rng
	return s, nil
}

func (s *server) now() time.Duration { return s.cfg.Now().Sub(s.start) }

func (s *server) workerRank(w int) int { return w + s.cfg.Servers }

func (s *server) run() (ServerStats, error) {
	for s.unfinished() > 0 {
		// Poll with a quarter of the timeout, so that keep-alives and the
		// missing-worker check run on time whatever the transport's default.
		b, src, _, err := s.c.RecvBytesWithin(collectives.AnySource, RequestTag, s.cfg.Timeout/4)
		now := s.now()
		if err != nil && !errors.Is(err, collectives.ErrTimeout) {
			return s.finalStats(), fmt.Errorf("ps server rank %d: receive: %w", s.rank, err)
		}
		if err == nil {
			s.stats.BytesReceived += int64(len(b))
			if err := s.handle(src, b, now); err != nil {
				return s.finalStats(), err
			}
		}
		if err := s.keepAlive(now); err != nil {
			return s.finalStats(), err
		}
		if merr := s.checkMissing(now); merr != nil {
			s.abandon(merr)
			return s.finalStats(), merr
		}
	}
	return s.finalStats(), nil
}

func (s *server) unfinished() int {
	n := 0
	for _, f := range s.finished {
		if !f {
			n++
		}
	}
	return n
}

func (s *server) finalStats() ServerStats {
	st := s.stats
	st.Elapsed = s.now()
	st.Staleness = s.stats.Staleness.clone()
	st.MaxStaleness = max(st.Staleness.Max(), 0)
	if d, ok := s.ctl.(*DSSPController); ok {
		st.DSSPGrants = d.Grants()
	}
	st.Weights = append([]float32(nil), s.upd.w...)
	return st
}

// handle decodes, validates and serves or holds one request from rank src.
// Only transport failures are returned.
func (s *server) handle(src int, b []byte, now time.Duration) error {
	if src < s.cfg.Servers || src >= s.c.Size() {
		return s.reject(src, 0, fmt.Sprintf("rank %d is not a worker rank (workers are %d..%d)",
			src, s.cfg.Servers, s.c.Size()-1))
	}
	w := src - s.cfg.Servers
	s.lastHeard[w] = now
	m, err := decode(b)
	if err != nil {
		return s.reject(src, 0, err.Error())
	}
	switch {
	case s.finished[w]:
		return s.reject(src, m.kind, "worker already said done")
	case s.pending[w] != nil:
		return s.reject(src, m.kind, fmt.Sprintf("its %v is still being held", s.pending[w].msg.kind))
	case m.kind == kindHello:
		if d := m.hello.diff(s.hello); d != "" {
			return s.reject(src, m.kind, "configuration differs: "+d)
		}
		s.said[w] = true
		return s.send(w, appendOK(s.out[:0], 0))
	case !s.said[w]:
		return s.reject(src, m.kind, "request before hello (NewWorker)")
	}
	r := &request{msg: m, worker: w, arrived: now}
	if reason := s.validate(r); reason != "" {
		return s.reject(src, m.kind, reason)
	}
	if m.kind == kindDone || s.ctl.MayProceed(w, now) {
		if err := s.serve(r, now); err != nil {
			return err
		}
		return s.drain(now)
	}
	s.pending[w] = r
	s.lastBeat[w] = now
	return nil
}

// validate checks r completely against the server's state and decodes push
// values; it returns the reason for rejecting r, or "".
func (s *server) validate(r *request) string {
	m := &r.msg
	switch m.kind {
	case kindPullRange, kindPullKeys, kindPushRange, kindPushKeys, kindDone:
	default:
		return fmt.Sprintf("%v is not a request", m.kind)
	}
	if got, want := int64(m.clock), int64(s.ctl.Clock(r.worker)); got != want {
		return fmt.Sprintf("clock %d, but the server has received %d pushes from it", got, want)
	}
	lo, hi := int64(s.rng.Lo), int64(s.rng.Hi)
	switch m.kind {
	case kindPullRange:
		if m.lo < lo || m.lo > m.hi || m.hi > hi {
			return fmt.Sprintf("keys [%d,%d) not within the server's range %v", m.lo, m.hi, s.rng)
		}
	case kindPushRange:
		if m.lo < lo || m.lo > hi || int64(m.n) > hi-m.lo {
			return fmt.Sprintf("%d values at key %d: keys not within the server's range %v", m.n, m.lo, s.rng)
		}
	case kindPullKeys, kindPushKeys:
		if n := len(m.keys); n > 0 && (m.keys[0] < lo || m.keys[n-1] >= hi) {
			return fmt.Sprintf("keys %d..%d not within the server's range %v", m.keys[0], m.keys[n-1], s.rng)
		}
	}
	if m.kind == kindPushRange || m.kind == kindPushKeys {
		r.vals = m.floats()
		if i := firstNonFinite(r.vals); i >= 0 {
			k := m.lo + int64(i)
			if m.kind == kindPushKeys {
				k = m.keys[i]
			}
			return fmt.Sprintf("non-finite value %g at key %d", r.vals[i], k)
		}
	}
	return ""
}

// serve answers a request that may proceed.
func (s *server) serve(r *request, now time.Duration) error {
	w, m := r.worker, &r.msg
	held := now - r.arrived
	s.stats.HeldSeconds += held.Seconds()
	switch m.kind {
	case kindPullRange, kindPullKeys:
		st := max(s.ctl.Clock(w)-s.ctl.MinClock(), 0)
		s.stats.Pulls++
		s.stats.Staleness.Add(st)
		var vals []float32
		if m.kind == kindPullRange {
			vals = s.upd.w[m.lo-int64(s.rng.Lo) : m.hi-int64(s.rng.Lo)]
		} else {
			s.keyed = s.keyed[:0]
			for _, k := range m.keys {
				s.keyed = append(s.keyed, s.upd.w[k-int64(s.rng.Lo)])
			}
			vals = s.keyed
		}
		return s.send(w, appendValuesReply(s.out[:0], uint32(st), held, vals))
	case kindPushRange, kindPushKeys:
		s.ctl.Pushed(w, now)
		s.stats.Pushes++
		s.applyPush(r)
	case kindDone:
		s.ctl.Finished(w)
		s.finished[w] = true
		if s.bsp != nil {
			s.completeRounds()
		}
	}
	return s.send(w, appendOK(s.out[:0], held))
}

// drain serves held requests that may now proceed, until none can.
func (s *server) drain(now time.Duration) error {
	for progress := true; progress; {
		progress = false
		for w, r := range s.pending {
			if r != nil && s.ctl.MayProceed(w, now) {
				s.pending[w] = nil
				if err := s.serve(r, now); err != nil {
					return err
				}
				progress = true
			}
		}
	}
	return nil
}

// send sends a reply to worker w; a failure is fatal.
func (s *server) send(w int, b []byte) error {
	s.out = b[:0]
	s.stats.BytesSent += int64(len(b))
	if err := s.c.SendBytes(b, s.workerRank(w), ReplyTag); err != nil {
		return fmt.Errorf("ps server rank %d: reply to worker rank %d: %w", s.rank, s.workerRank(w), err)
	}
	return nil
}

// reject answers rank src with an error naming it; state is not touched.
func (s *server) reject(src int, kind msgKind, reason string) error {
	what := "request"
	if kind != 0 {
		what = kind.String()
	}
	who := fmt.Sprintf("worker rank %d", src)
	if src < s.cfg.Servers {
		who = fmt.Sprintf("rank %d", src)
	}
	text := fmt.Sprintf("rejected %s from %s: %s", what, who, reason)
	s.stats.Rejected++
	if len(s.stats.Rejections) < maxRejections {
		s.stats.Rejections = append(s.stats.Rejections, text)
	}
	b := appendError(s.out[:0], codeRejected, text)
	s.out = b[:0]
	s.stats.BytesSent += int64(len(b))
	if err := s.c.SendBytes(b, src, ReplyTag); err != nil {
		return fmt.Errorf("ps server rank %d: reply to rank %d: %w", s.rank, src, err)
	}
	return nil
}
