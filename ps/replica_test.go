package ps

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/kernels/optim"
)

// replicaJob runs servers with keepers and workers that take `steps` BSP
// (or other) steps of a deterministic gradient; worker 0 snapshots the
// servers' state after every step. It returns the keepers, the snapshots
// (index: steps done) and the servers' stats.
func replicaJob(t *testing.T, cfg Config, workers, steps int) ([]*Keeper, [][2][]float32, []ServerStats) {
	t.Helper()
	cfg = cfg.withDefaults()
	p := 23
	initial := make([]float32, p)
	for i := range initial {
		initial[i] = float32(i%7) - 3
	}
	size := cfg.Servers + workers
	keepers := make([]*Keeper, cfg.Servers)
	stats := make([]ServerStats, cfg.Servers)
	snaps := make([][2][]float32, steps+1)
	world := local.NewWorld(size)
	world.SetTimeout(20 * time.Second)
	errs := world.Run(func(c *local.Comm) error {
		if c.Rank() < cfg.Servers {
			keepers[c.Rank()] = &Keeper{}
			st, err := RunServerKeeping(c, cfg, initial, keepers[c.Rank()])
			stats[c.Rank()] = st
			return err
		}
		w, err := NewWorker(c, cfg, p)
		if err != nil {
			return err
		}
		me := c.Rank() - cfg.Servers
		model, grad := make([]float32, p), make([]float32, p)
		snap := func(step int) error {
			if me != 0 || cfg.Consistency != BSP {
				return nil
			}
			ws, st := make([]float32, p), make([]float32, p)
			if !cfg.Optimizer.HasState() {
				st = nil
			}
			if err := w.Snapshot(ws, st); err != nil {
				return err
			}
			snaps[step] = [2][]float32{ws, st}
			return nil
		}
		if err := snap(0); err != nil {
			return err
		}
		for s := range steps {
			if err := w.Pull(model); err != nil {
				return err
			}
			for i := range grad {
				grad[i] = 0.1*model[i] + float32((i+s+me)%5) - 2
			}
			if err := w.Push(grad); err != nil {
				return err
			}
			if err := snap(s + 1); err != nil {
				return err
			}
		}
		return w.Done()
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return keepers, snaps, stats
}

// heldModel lays a Held's ranges over whole vectors (NaN where not held).
func heldModel(h Held, p int, state bool) ([]float32, []float32) {
	w, st := make([]float32, p), make([]float32, p)
	for i := range w {
		w[i], st[i] = float32(nan()), float32(nan())
	}
	for _, r := range h.Ranges {
		copy(w[r.Range.Lo:r.Range.Hi], r.Weights)
		if state {
			copy(st[r.Range.Lo:r.Range.Hi], r.OptState)
		}
	}
	return w, st
}

func nan() float64 { var z float64; return z / z }

// TestReplicaHeld: under BSP each server's Held is its own range and the
// next server's, bit for bit the servers' state at the newest round both
// were replicated at (every round, or every third), on 2 and 3 servers,
// with and without optimizer state.
func TestReplicaHeld(t *testing.T) {
	for _, tc := range []struct {
		servers, every int
		opt            optim.Kind
		wantRound      int
	}{
		{2, 1, optim.Momentum, 7},
		{3, 1, optim.Adagrad, 7},
		{2, 3, optim.Momentum, 6},
		{2, 1, optim.SGD, 7},
	} {
		t.Run(fmt.Sprintf("servers=%d/every=%d/%v", tc.servers, tc.every, tc.opt), func(t *testing.T) {
			cfg := Config{Servers: tc.servers, Consistency: BSP, Optimizer: tc.opt, LR: 0.1, Momentum: 0.9, ReplicateEvery: tc.every}
			keepers, snaps, stats := replicaJob(t, cfg, 2, 7)
			for s, k := range keepers {
				h, err := k.Held()
				if err != nil {
					t.Fatalf("server %d: %v", s, err)
				}
				if h.Clock != tc.wantRound || len(h.Ranges) != 2 {
					t.Fatalf("server %d: Held at round %d with %d ranges, want round %d with 2", s, h.Clock, len(h.Ranges), tc.wantRound)
				}
				if next := Partition(23, tc.servers)[(s+1)%tc.servers]; h.Ranges[1].Range != next {
					t.Fatalf("server %d holds %v, want the next server's range %v", s, h.Ranges[1].Range, next)
				}
				w, st := heldModel(h, 23, tc.opt.HasState())
				want := snaps[h.Clock]
				for _, r := range h.Ranges {
					lo, hi := r.Range.Lo, r.Range.Hi
					if !slices.Equal(w[lo:hi], want[0][lo:hi]) {
						t.Fatalf("server %d: weights of %v at round %d: %v, want %v", s, r.Range, h.Clock, w[lo:hi], want[0][lo:hi])
					}
					if tc.opt.HasState() && !slices.Equal(st[lo:hi], want[1][lo:hi]) {
						t.Fatalf("server %d: state of %v at round %d: %v, want %v", s, r.Range, h.Clock, st[lo:hi], want[1][lo:hi])
					}
				}
				if wantSent := 7 / tc.every; stats[s].ReplicasSent != wantSent {
					t.Errorf("server %d sent %d replicas, want %d", s, stats[s].ReplicasSent, wantSent)
				}
			}
		})
	}
}

// TestReplicaOff: without ReplicateEvery a server holds its own range
// only, and sends nothing to the others.
func TestReplicaOff(t *testing.T) {
	cfg := Config{Servers: 2, Consistency: BSP, Optimizer: optim.Momentum, LR: 0.1, Momentum: 0.9}
	keepers, snaps, stats := replicaJob(t, cfg, 2, 3)
	for s, k := range keepers {
		h, err := k.Held()
		if err != nil || h.Clock != 3 || len(h.Ranges) != 1 || stats[s].ReplicasSent != 0 {
			t.Fatalf("server %d: %+v, %v (replicas sent %d)", s, h, err, stats[s].ReplicasSent)
		}
		r := h.Ranges[0]
		if !slices.Equal(r.Weights, snaps[3][0][r.Range.Lo:r.Range.Hi]) {
			t.Fatalf("server %d: weights %v", s, r.Weights)
		}
	}
}

// TestReplicaAsync: under SSP and ASP replication every other update ends
// cleanly, and a server holds the next server's range.
func TestReplicaAsync(t *testing.T) {
	for _, c := range []Consistency{SSP, ASP} {
		cfg := Config{Servers: 2, Consistency: c, Staleness: 1, Optimizer: optim.Momentum, LR: 0.1, Momentum: 0.9, ReplicateEvery: 2}
		keepers, _, stats := replicaJob(t, cfg, 3, 6)
		for s, k := range keepers {
			h, err := k.Held()
			if err != nil || len(h.Ranges) != 2 || h.Clock != 6 {
				t.Fatalf("%v server %d: %+v, %v", c, s, h, err)
			}
			if stats[s].ReplicasSent != 18/2 {
				t.Errorf("%v server %d sent %d replicas, want 9", c, s, stats[s].ReplicasSent)
			}
		}
	}
}

// TestHeldPairsRounds: Held pairs its own range and the replica at the
// newest round it holds both at: the live round, or the previous one from
// its own copies; and says so when no round pairs.
func TestHeldPairsRounds(t *testing.T) {
	cfg := Config{Servers: 2, Consistency: BSP, Optimizer: optim.SGD, ReplicateEvery: 1}
	initial := []float32{1, 2, 3, 4}
	s, err := NewServer(cfg, 0, 3, initial)
	if err != nil {
		t.Fatal(err)
	}
	var k Keeper
	k.start(s, initial)
	set := func(live int, own, their [2]int) {
		s.stats.Updates = live
		for i := range 2 {
			k.own[i] = rangeCopy{clock: own[i], buf: []float32{float32(10 + own[i]), float32(20 + own[i])}}
			k.their[i] = rangeCopy{clock: their[i], buf: []float32{float32(30 + their[i]), float32(40 + their[i])}}
		}
		s.upd.w[0], s.upd.w[1] = float32(100+live), float32(200+live)
	}
	for _, tc := range []struct {
		live         int
		own, their   [2]int
		round        int
		mine, their0 float32
	}{
		{5, [2]int{5, 4}, [2]int{5, 4}, 5, 105, 35}, // in step: the live range
		{5, [2]int{5, 4}, [2]int{3, 4}, 4, 14, 34},  // the neighbour's round 5 never came: own copy of 4
		{4, [2]int{3, 4}, [2]int{5, 4}, 4, 104, 34}, // the neighbour is ahead
		{5, [2]int{5, 4}, [2]int{3, 2}, -1, 0, 0},   // nothing pairs
	} {
		set(tc.live, tc.own, tc.their)
		h, err := k.Held()
		if tc.round < 0 {
			if err == nil {
				t.Fatalf("%+v: Held at round %d, want an error", tc, h.Clock)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if h.Clock != tc.round || h.Ranges[0].Weights[0] != tc.mine || h.Ranges[1].Weights[0] != tc.their0 {
			t.Fatalf("%+v: round %d, own %v, replica %v", tc, h.Clock, h.Ranges[0].Weights, h.Ranges[1].Weights)
		}
	}
}
