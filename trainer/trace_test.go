package trainer

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/trace"
)

// TestTraceSpans: with a Tracer, every step of every strategy records its
// phases in order, inside a "step" span; each evaluation is a span too.
// With overlap on, the communication goroutine's "allreduce" span may end
// before or after "backward" (the last bucket is handed over by the hook
// inside the backward pass), so that case checks each step's spans as a set
// with "step" last.
func TestTraceSpans(t *testing.T) {
	serial := synthCfg()
	serial.Overlap = false
	sparse := psCfg(ps.BSP, 1)
	sparse.Model = SparseLogreg
	sparse.Data = DataConfig{Name: "synthetic-sparse", Samples: 400, Features: 1000, NNZ: 5}
	for _, tc := range []struct {
		name      string
		cfg       Config
		ranks     int
		traced    int      // the rank whose spans are checked
		perStep   []string // span names of one step, in the order they end
		evaluate  int      // evaluate spans expected on that rank (training stops mid-epoch: one)
		unordered bool     // the spans of a step before "step" may end in any order
	}{
		{"allreduce", serial, 2, 1, []string{"batch", "forward", "backward", "allreduce", "update", "step"}, 1, false},
		{"allreduce-overlap", synthCfg(), 2, 1, []string{"batch", "forward", "backward", "allreduce", "update", "step"}, 1, true},
		{"ps", psCfg(ps.BSP, 1), 3, 1, []string{"pull", "upload", "batch", "forward", "backward", "push", "step"}, 1, false},
		{"sparse", sparse, 3, 2, []string{"batch", "pull", "forward+backward", "push", "step"}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.MaxSteps = 7
			w := local.NewWorld(tc.ranks)
			w.SetTimeout(20 * time.Second)
			rec := trace.NewRecorder(trace.Options{Rank: tc.traced})
			res := make([]*Result, tc.ranks)
			for r, err := range w.Run(func(c *local.Comm) error {
				tr := &Trainer{Comm: c, Backend: cpu.New()}
				if c.Rank() == tc.traced {
					tr.Tracer = rec
				}
				var err error
				res[c.Rank()], err = tr.Run(cfg)
				return err
			}) {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			var names []string
			evals := 0
			for _, s := range rec.Snapshot().Spans {
				if s.Name == "evaluate" {
					evals++
					continue
				}
				names = append(names, s.Name)
			}
			var want []string
			for range cfg.MaxSteps {
				want = append(want, tc.perStep...)
			}
			if tc.unordered && len(names) == len(want) {
				// Sort each step's spans before its "step" span; the
				// "step" spans themselves stay where they ended.
				n := len(tc.perStep)
				names = slices.Clone(names)
				for i := 0; i+n <= len(names); i += n {
					slices.Sort(names[i : i+n-1])
				}
				for i := 0; i+n <= len(want); i += n {
					slices.Sort(want[i : i+n-1])
				}
			}
			if !slices.Equal(names, want) {
				t.Errorf("spans:\n%s\nwant %d × [%s]", strings.Join(names, " "), cfg.MaxSteps, strings.Join(tc.perStep, " "))
			}
			if evals != tc.evaluate {
				t.Errorf("%d evaluate spans, want %d", evals, tc.evaluate)
			}
		})
	}
}
