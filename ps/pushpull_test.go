package ps

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels/optim"
)

// TestPushPullEqualsPushThenPull: under BSP (deterministic), a fused
// PushPull loop gives the same weights, bit for bit, in every step's pulled
// model and at the end, as Pull + Push, dense and keyed, with 2 servers and
// 3 workers, unfiltered and through fp16, with values inside the byte
// messages and apart (Isend/Irecv).
func TestPushPullEqualsPushThenPull(t *testing.T) {
	const p, steps = 37, 6
	initial := make([]float32, p)
	for i := range initial {
		initial[i] = float32(i%7) * 0.25
	}
	grad := func(w, step int, n int) []float32 {
		g := make([]float32, n)
		for i := range g {
			g[i] = float32((i*13+w*5+step*3)%11-5) * 0.125
		}
		return g
	}
	keysOf := func(w, step int) []int64 {
		var keys []int64
		for k := (w + step) % 3; k < p; k += 2 + (w+step)%3 {
			keys = append(keys, int64(k))
		}
		return keys
	}
	for _, keyed := range []bool{false, true} {
		for _, filters := range [][]FilterSpec{nil, {Compress{Format: Float16}}} {
			name := fmt.Sprintf("keyed=%v/filters=%v", keyed, filters)
			t.Run(name, func(t *testing.T) {
				cfg := Config{Servers: 2, Consistency: BSP, Optimizer: optim.Momentum, Momentum: 0.9, LR: 0.1,
					Filters: filters, Timeout: 10 * time.Second}
				pulled := map[[2]bool][][]float32{}
				final := map[[2]bool][]float32{}
				for _, run := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
					fused := run[0]
					cfg.InlineValues = run[1] // values inside the byte messages, or apart
					seen := make([][]float32, 5)
					res := runJob(t, 5, 10*time.Second, cfg, initial, func(w *Worker) (bool, error) {
						wi := w.rank - cfg.Servers
						model := make([]float32, p)
						for step := 0; step < steps; step++ {
							var err error
							switch {
							case keyed && fused:
								k := keysOf(wi, step)
								dst := make([]float32, len(k))
								err = w.PushPullKeys(k, grad(wi, step, len(k)), dst)
								seen[w.rank] = append(seen[w.rank], dst...)
							case keyed:
								k := keysOf(wi, step)
								dst := make([]float32, len(k))
								if err = w.PushKeys(k, grad(wi, step, len(k))); err == nil {
									err = w.PullKeys(k, dst)
								}
								seen[w.rank] = append(seen[w.rank], dst...)
							case fused:
								err = w.PushPull(grad(wi, step, p), model)
								seen[w.rank] = append(seen[w.rank], model...)
							default:
								if err = w.Push(grad(wi, step, p)); err == nil {
									err = w.Pull(model)
								}
								seen[w.rank] = append(seen[w.rank], model...)
							}
							if err != nil {
								return false, err
							}
						}
						st := w.Stats()
						if st.Pushes != steps || st.Pulls != steps {
							return false, fmt.Errorf("stats: %d pushes, %d pulls, want %d each", st.Pushes, st.Pulls, steps)
						}
						if filters == nil && (st.PushBytes != st.PushBytesUnfiltered || st.PushBytes == 0) {
							return false, fmt.Errorf("unfiltered: push bytes %d, unfiltered %d", st.PushBytes, st.PushBytesUnfiltered)
						}
						return true, nil
					})
					res.mustSucceed(t)
					pulled[run], final[run] = seen, res.model()
				}
				base := [2]bool{false, false}
				for run := range final {
					if !slices.Equal(final[base], final[run]) {
						t.Errorf("fused, inline %v: final weights differ:\n push,pull %v\n this      %v", run, final[base], final[run])
					}
					for r := cfg.Servers; r < 5; r++ {
						if !slices.Equal(pulled[base][r], pulled[run][r]) {
							t.Errorf("fused, inline %v: rank %d pulled different weights", run, r)
						}
					}
				}
			})
		}
	}
}

