package ps

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"time"
)

// maxRejections is how many rejection messages ServerStats keeps.
const maxRejections = 16

// Server is one server rank's state as a state machine (etcd raft style):
// Step handles one request and returns the replies to send, Tick runs the
// time-driven checks (keep-alives, missing workers); neither does I/O nor
// reads a clock. RunServer is the driver that receives, steps, ticks and
// sends over a Transport; tests drive a Server directly on a fake clock.
//
// Times are durations since the server started (NewServer is time 0), from
// any monotonic clock, and must not go backwards between calls.
//
// Requests that break the protocol (malformed bytes, unknown kinds, keys
// outside the server's range, wrong lengths, non-finite values, a clock that
// disagrees with the server's, a configuration that differs from the
// server's) are answered with an error naming the worker rank and do not
// touch the server's state.
//
// A Server is used from one goroutine.
type Server struct {
	cfg   Config
	rank  int
	size  int
	rng   Range
	nw    int // number of workers
	hello helloInfo

	ctl Controller
	upd *updater
	bsp *bspRound // nil unless BSP

	said      []bool // worker said hello
	finished  []bool
	pending   []*request // at most one held request per worker
	lastHeard []time.Duration
	lastBeat  []time.Duration

	// The stall inspector's state (stallCheck): the minimum clock of the
	// stall being reported, how many intervals were warned about, and the
	// warnings not yet taken.
	stallClock  int
	stallWarned int
	warnings    []string
	quietWarned []int // per worker: StallWarn intervals of silence warned about (quietCheck)

	stats      ServerStats
	startClock int       // the workers' clock at the start (Config.Restore)
	keyed      []float32 // gather buffer for keyed pulls

	// slots are each worker's request structs with their key and value
	// buffers, reused from request to request (see acquire).
	slots [][requestSlots]*request
	// replyBuf is each worker's buffer for values replies sent apart that
	// cannot view the weights (keyed pulls, or weights changed later in
	// the same batch); viewing lists the replies of the batch whose Vals
	// view the weights.
	replyBuf [][]float32
	viewing  []int

	// The replies of the current Step or Tick, and the buffers they are
	// built in (reused from batch to batch; nbuf in use).
	out  []Outgoing
	bufs [][]byte
	nbuf int
}

// Outgoing is a reply the server wants sent: Msg to rank To with ReplyTag,
// then, when Vals is not nil, Vals as a float32 message on PayloadTag (a
// values reply whose values travel apart, straight from the server's
// weights when nothing changes them before the batch is sent). Vals may
// view the weights on huge pages (internal/hugemem), unmapped once the
// Server is unreachable: keep the Server reachable until they are sent.
type Outgoing struct {
	To   int
	Msg  []byte
	Vals []float32
}

// request is a validated request waiting to be served.
type request struct {
	msg     message
	worker  int
	arrived time.Duration
	vals    []float32 // push values (a view of the message, or valBuf)

	keyBuf []int64   // storage for msg.keys, kept with the slot
	valBuf []float32 // storage for decoded values that cannot be viewed in place
}

// requestSlots is how many request structs a worker needs at once: one
// held in a BSP round (its push), one pending (its next pull), one being
// decoded.
const requestSlots = 3

// acquire returns a request struct of worker w that the server does not
// refer to (not pending, not in a BSP round, not avoid), reset but with
// its buffers: no allocation per request in steady state.
func (s *Server) acquire(w int, avoid *request) *request {
	r := s.freeSlot(w, avoid)
	*r = request{keyBuf: r.keyBuf, valBuf: r.valBuf}
	return r
}

// freeSlot is the request struct acquire(w, avoid) will return.
func (s *Server) freeSlot(w int, avoid *request) *request {
	var held *request
	if s.bsp != nil {
		held = s.bsp.contrib[w]
	}
	for i, r := range s.slots[w] {
		if r == nil {
			r = &request{}
			s.slots[w][i] = r
		}
		if r != s.pending[w] && r != held && r != avoid {
			return r
		}
	}
	panic("ps: no free request slot") // unreachable: at most two are referred to
}

