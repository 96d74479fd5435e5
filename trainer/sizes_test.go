package trainer

import (
	"math"
	"testing"

	"github.com/dml-project/dml/trainer/internal/numtest"
)

// TestHugeBatchIsFullBatch: training with --batch MaxInt or 2^62 gives the
// weights of a batch of exactly the largest shard (full-batch gradient
// descent), on one rank and on several.
func TestHugeBatchIsFullBatch(t *testing.T) {
	for _, n := range []int{1, 3} {
		cfg := synthCfg()
		cfg.Shuffle = true
		cfg.Batch = (cfg.Data.Samples + n - 1) / n
		ref := mustRun(t, n, cfg)[0]
		if ref.Steps != cfg.Epochs {
			t.Fatalf("%d ranks, batch %d: %d steps, want one per epoch", n, cfg.Batch, ref.Steps)
		}
		for _, b := range []int{math.MaxInt, 1 << 62} {
			cfg.Batch = b
			got := mustRun(t, n, cfg)[0]
			if got.Steps != ref.Steps || numtest.MaxRelDiff(got.Params, ref.Params) != 0 {
				t.Errorf("%d ranks, batch %d: %d steps, weights differ by %g from the full batch's", n, b, got.Steps, numtest.MaxRelDiff(got.Params, ref.Params))
			}
		}
	}
}