// TestPushPullFallsBackWithSigmod: a sigmod filter changes the keys pushed,
// so PushPull pushes the filtered keys and pulls the whole model.
func TestPushPullFallsBackWithSigmod(t *testing.T) {
	const p = 10
	cfg := Config{Consistency: ASP, LR: 1, Filters: []FilterSpec{SignificantlyModified{Threshold: 0.5}}, Timeout: 10 * time.Second}
	res := runJob(t, 2, 10*time.Second, cfg, make([]float32, p), func(w *Worker) (bool, error) {
		g := make([]float32, p)
		g[3], g[7] = 1, 0.25
		dst := make([]float32, p)
		if err := w.PushPull(g, dst); err != nil {
			return false, err
		}
		want := make([]float32, p)
		want[3] = -1
		if !slices.Equal(dst, want) {
			return false, fmt.Errorf("pulled %v, want %v", dst, want)
		}
		return true, nil
	})
	res.mustSucceed(t)
}

// TestServerStepAllocs: in steady state the server handles pushes, pulls
// and fused push-pulls, dense and keyed, under BSP and ASP, without
// allocating (the transport's receive buffer aside).
func TestServerStepAllocs(t *testing.T) {
	const p = 4096
	keys := make([]int64, 0, 300)
	for k := int64(3); k < p; k += 13 {
		keys = append(keys, k)
	}
	g := make([]float32, p)
	for i := range g {
		g[i] = 1e-3
	}
	gk := g[:len(keys)]
	for _, c := range []Consistency{BSP, ASP} {
		for _, kind := range []string{"push+pull", "pushpull", "push+pull keys", "pushpull keys", "pushpull fp16", "pushpull apart", "pushpull keys apart"} {
			t.Run(fmt.Sprintf("%v/%s", c, kind), func(t *testing.T) {
				cfg := Config{Consistency: c, Optimizer: optim.Momentum, Momentum: 0.9}.withDefaults()
				s, err := NewServer(cfg, 0, 2, make([]float32, p))
				if err != nil {
					t.Fatal(err)
				}
				now := time.Duration(0)
				if out := s.Step(1, appendHello(nil, helloFor(cfg, p)), now); len(out) != 1 {
					t.Fatal("hello not answered")
				}
				clock := uint32(0)
				// Messages as a transport would hand them over, one buffer each.
				var msgs [][]byte
				step := func() {
					var reqs [][]byte
					switch kind {
					case "push+pull":
						reqs = [][]byte{appendPushRange(msgs[0][:0], clock, Float32, 0, g), appendPullRange(msgs[1][:0], clock+1, 0, p)}
					case "pushpull":
						reqs = [][]byte{appendPushRangeKind(msgs[0][:0], kindPushPull, clock, Float32, 0, g)}
					case "pushpull fp16":
						reqs = [][]byte{appendPushRangeKind(msgs[0][:0], kindPushPull, clock, Float16, 0, g)}
					case "pushpull apart":
						reqs = [][]byte{appendPushRangeApart(msgs[0][:0], kindPushPull, clock, 0, p)}
						reqs[0][0] |= flagReplyApart
					case "pushpull keys apart":
						reqs = [][]byte{appendPushKeysApart(msgs[0][:0], kindPushPullK, clock, keys)}
						reqs[0][0] |= flagReplyApart
					case "push+pull keys":
						reqs = [][]byte{appendPushKeys(msgs[0][:0], clock, Float32, keys, gk), appendPullKeys(msgs[1][:0], clock+1, keys)}
					case "pushpull keys":
						reqs = [][]byte{appendPushKeysKind(msgs[0][:0], kindPushPullK, clock, Float32, keys, gk)}
					}
					for _, r := range reqs {
						now += time.Microsecond
						payload := s.PayloadFor(1, r)
						if strings.HasSuffix(kind, "apart") {
							if n := copy(payload, g); n == 0 {
								t.Fatalf("%s: no payload buffer", kind)
							}
						}
						out := s.StepWith(1, r, payload, now)
						if len(out) != 1 || out[0].Msg[0] == byte(kindError) {
							t.Fatalf("%s: reply %v", kind, out)
						}
						if strings.HasSuffix(kind, "apart") && out[0].Vals == nil {
							t.Fatalf("%s: values not apart", kind)
						}
					}
					clock++
				}
				msgs = [][]byte{make([]byte, 0, 5*p+64), make([]byte, 0, 5*p+64)}
				for range 3 {
					step()
				}
				if a := testing.AllocsPerRun(50, step); a != 0 {
					t.Errorf("%v allocations per round trip, want 0", a)
				}
			})
		}
	}
}

