package ps

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dml-project/dml/collectives"
)

// Chain replication of the servers' key ranges (Li et al., OSDI'14, §4.3:
// "each server replicates the key ranges of its counterclockwise
// neighbours"; here one neighbour, k = 1). With Config.ReplicateEvery > 0
// and more than one server, server i keeps a replica of server i+1's (mod
// S) range: its weights and optimizer state. Under BSP a server sends its
// range to server i-1 after every ReplicateEvery-th round it applies
// (--replicate-every, 1 by default: every round); under SSP, ASP and DSSP
// after every ReplicateEvery-th update. So when server i+1 dies, its range
// is not lost: server i holds it, and a survivor's last word
// (Keeper.Held) writes it with its own.
//
// Departures from the paper: it replicates after aggregation by copying
// the range (weights and state, as one float32 message straight from a
// copy, no encoding, after the round's replies), not by forwarding the aggregated push to be applied
// again at the replica: the copy is exact whatever the update rule, and
// costs one range (two with an optimizer state) per replication, where
// the forwarded push costs one; and a server does not take over a dead
// neighbour's keys while the job runs (MPI is fail-stop): the launcher
// restarts from the survivors' last word instead.
//
// Under BSP the copy must be of the same round as the holder's own range:
// a server keeps its own range at its last two replicated rounds (the
// copies it sends from) and the replica at the last two it received, and
// Held picks the newest round it holds both of. Rounds of different
// servers are at most one apart (a round needs every worker's push, made
// after its pull of the previous round from every server), so a round is
// found unless the dead neighbour's replica of the previous round was
// still on its way.
//
//	replica     kind=10 | clock u32 | n u32  (n float32s follow on ReplicaTag: the weights, then the state)
//	replicaEnd  kind=11                      (the sender is finished: no more replicas)
//
// clock is the round (BSP) or the number of updates (otherwise) the range
// is at.

const (
	kindReplica    msgKind = 10
	kindReplicaEnd msgKind = 11
)

func init() {
	kindNames[kindReplica] = "replica"
	kindNames[kindReplicaEnd] = "replica end"
}

// ReplicaTag carries a replica's float32 values from server to server.
const ReplicaTag = PayloadTag + 1

// rangeCopy is a server's range at one clock: weights then optimizer state
// in one buffer (valid: clock >= 0).
type rangeCopy struct {
	clock int
	buf   []float32
}

// Keeper is where a server running under RunServerKeeping keeps what its
// last word needs: its own range and its replica of the next server's, at
// the rounds it can pair. Held may be called from any goroutine while the
// server runs (or after); the zero value is ready to use.
type Keeper struct {
	mu      sync.Mutex
	s       *Server
	every   int // ReplicateEvery (0: no replica is kept)
	next    int // the server whose replica this one keeps
	nextRng Range
	per     int          // floats per key in a copy: 1 and the optimizer's state per key
	own     [2]rangeCopy // this server's range at its last two replicated clocks
	their   [2]rangeCopy // the replica of next's range at the last two clocks received

	// The driver's side (used by RunServerKeeping's goroutine only).
	sending [2]collectives.Request
	slot    int    // the own copy the next replication fills
	sent    int    // clock of the last replication sent
	ended   bool   // next has said replicaEnd
	hdr     []byte // a replica's header
}

// HeldRange is one key range a server holds: its weights and optimizer
// state (nil for an optimizer without state).
type HeldRange struct {
	Range    Range
	Weights  []float32
	OptState []float32
}

// Held is the state a server can write in its last word: its own range
// and, with replication, the next server's, at one clock.
type Held struct {
	// Clock is the BSP round the ranges are at (the steps the workers
	// have completed); under SSP, ASP and DSSP the smallest clock of the
	// server's workers, the ranges being at whatever updates they had.
	Clock  int
	Ranges []HeldRange
}

