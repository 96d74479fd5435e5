package ps

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/dml-project/dml/collectives"
)

// Worker is one worker rank's connection to the servers. Its methods are
// called from one goroutine. Every call sends one request to every server
// (so that all servers count the same pushes) and waits for all replies.
//
// After a failed call the Worker is unusable: later calls return an error
// wrapping ErrDone (arguments rejected before anything was sent, errors
// wrapping ErrArgument, are the exception).
type Worker struct {
	c       Transport
	cfg     Config
	rank    int
	p       int
	ranges  []Range
	clock   int
	filters []Filter
	broken  error
	start   time.Time
	stats   WorkerStats
	out     []byte
	grad    []float32 // filters' copy of the gradient
	split   []int     // splitKeys' bounds, reused
	upd     Update    // the update the filters rewrite (a field: no allocation per push)
	reply   message   // the reply being handled

	// ft moves float32 values apart from their headers (nil: inline);
	// pay is the payload the current build call wants sent after its
	// header, sends the payload sends in flight.
	ft    floatTransport
	pay   []float32
	sends []collectives.Request

	waits   []serverWait // per server, while collecting replies
	replied []bool
}

// NewWorker connects worker rank c.Rank() (>= cfg.Servers) to the servers of
// a model of p keys: it sends each server a hello with its configuration and
// waits for every server to accept it (a server refuses a configuration that
// differs from its own, naming the field). It builds one Filter per
// cfg.Filters entry.
func NewWorker(c Transport, cfg Config, p int) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(c.Size()); err != nil {
		return nil, err
	}
	if c.Rank() < cfg.Servers {
		return nil, fmt.Errorf("ps: NewWorker on rank %d, a server rank (servers are 0..%d): %w",
			c.Rank(), cfg.Servers-1, ErrConfig)
	}
	if p < 0 || Partition(p, cfg.Servers)[0].Len() > math.MaxUint32 {
		return nil, fmt.Errorf("ps: NewWorker: model size %d (at most 2^32-1 keys per server): %w", p, ErrConfig)
	}
	w := &Worker{c: c, cfg: cfg, rank: c.Rank(), p: p, ranges: Partition(p, cfg.Servers)}
	if ft, ok := c.(floatTransport); ok && !cfg.InlineValues {
		w.ft = ft
	}
	w.stats.Rank = w.rank
	for _, f := range cfg.Filters {
		w.filters = append(w.filters, f.NewFilter(p))
	}
	h := helloFor(cfg, p)
	err := w.exchange("hello", func(int, []byte) []byte { return appendHello(w.out[:0], h) },
		func(i int, m *message) error { return w.expect(i, m, kindOK, 0) })
	if err != nil {
		return nil, err
	}
	w.start = cfg.Now()
	return w, nil
}

// Clock is the number of pushes this worker has made.
func (w *Worker) Clock() int { return w.clock }

// Size is the model size P.
func (w *Worker) Size() int { return w.p }

// Pull fills dst (length P) with the current weights, blocking until the
// consistency model lets this worker start its next iteration.
func (w *Worker) Pull(dst []float32) error {
	if len(dst) != w.p {
		return fmt.Errorf("ps worker rank %d: pull into %d values, model has %d: %w", w.rank, len(dst), w.p, ErrArgument)
	}
	return w.pull("pull", func(i int, b []byte) []byte {
		r := w.ranges[i]
		return w.apart(appendPullRange(b, uint32(w.clock), int64(r.Lo), int64(r.Hi)))
	}, func(i int, m *message) error {
		r := w.ranges[i]
		if err := w.expect(i, m, kindValues, r.Len()); err != nil {
			return err
		}
		return w.valuesInto(i, m, dst[r.Lo:r.Hi])
	})
}

// PullKeys fills dst[i] with the weight of keys[i], for a strictly
// increasing list of keys in [0, P) (a sparse working set), blocking as Pull
// does.
func (w *Worker) PullKeys(keys []int64, dst []float32) error {
	if err := w.checkKeys("pull keys", keys, len(dst)); err != nil {
		return err
	}
	split := w.splitKeys(keys)
	return w.pull("pull keys", func(i int, b []byte) []byte {
		return w.apart(appendPullKeys(b, uint32(w.clock), keys[split[i]:split[i+1]]))
	}, func(i int, m *message) error {
		if err := w.expect(i, m, kindValues, split[i+1]-split[i]); err != nil {
			return err
		}
		return w.valuesInto(i, m, dst[split[i]:split[i+1]])
	})
}

