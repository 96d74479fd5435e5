package stopvote

import (
	"math/rand/v2"
	"testing"
)

// voteSim runs the ps stop vote's rules for W workers over boundaries: a
// signal comes to one worker (or to a server, whose note reaches every
// worker) at some boundary; notes take a random number of boundaries to
// arrive. Under bsp the workers vote at the same boundary (they are in
// step): the first worker combines the flags as voteStop does.
func voteSim(t *testing.T, bsp bool, workers int, seed uint64) (stopAt []int, notesSent int) {
	rng := rand.New(rand.NewPCG(seed, 3))
	votes := make([]Vote, workers)
	for w := range votes {
		votes[w] = Vote{BSP: bsp, Workers: workers, Me: w}
	}
	signalled, at := rng.IntN(workers+1), 2+rng.IntN(3) // workers: a server
	arrive := make([][]int, workers)                    // boundaries at which a note arrives
	if signalled == workers {
		for w := range workers {
			arrive[w] = append(arrive[w], at+rng.IntN(3))
		}
	}
	stopAt = make([]int, workers)
	for w := range stopAt {
		stopAt[w] = -1
	}
	for b := 0; b < 20; b++ {
		steps := make([]Step, workers)
		for w := range workers {
			if stopAt[w] >= 0 {
				continue
			}
			note := false
			for _, a := range arrive[w] {
				note = note || a <= b
			}
			steps[w] = votes[w].Begin(signalled == w && b == at, note)
			for _, to := range steps[w].Notes {
				notesSent++
				arrive[to] = append(arrive[to], b+1+rng.IntN(3))
			}
		}
		if bsp && workers > 1 {
			var others []bool
			for w := 1; w < workers; w++ {
				if steps[w].Decided {
					t.Fatalf("bsp: worker %d decided alone", w)
				}
				others = append(others, steps[w].Flag)
			}
			if votes[0].Combine(steps[0].Flag, others) {
				for w := range stopAt {
					stopAt[w] = b
				}
				return stopAt, notesSent
			}
			continue
		}
		for w := range workers {
			if stopAt[w] < 0 && steps[w].Decided && steps[w].Stop {
				stopAt[w] = b
			}
		}
	}
	return stopAt, notesSent
}

// TestStopVote: under bsp every worker stops after the same step, the one
// at which a worker was signalled or its note from a server arrived (the
// earliest of them); under ssp, asp and dssp the signalled worker stops at
// once and tells the others once each, and every worker stops at the
// first boundary after a note reaches it; nobody stops before a signal
// and nobody runs on.
func TestStopVote(t *testing.T) {
	for _, bsp := range []bool{true, false} {
		for workers := 1; workers <= 5; workers++ {
			for seed := range uint64(30) {
				stopAt, notes := voteSim(t, bsp, workers, seed)
				for w, b := range stopAt {
					if b < 0 {
						t.Fatalf("bsp %v, %d workers, seed %d: worker %d never stopped (%v)", bsp, workers, seed, w, stopAt)
					}
					if b < 2 {
						t.Fatalf("bsp %v, %d workers, seed %d: worker %d stopped at boundary %d, before any signal", bsp, workers, seed, w, b)
					}
					if bsp && b != stopAt[0] {
						t.Fatalf("bsp, %d workers, seed %d: workers stopped at different boundaries %v", workers, seed, stopAt)
					}
				}
				if bsp && notes != 0 {
					t.Fatalf("bsp: %d notes sent, want none (the vote carries the signal)", notes)
				}
				if !bsp && notes != 0 && notes != workers-1 {
					t.Fatalf("%d workers, seed %d: %d notes sent, want none (a server's signal) or one to each other worker", workers, seed, notes)
				}
			}
		}
	}
}