// loopTransport is a worker's transport straight into an in-memory Server
// (rank 0). It hands the server its own copy of each request (the server
// may keep a view of it) and the worker a copy of each reply, from reused
// buffers, so that what allocates is the worker's own code.
type loopTransport struct {
	s       *Server
	now     time.Duration
	in      [3][]byte // request copies, used in turn
	next    int
	replies [4][]byte
	n, head int
}

func (l *loopTransport) Rank() int { return 1 }
func (l *loopTransport) Size() int { return 2 }
func (l *loopTransport) SendBytes(b []byte, to, tag int) error {
	l.now += time.Microsecond
	in := append(l.in[l.next][:0], b...)
	l.in[l.next], l.next = in, (l.next+1)%len(l.in)
	for _, o := range l.s.Step(1, in, l.now) {
		l.replies[l.n%len(l.replies)] = append(l.replies[l.n%len(l.replies)][:0], o.Msg...)
		l.n++
	}
	return nil
}
func (l *loopTransport) RecvBytesWithin(from, tag int, d time.Duration) ([]byte, int, int, error) {
	m := l.replies[l.head%len(l.replies)]
	l.head++
	return m, 0, tag, nil
}

// TestWorkerAllocs: a worker's Push, Pull, PushPull and their keyed forms
// allocate nothing per call in steady state (a real transport's receive
// buffers aside: loopTransport reuses its own).
func TestWorkerAllocs(t *testing.T) {
	const p = 2048
	cfg := Config{Consistency: ASP, Timeout: time.Minute}.withDefaults()
	keys := []int64{1, 5, 9, 100, 2000}
	g := make([]float32, p)
	dst := make([]float32, p)
	for _, op := range []string{"push+pull", "pushpull", "push+pull keys", "pushpull keys"} {
		t.Run(op, func(t *testing.T) {
			s, err := NewServer(cfg, 0, 2, make([]float32, p))
			if err != nil {
				t.Fatal(err)
			}
			lt := &loopTransport{s: s}
			w, err := NewWorker(lt, cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			call := func() {
				var err error
				switch op {
				case "push+pull":
					if err = w.Push(g); err == nil {
						err = w.Pull(dst)
					}
				case "pushpull":
					err = w.PushPull(g, dst)
				case "push+pull keys":
					if err = w.PushKeys(keys, g[:len(keys)]); err == nil {
						err = w.PullKeys(keys, dst[:len(keys)])
					}
				case "pushpull keys":
					err = w.PushPullKeys(keys, g[:len(keys)], dst[:len(keys)])
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				call()
			}
			if a := testing.AllocsPerRun(50, call); a != 0 {
				t.Errorf("%v allocations per call, want 0", a)
			}
		})
	}
}

// TestParallelUpdateSameBits: a range long enough to be split over
// goroutines updates to the same bits as one serial optim.Step, and the
// BSP sum of whole-range pushes as the serial loop.
func TestParallelUpdateSameBits(t *testing.T) {
	n := 3*parallelMin + 5
	cfg := Config{Optimizer: optim.Adagrad, LR: 0.05, WeightDecay: 1e-3}.withDefaults()
	w0 := make([]float32, n)
	g := make([]float32, n)
	for i := range w0 {
		w0[i] = float32(i%101) * 0.01
		g[i] = float32(i%37-18) * 0.003
	}
	u := newUpdater(cfg, append([]float32(nil), w0...))
	u.dense(0, g)
	u.dense(0, g)
	want := append([]float32(nil), w0...)
	state := make([]float32, n)
	optim.Step(cfg.optimConfig(), want, g, state)
	optim.Step(cfg.optimConfig(), want, g, state)
	if !slices.Equal(u.w, want) || !slices.Equal(u.state, state) {
		t.Fatal("parallel update differs from the serial one")
	}
	acc := make([]float32, n)
	addInto(acc, g)
	addInto(acc, w0)
	divide(acc, 3)
	for i := range acc {
		if s := (0 + g[i] + w0[i]) / 3; acc[i] != s {
			t.Fatalf("key %d: %v, want %v", i, acc[i], s)
		}
	}
}

// TestDivideSameBits: divide's shortcuts (by 1, by powers of two) give the
// bits of a plain division, subnormals and extremes included.
func TestDivideSameBits(t *testing.T) {
	vals := []float32{0, 1, -1, 3, 1e-45, -1e-45, 1.1754942e-38, 1.17549435e-38, 3.4028235e38, -2.5e-40, 0.1, 7.000001}
	for _, scale := range []float32{1, 2, 3, 4, 5, 8, 64, 1024} {
		for _, f := range []func([]float32, float32){divide, divideSerial} {
			acc := append([]float32(nil), vals...)
			f(acc, scale)
			for i, v := range vals {
				if want := v / scale; math.Float32bits(acc[i]) != math.Float32bits(want) {
					t.Errorf("%g / %g = %g, want %g", v, scale, acc[i], want)
				}
			}
		}
	}
}

// TestBSPRoundLongRangeSameBits: a BSP round over a range long enough to be
// split over goroutines and blocks gives the bits of the serial average
// and optimizer step, for 2 and 3 workers (scale a power of two or not).
func TestBSPRoundLongRangeSameBits(t *testing.T) {
	p := parallelMin + 4099
	for _, workers := range []int{2, 3} {
		cfg := Config{Consistency: BSP, Optimizer: optim.Momentum, Momentum: 0.9, LR: 0.1, WeightDecay: 1e-4}.withDefaults()
		initial := make([]float32, p)
		for i := range initial {
			initial[i] = float32(i%13) * 0.1
		}
		s, err := NewServer(cfg, 0, workers+1, initial)
		if err != nil {
			t.Fatal(err)
		}
		grads := make([][]float32, workers)
		for w := range grads {
			grads[w] = make([]float32, p)
			for i := range grads[w] {
				grads[w][i] = float32((i*7+w*3)%17-8) * 0.01
			}
			s.Step(w+1, appendHello(nil, helloFor(cfg, p)), 0)
		}
		for round := 0; round < 2; round++ {
			for w := range grads {
				if out := s.Step(w+1, appendPushRange(nil, uint32(round), Float32, 0, grads[w]), 0); len(out) != 1 || out[0].Msg[0] != byte(kindOK) {
					t.Fatalf("push: %v", out)
				}
			}
		}
		want := append([]float32(nil), initial...)
		state := make([]float32, p)
		for round := 0; round < 2; round++ {
			avg := make([]float32, p)
			for i := range avg {
				for w := range grads {
					avg[i] += grads[w][i]
				}
				avg[i] /= float32(workers)
			}
			optim.Step(cfg.optimConfig(), want, avg, state)
		}
		if !slices.Equal(s.Stats(0).Weights, want) {
			t.Errorf("%d workers: weights differ from the serial round", workers)
		}
	}
}

// orderTransport answers a worker's requests from two fake servers: server
// 1 answers at once, server 0 only once the worker has taken server 1's
// reply (as when server 0 holds the worker until a peer moves, and that
// peer waits for server 1, which is busy handing this worker its reply).
type orderTransport struct {
	queue [2][][]byte
	taken [2]int
}

func (o *orderTransport) Rank() int { return 2 }
func (o *orderTransport) Size() int { return 3 }
func (o *orderTransport) SendBytes(b []byte, to, tag int) error {
	o.queue[to] = append(o.queue[to], appendOK(nil, 0))
	return nil
}
func (o *orderTransport) RecvBytesWithin(from, tag int, d time.Duration) ([]byte, int, int, error) {
	ready := func(s int) bool { return len(o.queue[s]) > o.taken[s] && (s == 1 || o.taken[1] > o.taken[0]) }
	for _, s := range []int{1, 0} {
		if (from == s || from < 0) && ready(s) {
			o.taken[s]++
			return o.queue[s][o.taken[s]-1], s, tag, nil
		}
	}
	return nil, 0, 0, fmt.Errorf("nothing from %d: %w", from, collectives.ErrTimeout)
}

// TestWorkerTakesRepliesAsTheyCome: a worker collects its servers' replies
// in the order they arrive, not in server order (which could deadlock).
func TestWorkerTakesRepliesAsTheyCome(t *testing.T) {
	cfg := Config{Servers: 2, Consistency: ASP, Timeout: 40 * time.Millisecond}
	w, err := NewWorker(&orderTransport{}, cfg, 10)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := w.Push(make([]float32, 10)); err != nil {
			t.Fatal(err)
		}
	}
}