// apart asks, on a float transport, for the values reply of request b to
// come apart.
func (w *Worker) apart(b []byte) []byte {
	if w.ft != nil {
		b[0] |= flagReplyApart
	}
	return b
}

// valuesInto puts server i's values reply m into dst: decoded from m, or
// received apart straight into dst.
func (w *Worker) valuesInto(i int, m *message, dst []float32) error {
	if !m.valuesFollow {
		m.floatsInto(dst)
		return nil
	}
	if w.ft == nil {
		return fmt.Errorf("server rank %d sent values apart unasked: %w", i, ErrBadMessage)
	}
	if err := recvFloats(w.ft, dst, i); err != nil {
		return fmt.Errorf("values from server rank %d: %w", i, err)
	}
	w.stats.BytesReceived += 4 * int64(len(dst))
	return nil
}

func (w *Worker) pull(op string, build func(int, []byte) []byte, onReply func(int, *message) error) error {
	st, held := 0, time.Duration(0)
	err := w.exchange(op, build, func(i int, m *message) error {
		st, held = max(st, int(m.staleness)), max(held, m.held)
		return onReply(i, m)
	})
	if err != nil {
		return err
	}
	w.stats.Pulls++
	w.stats.Staleness.Add(st)
	w.stats.HeldSeconds += held.Seconds()
	return nil
}

// Push sends a gradient for the whole model (length P) through the filters
// to the servers; w's clock goes up by one. grad is not modified.
func (w *Worker) Push(grad []float32) error {
	if len(grad) != w.p {
		return fmt.Errorf("ps worker rank %d: push of %d values, model has %d: %w", w.rank, len(grad), w.p, ErrArgument)
	}
	return w.push("push", Update{Dense: true, Values: grad}, w.unfilteredDense(), nil)
}

// PushKeys sends grads[i] for keys[i], for a strictly increasing list of keys
// in [0, P), through the filters to the servers; w's clock goes up by one.
// Servers owning none of the keys still get an (empty) push, so that every
// server counts every push.
func (w *Worker) PushKeys(keys []int64, grads []float32) error {
	if err := w.checkKeys("push keys", keys, len(grads)); err != nil {
		return err
	}
	return w.push("push keys", Update{Keys: keys, Values: grads}, w.unfilteredKeys(keys), nil)
}

// unfilteredKeys is what a keyed push of keys takes on the wire unfiltered;
// -1 (the bytes sent) when the worker has no filters.
func (w *Worker) unfilteredKeys(keys []int64) int64 {
	if len(w.filters) == 0 {
		return -1
	}
	split := w.splitKeys(keys)
	unfiltered := int64(0)
	for i := range w.ranges {
		unfiltered += int64(pushKeysLen(keys[split[i]:split[i+1]], Float32))
	}
	return unfiltered
}

// PushPull is Push(grad) followed by Pull(dst) in one request per server
// (ps-lite's fused push-pull): each server applies the push and answers
// with its range's weights once the consistency model lets this worker's
// next iteration start, so a step costs one round trip instead of two.
// dst and grad may not overlap. When the filters turn the push sparse
// (sigmod), it falls back to a Push and a Pull.
func (w *Worker) PushPull(grad, dst []float32) error {
	if len(grad) != w.p || len(dst) != w.p {
		return fmt.Errorf("ps worker rank %d: push-pull of %d values into %d, model has %d: %w",
			w.rank, len(grad), len(dst), w.p, ErrArgument)
	}
	return w.push("push+pull", Update{Dense: true, Values: grad}, w.unfilteredDense(), dst)
}

// PushPullKeys is PushKeys(keys, grads) followed by PullKeys(keys, dst) in
// one request per server, as PushPull.
func (w *Worker) PushPullKeys(keys []int64, grads, dst []float32) error {
	if err := w.checkKeys("push+pull keys", keys, len(grads)); err != nil {
		return err
	}
	if len(dst) != len(keys) {
		return fmt.Errorf("ps worker rank %d: push+pull keys: %d keys, %d destination values: %w", w.rank, len(keys), len(dst), ErrArgument)
	}
	return w.push("push+pull keys", Update{Keys: keys, Values: grads}, w.unfilteredKeys(keys), dst)
}

func (w *Worker) unfilteredDense() int64 {
	unfiltered := int64(0)
	for _, r := range w.ranges {
		unfiltered += int64(pushRangeLen(r.Len(), Float32))
	}
	return unfiltered
}

