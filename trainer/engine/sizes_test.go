package engine

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/collectives/local"
)

// TestScheduleHugeBatch: a per-rank batch far above the shard sizes takes
// each rank's whole shard in one step, and no batch × ranks overflows
// (issue 10: --batch 2^62 on 4 ranks divided by zero, --batch MaxInt ran
// 0 steps).
func TestScheduleHugeBatch(t *testing.T) {
	for _, c := range []struct {
		n, ranks, batch int
		want            string // steps, first global batch, last global batch
	}{
		{10, 3, 2, "[2 6 4]"},
		{10, 3, 4, "[1 10 10]"}, // exactly the largest shard (4, 3, 3)
		{10, 3, 5, "[1 10 10]"}, // one above it
		{10, 3, 3, "[2 9 1]"},   // one below it
		{10, 4, 1 << 62, "[1 10 10]"},
		{10, 1, math.MaxInt, "[1 10 10]"},
		{60000, 7, math.MaxInt, "[1 60000 60000]"},
	} {
		s := newSchedule(c.n, c.ranks, c.batch)
		steps := s.StepsPerEpoch()
		if got := fmt.Sprint([]int{steps, s.GlobalBatch(0), s.GlobalBatch(steps - 1)}); got != c.want {
			t.Errorf("n=%d ranks=%d batch=%d: steps, batches = %s, want %s", c.n, c.ranks, c.batch, got, c.want)
		}
	}
}

// TestJobClampsBatch: the job's own copy of the configuration carries the
// batch the schedule keeps, so that every strategy computing with
// cfg.Batch (AD-PSGD counts its own steps per epoch from it) is safe from
// a huge --batch.
func TestJobClampsBatch(t *testing.T) {
	w := local.NewWorld(3)
	for _, c := range []struct{ batch, want int }{{math.MaxInt, 4}, {1 << 62, 4}, {5, 4}, {4, 4}, {3, 3}} {
		cfg := DefaultConfig()
		cfg.Batch = c.batch
		j, err := (&Trainer{Comm: w.Comm(1)}).newJob(cfg, 10) // shards of 4, 3, 3
		if err != nil {
			t.Fatal(err)
		}
		if j.Cfg.Batch != c.want || j.Sched.Batch != c.want {
			t.Errorf("batch %d: job batch %d, schedule %d; want %d", c.batch, j.Cfg.Batch, j.Sched.Batch, c.want)
		}
	}
}
