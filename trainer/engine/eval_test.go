package engine

import (
	"math"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/trainer/model"
)

// TestSumScoresInterrupted: the ranks' scores add up; one rank's
// interrupted evaluation makes every rank's result interrupted, without a
// figure (the others scored their whole shard, that rank only part).
func TestSumScoresInterrupted(t *testing.T) {
	for _, stop := range []bool{false, true} {
		w := local.NewWorld(3)
		w.SetTimeout(10 * time.Second)
		res := make([]EvalResult, 3)
		errs := w.Run(func(c *local.Comm) error {
			s := model.Score{Correct: 2, LossSum: 3, N: 4, Interrupted: stop && c.Rank() == 1}
			var err error
			res[c.Rank()], err = SumScores(c, s)
			return err
		})
		for r, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
			got := res[r]
			if stop != got.Interrupted || stop != math.IsNaN(got.Accuracy) || got.Samples != 12 {
				t.Errorf("interrupted on rank 1: %v; rank %d got %+v", stop, r, got)
			}
			if !stop && (got.Accuracy != 0.5 || got.Loss != 0.75) {
				t.Errorf("rank %d: %+v, want accuracy 0.5, loss 0.75", r, got)
			}
		}
	}
}