// splitKeys is splitKeys(w.ranges, keys) into the worker's reused buffer.
func (w *Worker) splitKeys(keys []int64) []int {
	w.split = splitKeysInto(w.split, w.ranges, keys)
	return w.split
}

// push sends u; with dst != nil it is a fused push+pull that fills dst
// with the weights of the keys pushed (all P when u is dense).
func (w *Worker) push(op string, u Update, unfiltered int64, dst []float32) error {
	if err := w.usable(op); err != nil {
		return err
	}
	orig := u
	if err := w.checkFinite(op, u); err != nil {
		return err
	}
	if len(w.filters) > 0 {
		w.grad = append(w.grad[:0], u.Values...)
		u.Values = w.grad
		w.upd = u
		for _, f := range w.filters {
			if err := f.Filter(&w.upd); err != nil {
				return fmt.Errorf("ps worker rank %d: %s: %w", w.rank, op, err)
			}
		}
		u, w.upd = w.upd, Update{}
		if err := w.checkFiltered(op, u); err != nil {
			return err
		}
	}
	fused := dst != nil
	if fused && (u.Dense != orig.Dense || len(u.Keys) != len(orig.Keys)) {
		// The filters chose other keys than those to pull: push, then pull.
		if err := w.push(op, u, unfiltered, nil); err != nil {
			return err
		}
		if orig.Dense {
			return w.Pull(dst)
		}
		return w.PullKeys(orig.Keys, dst)
	}
	var split []int
	if !u.Dense {
		split = w.splitKeys(u.Keys)
	}
	rangeKind, keysKind := kindPushRange, kindPushKeys
	if fused {
		rangeKind, keysKind = kindPushPull, kindPushPullK
	}
	sent := w.stats.BytesSent
	held, st := time.Duration(0), 0
	apart := w.ft != nil && u.Encoding == Float32
	err := w.exchange(op, func(i int, b []byte) []byte {
		lo, hi := split0(u.Dense, w.ranges[i], split, i)
		switch {
		case apart && u.Dense:
			b = appendPushRangeApart(b, rangeKind, uint32(w.clock), int64(lo), hi-lo)
			w.pay = u.Values[lo:hi]
		case apart:
			b = appendPushKeysApart(b, keysKind, uint32(w.clock), u.Keys[lo:hi])
			w.pay = u.Values[lo:hi]
		case u.Dense:
			b = appendPushRangeKind(b, rangeKind, uint32(w.clock), u.Encoding, int64(lo), u.Values[lo:hi])
		default:
			b = appendPushKeysKind(b, keysKind, uint32(w.clock), u.Encoding, u.Keys[lo:hi], u.Values[lo:hi])
		}
		if fused {
			b = w.apart(b)
		}
		return b
	}, func(i int, m *message) error {
		held = max(held, m.held)
		if !fused {
			return w.expect(i, m, kindOK, 0)
		}
		st = max(st, int(m.staleness))
		lo, hi := split0(u.Dense, w.ranges[i], split, i)
		if err := w.expect(i, m, kindValues, hi-lo); err != nil {
			return err
		}
		return w.valuesInto(i, m, dst[lo:hi])
	})
	if err != nil {
		return err
	}
	w.clock++
	w.stats.Pushes++
	w.stats.PushBytes += w.stats.BytesSent - sent
	if unfiltered < 0 { // no filters: what was sent
		unfiltered = w.stats.BytesSent - sent
	}
	w.stats.PushBytesUnfiltered += unfiltered
	w.stats.HeldSeconds += held.Seconds()
	if fused {
		w.stats.Pulls++
		w.stats.Staleness.Add(st)
	}
	return nil
}

// split0 is the bounds in the pushed values of server i's part: its range
// (dense) or its keys' sub-slice.
func split0(dense bool, r Range, split []int, i int) (int, int) {
	if dense {
		return r.Lo, r.Hi
	}
	return split[i], split[i+1]
}

// Done tells the servers this worker has finished. The Worker may not be
// used afterwards; Stats stays available.
func (w *Worker) Done() error {
	err := w.exchange("done", func(_ int, b []byte) []byte { return appendDone(b, uint32(w.clock)) },
		func(i int, m *message) error { return w.expect(i, m, kindOK, 0) })
	if err != nil {
		return err
	}
	w.stats.Elapsed = w.cfg.Now().Sub(w.start)
	w.broken = ErrDone
	return nil
}

