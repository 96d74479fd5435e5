package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/trainer/data"
)

// TestEpochParts: whatever stretches an epoch ran at whatever sizes, what
// they trained and the parts dealt to the next ranks hold every sample of
// the epoch exactly once; the parts differ in length by at most one.
func TestEpochParts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		n := 1 + r.IntN(300)
		shuffle := r.IntN(2) == 0
		var segs []Segment
		trained := map[int]int{}
		// The first stretch walks the standard order of its ranks.
		ranks := 1 + r.IntN(min(n, 6))
		for k := range 1 + r.IntN(3) {
			batch := 1 + r.IntN(9)
			var parts [][]int
			if k == 0 {
				// No step yet, dealt to as many ranks: the standard
				// parts (the merge in turn and the deal in turn undo each
				// other on strided shards).
				parts = epochParts(n, 7, 3, shuffle, []Segment{{Ranks: ranks, Steps: 0, Batch: 1}}, ranks)
				for q, p := range parts {
					order := data.EpochOrder(data.ShardLen(n, q, ranks), shardSeed(7, q), 3, shuffle)
					for i, o := range order {
						if p[i] != q+o*ranks {
							t.Fatalf("n %d, %d ranks: part %d is not shard %d's epoch order", n, ranks, q, q)
						}
					}
				}
			} else {
				parts = epochParts(n, 7, 3, shuffle, segs, ranks)
			}
			steps := r.IntN(partSteps(parts, batch) + 1)
			for _, p := range parts {
				for _, row := range p[:min(steps*batch, len(p))] {
					trained[row]++
				}
			}
			segs = append(segs, Segment{Ranks: ranks, Steps: steps, Batch: batch})
			ranks = 1 + r.IntN(6)
		}
		parts := epochParts(n, 7, 3, shuffle, segs, ranks)
		for q, p := range parts {
			if len(p) > len(parts[0]) || len(parts[0])-len(p) > 1 {
				t.Fatalf("%+v to %d ranks: part %d has %d rows, part 0 %d", segs, ranks, q, len(p), len(parts[0]))
			}
			for _, row := range p {
				trained[row]++
			}
		}
		for row := range n {
			if trained[row] != 1 {
				t.Fatalf("n %d, %+v then %d ranks: row %d trained %d times in the epoch", n, segs, ranks, row, trained[row])
			}
		}
	}
}
