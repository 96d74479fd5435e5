package data

import (
	"fmt"
	"slices"
	"testing"
)

// isPermutation reports whether p holds each of 0..len(p)-1 once.
func isPermutation(p []int) bool {
	seen := make([]bool, len(p))
	for _, v := range p {
		if v < 0 || v >= len(p) || seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

func TestEpochOrder(t *testing.T) {
	// Pinned: a change here changes every run's sample order (and breaks
	// resuming from a checkpoint taken before the change).
	golden := map[[2]int][]int{
		{42, 0}: {0, 10, 1, 4, 8, 7, 3, 11, 5, 9, 6, 2},
		{42, 1}: {3, 0, 10, 9, 7, 11, 6, 2, 5, 4, 1, 8},
		{43, 0}: {8, 7, 5, 6, 0, 11, 1, 9, 10, 4, 3, 2},
	}
	for k, want := range golden {
		if got := EpochOrder(12, uint64(k[0]), k[1], true); !slices.Equal(got, want) {
			t.Errorf("EpochOrder(12, seed %d, epoch %d) = %v, want %v", k[0], k[1], got, want)
		}
	}
	if got := EpochOrder(5, 42, 3, false); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("no shuffle: %v", got)
	}
	if got := EpochOrder(0, 1, 0, true); len(got) != 0 {
		t.Errorf("n=0: %v", got)
	}
	for _, n := range []int{1, 2, 3, 100, 1001} {
		for epoch := range 3 {
			p := EpochOrder(n, 7, epoch, true)
			if !isPermutation(p) {
				t.Fatalf("n=%d epoch %d: not a permutation: %v", n, epoch, p)
			}
			if !slices.Equal(p, EpochOrder(n, 7, epoch, true)) {
				t.Fatalf("n=%d epoch %d: not deterministic", n, epoch)
			}
		}
	}
	if slices.Equal(EpochOrder(100, 7, 0, true), EpochOrder(100, 7, 1, true)) {
		t.Error("epochs 0 and 1 share an order")
	}
}

// TestEpochOrderUniform: each sample lands in each position about equally
// often over many epochs (a biased shuffle fails this).
func TestEpochOrderUniform(t *testing.T) {
	const n, epochs = 5, 50000
	var count [n][n]int
	for e := range epochs {
		for pos, v := range EpochOrder(n, 99, e, true) {
			count[v][pos]++
		}
	}
	for v := range n {
		for pos := range n {
			// Expect 10000 ± 4σ (σ ≈ 89).
			if c := count[v][pos]; c < 9640 || c > 10360 {
				t.Errorf("sample %d at position %d %d times in %d epochs", v, pos, c, epochs)
			}
		}
	}
}

func TestStepsPerEpoch(t *testing.T) {
	for _, tc := range []struct {
		n, b, keep, drop int
	}{{10, 3, 4, 3}, {9, 3, 3, 3}, {2, 5, 1, 0}, {0, 4, 0, 0}, {1, 1, 1, 1}} {
		if got := StepsPerEpoch(tc.n, tc.b, false); got != tc.keep {
			t.Errorf("StepsPerEpoch(%d, %d, false) = %d, want %d", tc.n, tc.b, got, tc.keep)
		}
		if got := StepsPerEpoch(tc.n, tc.b, true); got != tc.drop {
			t.Errorf("StepsPerEpoch(%d, %d, true) = %d, want %d", tc.n, tc.b, got, tc.drop)
		}
	}
}

func TestBatchIndicesExample(t *testing.T) {
	// The example drawn in order.go.
	order := []int{7, 2, 9, 4, 0, 5, 1, 8, 3, 6}
	want := [][][]int{{{7, 2, 9}, {4, 0, 5}}, {{1, 8}, {3, 6}}}
	for step := range 2 {
		for rank := range 2 {
			if got := BatchIndices(order, step, 6, rank, 2); !slices.Equal(got, want[step][rank]) {
				t.Errorf("step %d rank %d: %v, want %v", step, rank, got, want[step][rank])
			}
		}
	}
}

// TestBatchIndicesEquivalence: for every n, ranks N and per-rank batch b,
// the pieces of ranks 0..N-1 concatenate to the batch one rank with batch N·b
// sees, each piece has b or fewer samples (b exactly in full batches), and
// an epoch visits every sample exactly once.
func TestBatchIndicesEquivalence(t *testing.T) {
	for _, n := range []int{0, 1, 2, 5, 17, 64, 101} {
		order := EpochOrder(n, 11, 2, true)
		for ranks := 1; ranks <= 5; ranks++ {
			for b := 1; b <= 4; b++ {
				B := ranks * b
				name := fmt.Sprintf("n=%d ranks=%d b=%d", n, ranks, b)
				seen := make([]int, n)
				for step := range StepsPerEpoch(n, B, false) {
					single := BatchIndices(order, step, B, 0, 1)
					lo, hi := BatchRange(n, step, B)
					if !slices.Equal(single, order[lo:hi]) {
						t.Fatalf("%s step %d: one rank sees %v, want order[%d:%d]", name, step, single, lo, hi)
					}
					var joined []int
					for r := range ranks {
						piece := BatchIndices(order, step, B, r, ranks)
						if len(piece) > b || (hi-lo == B && len(piece) != b) {
							t.Fatalf("%s step %d rank %d: %d samples", name, step, r, len(piece))
						}
						joined = append(joined, piece...)
						for _, i := range piece {
							seen[i]++
						}
					}
					if !slices.Equal(joined, single) {
						t.Fatalf("%s step %d: ranks see %v, one rank with batch %d sees %v", name, step, joined, B, single)
					}
				}
				for i, c := range seen {
					if c != 1 {
						t.Fatalf("%s: sample %d seen %d times in the epoch", name, i, c)
					}
				}
				// dropLast: the kept steps are exactly the full batches.
				if d := StepsPerEpoch(n, B, true); d > 0 {
					if lo, hi := BatchRange(n, d-1, B); hi-lo != B {
						t.Fatalf("%s: last kept batch [%d, %d) is partial", name, lo, hi)
					}
				}
			}
		}
	}
}

func TestBatchRangePanics(t *testing.T) {
	for _, a := range [][3]int{{10, 4, 3}, {10, -1, 3}, {10, 0, 0}, {0, 0, 1}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("BatchRange%v did not panic", a)
				}
			}()
			BatchRange(a[0], a[1], a[2])
		}()
	}
}