// Stats returns what this worker has measured so far.
func (w *Worker) Stats() WorkerStats {
	s := w.stats
	if w.broken != ErrDone {
		s.Elapsed = w.cfg.Now().Sub(w.start)
	}
	s.Staleness = w.stats.Staleness.clone()
	s.MaxStaleness = max(s.Staleness.Max(), 0)
	return s
}

// Filters returns the worker's filter instances, in order (for inspection,
// e.g. Residue).
func (w *Worker) Filters() []Filter { return w.filters }

func (w *Worker) usable(op string) error {
	switch {
	case w.broken == nil:
		return nil
	case w.broken == ErrDone:
		return fmt.Errorf("ps worker rank %d: %s after Done: %w", w.rank, op, ErrDone)
	default:
		return fmt.Errorf("ps worker rank %d: %s after an earlier failure (%v): %w", w.rank, op, w.broken, ErrDone)
	}
}

// exchange sends build(i) to every server i, then waits for every server's
// reply in turn and hands it to onReply. Any failure breaks the Worker.
func (w *Worker) exchange(op string, build func(int, []byte) []byte, onReply func(int, *message) error) error {
	if err := w.usable(op); err != nil {
		return err
	}
	collectives.EnterOp(w.c, op) // names the op in a stall report (the transport's inspector)
	t0 := w.cfg.Now()
	err := w.exchangeOnce(op, build, onReply)
	w.stats.WaitSeconds += w.cfg.Now().Sub(t0).Seconds()
	if err != nil {
		w.broken = err
	}
	return err
}

func (w *Worker) exchangeOnce(op string, build func(int, []byte) []byte, onReply func(int, *message) error) error {
	w.sends = w.sends[:0]
	for i := range w.ranges {
		w.pay = nil
		b := build(i, w.out[:0])
		w.out = b[:0]
		w.stats.BytesSent += int64(len(b))
		if err := w.c.SendBytes(b, i, RequestTag); err != nil {
			return fmt.Errorf("ps worker rank %d: %s: send to server rank %d: %w", w.rank, op, i, err)
		}
		if w.pay != nil {
			// The values follow straight from the caller's slice.
			r, err := w.ft.Isend(w.pay, i, PayloadTag)
			if err != nil {
				return fmt.Errorf("ps worker rank %d: %s: values to server rank %d: %w", w.rank, op, i, err)
			}
			w.sends = append(w.sends, r)
			w.stats.BytesSent += 4 * int64(len(w.pay))
		}
	}
	w.pay = nil
	for _, r := range w.sends {
		if err := r.Wait(); err != nil {
			return fmt.Errorf("ps worker rank %d: %s: values to a server: %w", w.rank, op, err)
		}
	}
	w.sends = w.sends[:0]
	return w.collect(op, onReply)
}

// collect waits for every server's reply to the request just sent, in the
// order they arrive, skipping keep-alives, and hands each to onReply. It
// takes whichever server answers first: a server that is sending this
// worker a reply (whose values it cannot hand over before the worker takes
// them) must not wait behind another server that holds this worker, or
// two servers and two workers can wait on each other in a cycle. It gives
// up on a server that has been silent for ServerWait(Timeout) (see serverWait).
// ServerWait is how long a worker waits for a reply from a server that
// sends nothing, not even a keep-alive, before it gives up on it: twice
// the transport's timeout.
func ServerWait(timeout time.Duration) time.Duration { return 2 * timeout }