// replicaClock is the server's replication clock: under BSP the rounds
// applied since the start of training (bsp.number, less the empty round
// counted when every worker is done), otherwise its updates.
func (s *Server) replicaClock() int {
	if s.bsp != nil {
		return s.startClock + s.stats.Updates
	}
	return s.stats.Updates
}

// start readies k for server s, whose model starts as initial (with the
// optimizer state of cfg.Restore, if any): both copies begin at the
// starting clock, so that a last word is possible from the first step.
func (k *Keeper) start(s *Server, initial []float32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.s = s
	k.per = 1 + s.cfg.Optimizer.StatePer()
	k.own = [2]rangeCopy{{clock: -1}, {clock: -1}}
	k.their = [2]rangeCopy{{clock: -1}, {clock: -1}}
	if s.cfg.ReplicateEvery <= 0 || s.cfg.Servers < 2 {
		return
	}
	k.every = s.cfg.ReplicateEvery
	k.next = (s.rank + 1) % s.cfg.Servers
	k.nextRng = Partition(len(initial), s.cfg.Servers)[k.next]
	c := s.replicaClock()
	k.sent, k.slot = c, 1 // own[0] holds the starting round: the first replication fills own[1]
	k.own[0] = rangeCopy{clock: c, buf: k.rangeBuf(nil, s.upd.w, s.upd.state)}
	var st []float32
	if sp := k.per - 1; sp > 0 {
		st = make([]float32, sp*k.nextRng.Len())
		if r := s.cfg.Restore; r != nil && r.OptState != nil {
			st = r.OptState[sp*k.nextRng.Lo : sp*k.nextRng.Hi]
		}
	}
	k.their[0] = rangeCopy{clock: c, buf: k.rangeBuf(nil, initial[k.nextRng.Lo:k.nextRng.Hi], st)}
}

// rangeBuf fills buf (grown as needed) with w then state.
func (k *Keeper) rangeBuf(buf, w, state []float32) []float32 {
	buf = slices.Grow(buf[:0], len(w)+len(state))
	return append(append(buf, w...), state...)
}

// split is a copy's weights and state as a HeldRange (copied).
func (k *Keeper) split(r Range, buf []float32) HeldRange {
	h := HeldRange{Range: r, Weights: slices.Clone(buf[:r.Len()])}
	if k.per > 1 {
		h.OptState = slices.Clone(buf[r.Len():])
	}
	return h
}

// Held returns the state this server can write when a peer dies: its own
// range and, when it keeps one, its replica of the next server's range, at
// the newest clock it holds both at (see above). It copies what it
// returns; the server goes on meanwhile (Held waits only for the request
// being handled). It fails when the server has not started, or when no
// clock pairs its range with the replica.
func (k *Keeper) Held() (Held, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.s == nil {
		return Held{}, fmt.Errorf("ps: the server has not started")
	}
	if k.every == 0 || k.s.bsp == nil {
		return k.heldNow(), nil
	}
	for _, h := range k.rounds() { // newest first
		if len(h.Ranges) == 2 {
			return h, nil
		}
	}
	s := k.s
	return Held{}, fmt.Errorf("ps server rank %d: no round holds both its range (round %d; copies at %d, %d) and its replica of server rank %d's (rounds %d, %d)",
		s.rank, s.replicaClock(), k.own[0].clock, k.own[1].clock, k.next, k.their[0].clock, k.their[1].clock)
}

// heldNow is what the server holds where there are no rounds to pair
// (k.mu held): its range as it is and, with replication, the newest
// replica.
func (k *Keeper) heldNow() Held {
	s := k.s
	h := Held{Clock: s.heldClock(s.replicaClock()), Ranges: []HeldRange{k.live()}}
	if k.every > 0 {
		t := k.their[0]
		if k.their[1].clock > t.clock {
			t = k.their[1]
		}
		h.Ranges = append(h.Ranges, k.split(k.nextRng, t.buf))
	}
	return h
}