// PayloadFor returns, for a request msg from rank `from` whose float32
// values follow apart (on PayloadTag), a buffer of exactly their number to
// receive them into and pass to StepWith; nil when msg carries its values
// (or is malformed: Step rejects it). The buffer is the server's own,
// reused; it stays in use while the request is held.
func (s *Server) PayloadFor(from int, msg []byte) []float32 {
	if len(msg) == 0 || msg[0]&flagValuesFollow == 0 || from < s.cfg.Servers || from >= s.size {
		return nil
	}
	var n uint32
	switch msgKind(msg[0] & kindMask) {
	case kindPushRange, kindPushPull: // kind enc 0 0 clock lo n
		if len(msg) < 20 {
			return nil
		}
		n = binary.LittleEndian.Uint32(msg[16:])
	case kindPushKeys, kindPushPullK: // kind enc 0 0 clock n
		if len(msg) < 12 {
			return nil
		}
		n = binary.LittleEndian.Uint32(msg[8:])
	default:
		return nil
	}
	if int64(n) > int64(s.rng.Len()) {
		return nil // Step rejects it for its keys
	}
	r := s.freeSlot(from-s.cfg.Servers, nil)
	if cap(r.valBuf) < int(n) {
		r.valBuf = make([]float32, n)
	}
	return r.valBuf[:n]
}

// NewServer returns the state of server rank `rank` (< cfg.Servers) in a job
// of size ranks, for the model initial (length P, the same on every rank): it
// copies its own key range out of initial and never writes to initial.
func NewServer(cfg Config, rank, size int, initial []float32) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(size); err != nil {
		return nil, err
	}
	if rank < 0 || rank >= cfg.Servers {
		return nil, fmt.Errorf("ps: server on rank %d, but only ranks 0..%d are servers: %w",
			rank, cfg.Servers-1, ErrConfig)
	}
	nw := size - cfg.Servers
	ctl, err := NewController(cfg, nw)
	if err != nil {
		return nil, err
	}
	rng := Partition(len(initial), cfg.Servers)[rank]
	s := &Server{
		cfg: cfg, rank: rank, size: size, rng: rng, nw: nw, hello: helloFor(cfg, len(initial)),
		ctl: ctl, upd: newUpdaterCopy(cfg, initial[rng.Lo:rng.Hi], rng.Lo),
		said: make([]bool, nw), finished: make([]bool, nw), pending: make([]*request, nw),
		slots: make([][requestSlots]*request, nw), replyBuf: make([][]float32, nw),
		lastHeard: make([]time.Duration, nw), lastBeat: make([]time.Duration, nw),
	}
	if cfg.Consistency == BSP {
		s.bsp = newBSPRound(nw, rng.Len())
	}
	if cfg.Restore != nil { // snapshot.go
		if err := s.restore(cfg.Restore, len(initial)); err != nil {
			return nil, err
		}
	}
	s.stats.Rank, s.stats.Range = rank, rng
	return s, nil
}

// Step handles the request msg from rank `from`, received at time now, and
// returns the replies to send, in order. The replies and their bytes are
// valid until the next call of Step or Tick, and while s is reachable
// (Outgoing). A held request keeps
// referring to msg, so the caller must not modify msg afterwards.
func (s *Server) Step(from int, msg []byte, now time.Duration) []Outgoing {
	return s.StepWith(from, msg, nil, now)
}

// StepWith is Step for a request whose values came apart: payload is the
// buffer from PayloadFor, filled.
func (s *Server) StepWith(from int, msg []byte, payload []float32, now time.Duration) []Outgoing {
	s.begin()
	s.stats.BytesReceived += int64(len(msg)) + 4*int64(len(payload))
	s.handle(from, msg, payload, now)
	s.viewing = s.viewing[:0]
	return s.out
}

// Finished reports whether every worker has said done: the server's work is
// over.
func (s *Server) Finished() bool {
	for _, f := range s.finished {
		if !f {
			return false
		}
	}
	return true
}

// Stats returns what the server measured up to now, and the current weights
// of its range (a copy).
func (s *Server) Stats(now time.Duration) ServerStats {
	st := s.stats
	st.Elapsed = now
	st.Staleness = s.stats.Staleness.clone()
	st.MaxStaleness = max(st.Staleness.Max(), 0)
	st.Rejections = append([]string(nil), s.stats.Rejections...)
	if d, ok := s.ctl.(*DSSPController); ok {
		st.DSSPGrants = d.Grants()
	}
	st.Weights = append([]float32(nil), s.upd.w...)
	// The weights may be on huge pages, which are unmapped once the
	// server is unreachable (internal/hugemem): this may be the server's
	// last use (RunServer's end), so it stays reachable until the copy is
	// made (an allocation in it may run the collector).
	runtime.KeepAlive(s)
	return st
}