func (w *Worker) collect(op string, onReply func(int, *message) error) error {
	n := len(w.ranges)
	if len(w.waits) != n {
		w.waits, w.replied = make([]serverWait, n), make([]bool, n)
	}
	start := w.cfg.Now()
	for i := range w.waits {
		w.waits[i] = serverWait{server: i, limit: ServerWait(w.cfg.Timeout), last: start}
		w.replied[i] = false
	}
	for left := n; left > 0; {
		from := collectives.AnySource
		if left == 1 {
			from = slices.Index(w.replied, false)
		}
		b, src, _, err := w.c.RecvBytesWithin(from, ReplyTag, w.poll())
		now := w.cfg.Now()
		if err != nil {
			if !errors.Is(err, collectives.ErrTimeout) {
				return fmt.Errorf("ps worker rank %d: %s: receiving replies: %w", w.rank, op, err)
			}
			for i := range w.waits {
				sw := &w.waits[i]
				if w.replied[i] {
					continue
				}
				if sw.expired(now) {
					return fmt.Errorf("ps worker rank %d: %s: no reply from server rank %d for %v: %w",
						w.rank, op, i, sw.silence(now).Round(time.Millisecond), err)
				}
				if sw.stalled(now, w.cfg.StallWarn) {
					w.warn(fmt.Sprintf("stall: ps worker rank %d: %s at clock %d: no word from server rank %d for %v (not even a keep-alive)",
						w.rank, op, w.clock, i, sw.silence(now).Round(time.Millisecond)))
				}
			}
			continue
		}
		if src < 0 || src >= n || w.replied[src] {
			return fmt.Errorf("ps worker rank %d: %s: unexpected message from rank %d: %w", w.rank, op, src, ErrBadMessage)
		}
		w.stats.BytesReceived += int64(len(b))
		m, keepAlive, err := w.waits[src].receive(b, now)
		if err != nil {
			return fmt.Errorf("ps worker rank %d: %s: %w", w.rank, op, err)
		}
		if keepAlive {
			continue
		}
		w.replied[src] = true
		left--
		w.reply = m
		if err := onReply(src, &w.reply); err != nil {
			return fmt.Errorf("ps worker rank %d: %s: %w", w.rank, op, err)
		}
	}
	return nil
}

// poll is how long a worker's receive of replies waits before it checks
// its servers' silence: Timeout/2, or StallWarn/2 when shorter (so that
// the transport's own stall inspector never fires inside it: a held
// worker waits by design, and the server, which knows who holds the
// round up, reports that; the worker reports only a silent server).
func (w *Worker) poll() time.Duration {
	d := w.cfg.Timeout / 2
	if w.cfg.StallWarn > 0 && w.cfg.StallWarn/2 < d {
		d = w.cfg.StallWarn / 2
	}
	return d
}

// warn prints a stall warning through cfg.Warn, or on standard error.
func (w *Worker) warn(msg string) {
	if w.cfg.Warn != nil {
		w.cfg.Warn(msg)
		return
	}
	fmt.Fprintf(os.Stderr, "dml: %s\n", msg)
}

// serverWait is a worker's bookkeeping while it waits for one server's
// reply: when it last heard from the server and when to give up. It does no
// I/O and reads no clock.
type serverWait struct {
	server int           // the server's rank
	limit  time.Duration // give up after this long without a word
	last   time.Time     // when the wait started or the latest keep-alive came
	warned int           // stall warnings given since last
}

// stalled reports whether, at now, the server's silence has reached the
// next multiple of warn (0: never) since the last warning, and counts it.
func (sw *serverWait) stalled(now time.Time, warn time.Duration) bool {
	if warn <= 0 || sw.silence(now) < time.Duration(sw.warned+1)*warn {
		return false
	}
	sw.warned = int(sw.silence(now) / warn)
	return true
}

// receive classifies server bytes b that arrived at now: a keep-alive
// (keepAlive true: keep waiting, the server is alive), an error reply (a
// *ServerError wrapping ErrRejected or ErrWorkerMissing), undecodable bytes
// (ErrBadMessage), or the reply m.
func (sw *serverWait) receive(b []byte, now time.Time) (m message, keepAlive bool, err error) {
	m, err = decodeInto(b, nil, 0) // replies carry no keys
	if err != nil {
		return message{}, false, fmt.Errorf("reply from server rank %d: %w", sw.server, err)
	}
	switch m.kind {
	case kindWait:
		sw.last, sw.warned = now, 0
		return message{}, true, nil
	case kindError:
		kind := ErrRejected
		if m.code == codeMissing {
			kind = ErrWorkerMissing
		}
		return message{}, false, &ServerError{Server: sw.server, Msg: m.text, kind: kind}
	}
	return m, false, nil
}

// silence is how long the server has been silent at now.
func (sw *serverWait) silence(now time.Time) time.Duration { return now.Sub(sw.last) }

// expired reports whether, at now, the server has been silent for the limit.
func (sw *serverWait) expired(now time.Time) bool { return sw.silence(now) >= sw.limit }

// expect checks a reply's kind and value count.
func (w *Worker) expect(i int, m *message, kind msgKind, n int) error {
	if m.kind != kind || m.n != n {
		return fmt.Errorf("server rank %d answered %v with %d values, want %v with %d: %w",
			i, m.kind, m.n, kind, n, ErrBadMessage)
	}
	return nil
}