// live is a copy of the server's range as it is (k.mu held).
func (k *Keeper) live() HeldRange {
	s := k.s
	return HeldRange{Range: s.rng, Weights: slices.Clone(s.upd.w), OptState: slices.Clone(s.upd.state)}
}

// heldClock is the Clock of a Held taken at replication clock live.
func (s *Server) heldClock(live int) int {
	if s.bsp != nil {
		return live
	}
	return s.minWorkerClock()
}

// minWorkerClock is the smallest clock of the workers (every one's when
// all are done).
func (s *Server) minWorkerClock() int {
	m := -1
	for w := range s.nw {
		if c := s.ctl.Clock(w); m < 0 || c < m {
			m = c
		}
	}
	return max(m, 0)
}

// replicate sends the server's range to the previous server when
// ReplicateEvery clocks have passed since the last replication: from a
// copy (the previous round's stays, for Held), the values with Isend, so
// that two servers replicating to each other cannot block each other.
func (k *Keeper) replicate(c Transport, ft floatTransport) error {
	s := k.s
	clk := s.replicaClock()
	if k.every == 0 || clk-k.sent < k.every {
		return nil
	}
	slot := k.slot
	if r := k.sending[slot]; r != nil { // the copy's previous send (two replications ago)
		// A large send completes only once its receiver has read the
		// header and posted the receive; that server may itself be here,
		// waiting on its own send to this one. So never wait: while the
		// send is under way, replicate at a later message.
		if t, ok := r.(collectives.Tester); ok && !t.Done() {
			return nil
		}
		if err := r.Wait(); err != nil {
			return fmt.Errorf("ps server rank %d: replica to rank %d: %w", s.rank, k.prev(), err)
		}
		k.sending[slot] = nil
	}
	k.mu.Lock()
	k.own[slot] = rangeCopy{clock: clk, buf: k.rangeBuf(k.own[slot].buf, s.upd.w, s.upd.state)}
	buf := k.own[slot].buf
	k.mu.Unlock()
	k.slot, k.sent = 1-slot, clk
	to := k.prev()
	k.hdr = appendU32(appendU32(append(k.hdr[:0], byte(kindReplica)), uint32(clk)), uint32(len(buf)))
	if err := c.SendBytes(k.hdr, to, RequestTag); err != nil {
		return fmt.Errorf("ps server rank %d: replica to rank %d: %w", s.rank, to, err)
	}
	r, err := ft.Isend(buf, to, ReplicaTag)
	if err != nil {
		return fmt.Errorf("ps server rank %d: replica to rank %d: %w", s.rank, to, err)
	}
	k.sending[slot] = r
	s.stats.ReplicasSent++
	s.stats.ReplicaBytes += 4 * int64(len(buf))
	return nil
}

// prev is the server this one sends its replicas to.
func (k *Keeper) prev() int { return (k.s.rank + k.s.cfg.Servers - 1) % k.s.cfg.Servers }

// receive handles a message msg from server rank src: a replica (whose
// values it receives into the older replica copy) or a replicaEnd.
func (k *Keeper) receive(ft floatTransport, src int, msg []byte) error {
	s := k.s
	if k.every == 0 || src != k.next || len(msg) == 0 {
		return fmt.Errorf("ps server rank %d: a message from server rank %d, which it keeps no replica of", s.rank, src)
	}
	switch msgKind(msg[0]) {
	case kindReplicaEnd:
		k.ended = true
		return nil
	case kindReplica:
	default:
		return fmt.Errorf("ps server rank %d: %v from server rank %d: not a replica", s.rank, msgKind(msg[0]), src)
	}
	if len(msg) != 9 {
		return fmt.Errorf("ps server rank %d: replica header of %d bytes from rank %d", s.rank, len(msg), src)
	}
	clk := int(binary.LittleEndian.Uint32(msg[1:]))
	n := int(binary.LittleEndian.Uint32(msg[5:]))
	if n != k.per*k.nextRng.Len() {
		return fmt.Errorf("ps server rank %d: replica of %d values from rank %d, whose range %v needs %d", s.rank, n, src, k.nextRng, k.per*k.nextRng.Len())
	}
	slot := 0
	if k.their[1].clock < k.their[0].clock {
		slot = 1
	}
	k.mu.Lock()
	buf := slices.Grow(k.their[slot].buf[:0], n)[:n]
	k.their[slot] = rangeCopy{clock: -1, buf: buf} // not read while it arrives
	k.mu.Unlock()
	r, err := ft.Irecv(buf, src, ReplicaTag)
	if err == nil {
		err = r.Wait()
	}
	if err != nil {
		return fmt.Errorf("ps server rank %d: replica values from rank %d: %w", s.rank, src, err)
	}
	k.mu.Lock()
	k.their[slot].clock = clk
	k.mu.Unlock()
	return nil
}

