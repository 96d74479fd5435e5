package watch

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/stall"
)

// sim is a liveness ring of rules on a fake clock and a simulated
// network: each link (rank → its successor) delivers its records in order
// (TCP), the links among themselves in a random interleaving (seeded), a
// killed rank's link closes after what it sent is delivered, and time
// moves only when the test says.
type sim struct {
	t     *testing.T
	rng   *rand.Rand
	now   time.Time
	quiet time.Duration
	ranks []*simRank
}

type simRank struct {
	w        *rules
	alive    bool
	byeSent  bool     // nothing more goes out on its link
	inbox    []record // from the predecessor, in order
	closedIn bool     // the predecessor's link closed (after inbox)
	done     bool     // stopped watching the predecessor
	deaths   []Death
	notices  []Death
	op       stall.Op // what it reports in its status records
	got      [8]int   // records delivered to it, by kind
}

const simTick = 250 * time.Millisecond

func newSim(t *testing.T, n int, seed uint64) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 7)), now: time.Unix(1000, 0), quiet: 2 * time.Second}
	for r := range n {
		w := newRules(r, n, simTick)
		w.watching(hello{rank: (r - 1 + n) % n, pid: 100 + (r-1+n)%n, host: "h"}, s.now)
		s.ranks = append(s.ranks, &simRank{w: w, alive: true, op: stall.Op{Name: "allreduce", Seq: uint64(r), Step: 3}})
	}
	return s
}

// send puts r's records on its link.
func (s *sim) send(r int, recs ...record) {
	x := s.ranks[r]
	for _, rec := range recs {
		if !x.alive || x.byeSent {
			return
		}
		s.ranks[(r+1)%len(s.ranks)].inbox = append(s.ranks[(r+1)%len(s.ranks)].inbox, rec)
		if rec.kind == kindBye {
			x.byeSent = true
		}
	}
}

func (s *sim) status(r int) {
	op := s.ranks[r].op
	p := binary.BigEndian.AppendUint64(nil, op.Seq)
	p = binary.BigEndian.AppendUint64(p, uint64(op.Step))
	s.send(r, record{kindStatus, append(p, op.Name...)})
}

// apply carries out r's effects as Ring.apply does.
func (s *sim) apply(r int, e effects) {
	x := s.ranks[r]
	s.send(r, e.send...)
	if e.death != nil {
		x.deaths = append(x.deaths, *e.death)
	}
	if e.notice != nil {
		x.notices = append(x.notices, *e.notice)
	}
	x.done = x.done || e.done
}

// step delivers one pending event on a random link; false when none is
// pending.
func (s *sim) step() bool {
	var ready []int
	for r, x := range s.ranks {
		if x.alive && !x.done && (len(x.inbox) > 0 || x.closedIn) {
			ready = append(ready, r)
		}
	}
	if len(ready) == 0 {
		return false
	}
	r := ready[s.rng.IntN(len(ready))]
	x := s.ranks[r]
	if len(x.inbox) > 0 {
		rec := x.inbox[0]
		x.inbox = x.inbox[1:]
		x.got[rec.kind]++
		s.apply(r, x.w.received(s.now, rec.kind, rec.payload))
	} else {
		s.apply(r, x.w.closed(s.now))
	}
	return true
}

// settle delivers everything pending.
func (s *sim) settle() {
	for s.step() {
	}
}

// chatter runs k rounds of heartbeats from every live rank, delivered in
// random interleavings (some left in flight).
func (s *sim) chatter(k int) {
	for range k {
		for r := range s.ranks {
			s.status(r)
		}
		for range s.rng.IntN(2 * len(s.ranks)) {
			s.step()
		}
		s.now = s.now.Add(simTick / 4)
	}
}

// kill ends rank r without a bye: its link closes once what it sent is
// delivered.
func (s *sim) kill(r int) {
	s.ranks[r].alive = false
	s.ranks[(r+1)%len(s.ranks)].closedIn = true
}

// idle moves the clock by d in ticks; at each, a live watcher with nothing
// to read times out.
func (s *sim) idle(d time.Duration) {
	for end := s.now.Add(d); s.now.Before(end); {
		s.now = s.now.Add(simTick)
		for r, x := range s.ranks {
			if x.alive && !x.done && len(x.inbox) == 0 && !x.closedIn {
				s.apply(r, x.w.quietFor(s.now, s.quiet))
			}
		}
		s.settle()
	}
}

func (s *sim) reports() (deaths, notices map[int][]Death) {
	deaths, notices = map[int][]Death{}, map[int][]Death{}
	for r, x := range s.ranks {
		if len(x.deaths) > 0 {
			deaths[r] = x.deaths
		}
		if len(x.notices) > 0 {
			notices[r] = x.notices
		}
	}
	return deaths, notices
}

// TestRulesKill: whatever the interleaving and wherever a rank is killed,
// its successor alone reports it (with its last status and no silence),
// every other live rank is told exactly once, and nothing else is said.
func TestRulesKill(t *testing.T) {
	for n := 2; n <= 6; n++ {
		for seed := range uint64(40) {
			s := newSim(t, n, seed)
			s.chatter(1 + s.rng.IntN(6))
			k := s.rng.IntN(n)
			s.kill(k)
			s.settle()
			succ := (k + 1) % n
			deaths, notices := s.reports()
			name := fmt.Sprintf("n=%d seed=%d kill %d", n, seed, k)
			if len(deaths) != 1 || len(deaths[succ]) != 1 {
				t.Fatalf("%s: deaths %v, want one found by rank %d", name, deaths, succ)
			}
			d := deaths[succ][0]
			if d.Rank != k || d.By != succ || d.Silent || d.PID != 100+k || d.Op != (stall.Op{Name: "allreduce", Seq: uint64(k), Step: 3}) {
				t.Fatalf("%s: death %+v", name, d)
			}
			for r := range n {
				want := 1
				if r == k || r == succ {
					want = 0
				}
				if len(notices[r]) != want || want == 1 && notices[r][0].Rank != k {
					t.Fatalf("%s: rank %d told %v, want %d notice(s) of rank %d", name, r, notices[r], want, k)
				}
			}
		}
	}
}