func (s *Server) workerRank(w int) int { return w + s.cfg.Servers }

// begin starts a new batch of replies, reusing the previous batch's buffers.
func (s *Server) begin() { s.out, s.nbuf = s.out[:0], 0 }

// next returns an empty buffer for the next reply built by the server.
func (s *Server) next() []byte {
	if s.nbuf < len(s.bufs) {
		return s.bufs[s.nbuf][:0]
	}
	return nil
}

// emit queues reply b, built on next(), to rank `to`, and keeps b's
// storage for the next batch.
func (s *Server) emit(to int, b []byte) {
	if s.nbuf < len(s.bufs) {
		s.bufs[s.nbuf] = b
	} else {
		s.bufs = append(s.bufs, b)
	}
	s.nbuf++
	s.queue(to, b)
}

// queue queues message b to rank `to`.
func (s *Server) queue(to int, b []byte) {
	s.stats.BytesSent += int64(len(b))
	s.out = append(s.out, Outgoing{To: to, Msg: b})
}

// handle decodes, validates and serves or holds one request from rank src.
func (s *Server) handle(src int, b []byte, payload []float32, now time.Duration) {
	if src < s.cfg.Servers || src >= s.size {
		s.reject(src, 0, fmt.Sprintf("rank %d is not a worker rank (workers are %d..%d)",
			src, s.cfg.Servers, s.size-1))
		return
	}
	w := src - s.cfg.Servers
	s.lastHeard[w] = now
	r := s.acquire(w, nil)
	m, err := decodeInto(b, r.keyBuf, s.rng.Hi-s.rng.Lo)
	if err != nil {
		s.reject(src, 0, err.Error())
		return
	}
	if cap(m.keys) > cap(r.keyBuf) {
		r.keyBuf = m.keys[:0]
	}
	switch {
	case s.finished[w]:
		s.reject(src, m.kind, "worker already said done")
		return
	case s.pending[w] != nil:
		s.reject(src, m.kind, fmt.Sprintf("its %v is still being held", s.pending[w].msg.kind))
		return
	case m.kind == kindHello:
		if d := m.hello.diff(s.hello); d != "" {
			s.reject(src, m.kind, "configuration differs: "+d)
			return
		}
		s.said[w] = true
		s.emit(src, appendOK(s.next(), 0))
		return
	case !s.said[w]:
		s.reject(src, m.kind, "request before hello (NewWorker)")
		return
	}
	r.msg, r.worker, r.arrived = m, w, now
	if reason := s.validate(r, payload); reason != "" {
		s.reject(src, m.kind, reason)
		return
	}
	if m.kind == kindDone || s.ctl.MayProceed(w, now) {
		s.serve(r, now)
		s.drain(now)
		return
	}
	s.pending[w] = r
	s.lastBeat[w] = now
}

// validate checks r completely against the server's state and decodes push
// values; it returns the reason for rejecting r, or "".
func (s *Server) validate(r *request, payload []float32) string {
	m := &r.msg
	switch m.kind {
	case kindPullRange, kindPullKeys, kindPushRange, kindPushKeys, kindPushPull, kindPushPullK, kindDone, kindSnapshot:
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
	case kindPushRange, kindPushPull:
		if m.lo < lo || m.lo > hi || int64(m.n) > hi-m.lo {
			return fmt.Sprintf("%d values at key %d: keys not within the server's range %v", m.n, m.lo, s.rng)
		}
	case kindPullKeys, kindPushKeys, kindPushPullK:
		if n := len(m.keys); n > 0 && (m.keys[0] < lo || m.keys[n-1] >= hi) {
			return fmt.Sprintf("keys %d..%d not within the server's range %v", m.keys[0], m.keys[n-1], s.rng)
		}
	}
	if m.valuesFollow != (payload != nil) || len(payload) != m.n && payload != nil {
		return fmt.Sprintf("%d values apart, header announces %d (apart: %v)", len(payload), m.n, m.valuesFollow)
	}
	if m.kind.isPush() {
		if m.valuesFollow {
			r.vals = payload
		} else {
			r.vals = m.floatsView(r.valBuf)
			if cap(r.vals) > cap(r.valBuf) && !m.viewed(r.vals) {
				r.valBuf = r.vals[:0]
			}
		}
		if i := firstNonFinite(r.vals); i >= 0 {
			k := m.lo + int64(i)
			if m.kind.keyed() {
				k = m.keys[i]
			}
			return fmt.Sprintf("non-finite value %g at key %d", r.vals[i], k)
		}
	}
	return ""
}