// finish ends replication once the server is finished: it tells the
// previous server that no more replicas come, waits for its sends, and
// takes the next server's replicas until it says the same (so that no
// send is left unmatched), waiting at most timeout for each message.
func (k *Keeper) finish(c Transport, ft floatTransport, timeout time.Duration) error {
	if k.every == 0 {
		return nil
	}
	s := k.s
	if err := c.SendBytes(append(k.hdr[:0], byte(kindReplicaEnd)), k.prev(), RequestTag); err != nil {
		return fmt.Errorf("ps server rank %d: replica end to rank %d: %w", s.rank, k.prev(), err)
	}
	// The next server's replicas first (their receives let its sends
	// end), then this one's sends, which the previous server takes the
	// same way.
	for !k.ended {
		b, _, _, err := c.RecvBytesWithin(k.next, RequestTag, timeout)
		if err != nil {
			return fmt.Errorf("ps server rank %d: waiting for server rank %d's last replica: %w", s.rank, k.next, err)
		}
		if err := k.receive(ft, k.next, b); err != nil {
			return err
		}
	}
	for i, r := range k.sending {
		if r != nil {
			if err := r.Wait(); err != nil {
				return fmt.Errorf("ps server rank %d: replica to rank %d: %w", s.rank, k.prev(), err)
			}
			k.sending[i] = nil
		}
	}
	return nil
}

// HeldRounds is what this server holds at each round it holds anything
// at, newest first: its own range at its live round and at the rounds of
// its copies, the replica at the rounds it received. With three servers
// or more no server holds every range, but the survivors together may,
// at a common round: each writes what it holds at every round, and the
// parts are joined (trainer/paramserver, lastword_ps.go). Under SSP, ASP and DSSP
// there are no rounds: Held's one.
func (k *Keeper) HeldRounds() ([]Held, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.s == nil {
		return nil, fmt.Errorf("ps: the server has not started")
	}
	if k.every == 0 || k.s.bsp == nil {
		return []Held{k.heldNow()}, nil
	}
	return k.rounds(), nil
}

// rounds is HeldRounds under BSP with replication (k.mu held).
func (k *Keeper) rounds() []Held {
	s := k.s
	live := s.replicaClock()
	rounds := []int{live}
	for _, c := range []rangeCopy{k.own[0], k.own[1], k.their[0], k.their[1]} {
		if c.clock >= 0 && !slices.Contains(rounds, c.clock) {
			rounds = append(rounds, c.clock)
		}
	}
	slices.Sort(rounds)
	slices.Reverse(rounds)
	var out []Held
	for _, r := range rounds {
		h := Held{Clock: r}
		switch {
		case r == live:
			h.Ranges = append(h.Ranges, k.live())
		case k.own[0].clock == r:
			h.Ranges = append(h.Ranges, k.split(s.rng, k.own[0].buf))
		case k.own[1].clock == r:
			h.Ranges = append(h.Ranges, k.split(s.rng, k.own[1].buf))
		}
		for _, t := range k.their {
			if t.clock == r {
				h.Ranges = append(h.Ranges, k.split(k.nextRng, t.buf))
				break
			}
		}
		out = append(out, h)
	}
	return out
}