// TestRulesTwoDeaths: two ranks killed together: each live rank reports
// or is told of one death only, the first it learns of.
func TestRulesTwoDeaths(t *testing.T) {
	for seed := range uint64(40) {
		s := newSim(t, 5, seed)
		s.chatter(3)
		s.kill(1)
		s.kill(3)
		s.settle()
		for r, x := range s.ranks {
			if !x.alive {
				continue
			}
			if got := len(x.deaths) + len(x.notices); got != 1 {
				t.Fatalf("seed %d: rank %d: deaths %v notices %v, want one report", seed, r, x.deaths, x.notices)
			}
		}
	}
}

// TestRulesByeIsNoDeath: ranks that say bye and then close, in any order
// and interleaving, report nothing; a bye that arrives is the end of
// watching, so the close after it is no death.
func TestRulesByeIsNoDeath(t *testing.T) {
	for seed := range uint64(40) {
		s := newSim(t, 4, seed)
		s.chatter(2)
		for _, r := range s.rng.Perm(4) {
			s.send(r, s.ranks[r].w.bye([]string{ByeEnd, ByeSignal}[s.rng.IntN(2)]))
			s.step()
			s.kill(r) // the process ends: its link closes after the bye
		}
		s.settle()
		if d, n := s.reports(); len(d)+len(n) > 0 {
			t.Fatalf("seed %d: deaths %v notices %v after normal ends", seed, d, n)
		}
	}
}

// TestRulesAbortMutes: once a rank's abort has gone round the ring (its
// bye, then the ending notices), the launcher's kills of every rank, in
// any order, are no deaths; the notice stops before the aborting rank.
func TestRulesAbortMutes(t *testing.T) {
	for seed := range uint64(40) {
		s := newSim(t, 5, seed)
		s.chatter(2)
		a := s.rng.IntN(5)
		s.send(a, s.ranks[a].w.bye(ByeAbort))
		s.settle()
		for r, x := range s.ranks {
			if !x.w.muted {
				t.Fatalf("seed %d: rank %d not muted after rank %d's abort", seed, r, a)
			}
		}
		if n := s.ranks[a].got[kindEnding]; n != 0 {
			t.Fatalf("seed %d: the ending notice came back to the aborting rank (%d times)", seed, n)
		}
		for _, r := range s.rng.Perm(5) {
			s.kill(r)
			s.step()
		}
		s.settle()
		if d, n := s.reports(); len(d)+len(n) > 0 {
			t.Fatalf("seed %d: deaths %v notices %v after an abort", seed, d, n)
		}
	}
}

// TestRulesSilence: a rank that stops sending (stopped, or its link cut
// without a close) is reported silent by its successor once the quiet
// limit has passed, not before, and the others are told.
func TestRulesSilence(t *testing.T) {
	s := newSim(t, 3, 1)
	s.chatter(4)
	s.settle()
	s.ranks[0].byeSent = true // its records stop (without a bye on the wire)
	for r := 1; r < 3; r++ {
		s.ranks[r].byeSent = false
	}
	start := s.now
	for s.now.Sub(start) < s.quiet-simTick {
		s.status(1)
		s.status(2)
		s.idle(simTick)
		if d, _ := s.reports(); len(d) > 0 {
			t.Fatalf("death %v after %v of silence, before the quiet limit %v", d, s.now.Sub(start), s.quiet)
		}
	}
	for range 8 {
		s.status(1)
		s.status(2)
		s.idle(simTick)
	}
	deaths, notices := s.reports()
	if len(deaths[1]) != 1 || !deaths[1][0].Silent || deaths[1][0].Rank != 0 || deaths[1][0].Ago <= s.quiet {
		t.Fatalf("deaths %v, want rank 0 silent for more than %v, found by rank 1", deaths, s.quiet)
	}
	if len(notices[2]) != 1 || len(notices[0]) != 0 {
		t.Fatalf("notices %v, want rank 2 told", notices)
	}
}

// TestRulesOwnPause: a watcher whose own process did not run for longer
// than the quiet limit (SIGSTOP, a suspended VM) does not count that time
// as its predecessor's silence; a real silence afterwards still counts.
func TestRulesOwnPause(t *testing.T) {
	w := newRules(1, 2, simTick)
	t0 := time.Unix(1000, 0)
	w.watching(hello{rank: 0}, t0)
	if e := w.quietFor(t0.Add(30*time.Second), 2*time.Second); e.death != nil {
		t.Fatalf("a 30 s pause of the watcher itself reported %+v", e.death)
	}
	now := t0.Add(30 * time.Second)
	for i := 0; i < 12; i++ {
		now = now.Add(simTick)
		if e := w.quietFor(now, 2*time.Second); e.death != nil {
			if i < 7 {
				t.Fatalf("death after %v of silence following the pause", time.Duration(i+1)*simTick)
			}
			return
		}
	}
	t.Fatal("no death after 3 s of real silence")
}