// serve answers a request that may proceed.
func (s *Server) serve(r *request, now time.Duration) {
	w, m := r.worker, &r.msg
	held := now - r.arrived
	if m.kind != kindPushPull && m.kind != kindPushPullK { // counted once, when its pull is served
		s.stats.HeldSeconds += held.Seconds()
	}
	switch m.kind {
	case kindPullRange, kindPullKeys:
		st := max(s.ctl.Clock(w)-s.ctl.MinClock(), 0)
		s.stats.Pulls++
		s.stats.Staleness.Add(st)
		var vals []float32
		keyed := m.kind == kindPullKeys
		if !keyed {
			vals = s.upd.w[m.lo-int64(s.rng.Lo) : m.hi-int64(s.rng.Lo)]
		} else {
			g := s.keyed[:0]
			if m.replyApart {
				g = s.replyBuf[w][:0]
			}
			table, keys := s.upd.w, m.keys
			if !m.runs {
				for _, k := range keys {
					g = append(g, table[int(k)-s.rng.Lo])
				}
			} else {
				for i := 0; i < len(keys); { // a run of consecutive keys: one copy
					j := runEnd(keys, i)
					lo := int(keys[i]) - s.rng.Lo
					g = append(g, table[lo:lo+j-i]...)
					i = j
				}
			}
			if m.replyApart {
				s.replyBuf[w] = g
			} else {
				s.keyed = g
			}
			vals = g
		}
		if !m.replyApart {
			s.emit(s.workerRank(w), appendValuesReply(s.next(), uint32(st), held, vals))
			return
		}
		s.emit(s.workerRank(w), appendValuesHeader(s.next(), uint32(st), held, len(vals)))
		o := &s.out[len(s.out)-1]
		o.Vals = vals
		s.stats.BytesSent += 4 * int64(len(vals))
		if !keyed {
			s.viewing = append(s.viewing, len(s.out)-1)
		}
		return
	case kindSnapshot: // snapshot.go
		s.serveSnapshot(r)
		return
	case kindPushRange, kindPushKeys:
		s.ctl.Pushed(w, now)
		s.stats.Pushes++
		s.applyPush(r)
	case kindPushPull, kindPushPullK:
		// The push now; the pull of the same keys once the consistency model
		// lets the worker's next iteration start (at once, or held).
		s.ctl.Pushed(w, now)
		s.stats.Pushes++
		s.applyPush(r)
		p := s.acquire(w, r)
		p.worker, p.arrived = w, r.arrived
		p.msg = message{kind: kindPullRange, clock: m.clock + 1, lo: m.lo, hi: m.hi, n: m.n, replyApart: m.replyApart}
		if m.kind == kindPushPullK {
			p.keyBuf = append(p.keyBuf[:0], m.keys...)
			p.msg.kind, p.msg.keys, p.msg.runs = kindPullKeys, p.keyBuf, m.runs
		}
		if s.ctl.MayProceed(w, now) {
			s.serve(p, now)
		} else {
			s.pending[w] = p
			s.lastBeat[w] = now
		}
		return
	case kindDone:
		s.ctl.Finished(w)
		s.finished[w] = true
		if s.bsp != nil {
			s.completeRounds()
		}
	}
	s.emit(s.workerRank(w), appendOK(s.next(), held))
}

// drain serves held requests that may now proceed, until none can.
func (s *Server) drain(now time.Duration) {
	for progress := true; progress; {
		progress = false
		for w, r := range s.pending {
			if r != nil && s.ctl.MayProceed(w, now) {
				s.pending[w] = nil
				s.serve(r, now)
				progress = true
			}
		}
	}
}

// reject answers rank src with an error naming it; state is not touched.
func (s *Server) reject(src int, kind msgKind, reason string) {
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
	s.emit(src, appendError(s.next(), codeRejected, text))
}

// detach gives the batch's replies that view the weights a copy of their
// own (in the worker's reply buffer), before the weights change.
func (s *Server) detach() {
	for _, i := range s.viewing {
		o := &s.out[i]
		w := o.To - s.cfg.Servers
		s.replyBuf[w] = append(s.replyBuf[w][:0], o.Vals...)
		o.Vals = s.replyBuf[w]
	}
	s.viewing = s.viewing[:0]
}
