package trainer

import (
	"fmt"
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
	// LeNet-5: a span per layer inside forward and backward, in the order
	// they end.
	cnn := cnnCfg()
	cnn.Overlap = false
	var fwd, bwd []string
	for _, l := range []string{"conv1", "relu", "maxpool", "conv2", "relu", "maxpool", "flatten", "fc1", "relu", "fc2", "relu", "fc3"} {
		fwd = append(fwd, l)
		bwd = append([]string{l + " backward"}, bwd...)
	}
	cnnStep := append(append(append(append([]string{"batch"}, fwd...), "forward"), bwd...), "backward", "allreduce", "update", "step")
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
		{"lenet5", cnn, 2, 1, cnnStep, 1, false},
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
				if s.Name == "consistency-wait" {
					// Only when a server held the request: timing-dependent.
					if s.Cat != trace.Wait {
						t.Errorf("consistency-wait of category %v", s.Cat)
					}
					continue
				}
				names = append(names, s.Name)
			}
			// A network's evaluation runs its layers too (their spans end
			// inside "evaluate", after the last step's): not step spans.
			if i := lastIndex(names, "step"); i >= 0 {
				names = names[:i+1]
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

// BenchmarkTimeline trains a small job on two in-process ranks with
// tracing off (trace.Nop) and on (a Recorder per rank, as --timeline
// does) and reports the training loop's samples/s, so that the two can be
// compared run by run (go test -bench Timeline -count N alternates them).
// "mlp" is Fashion-MNIST's shape (784 features, 10 classes, the default
// hidden layers); "tiny" a 20-32-2 network whose steps take microseconds,
// the worst case for a per-span cost.
func BenchmarkTimeline(b *testing.B) {
	mlp := DefaultConfig()
	mlp.Data = DataConfig{Name: "synthetic", Samples: 8192, Features: 784, Classes: 10, Noise: 1}
	mlp.Epochs = 1
	tiny := DefaultConfig()
	tiny.Data = DataConfig{Name: "synthetic", Samples: 16384, Features: 20, Classes: 2, Noise: 1}
	tiny.Hidden, tiny.Epochs = []int{32}, 1
	for _, job := range []struct {
		name string
		cfg  Config
	}{{"mlp", mlp}, {"tiny", tiny}} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/timeline=%v", job.name, on), func(b *testing.B) {
				sum, runs := 0.0, 0
				for b.Loop() {
					w := local.NewWorld(2)
					for r, err := range w.Run(func(c *local.Comm) error {
						tr := &Trainer{Comm: c, Backend: cpu.New()}
						if on {
							tr.Tracer = trace.NewRecorder(trace.Options{Rank: c.Rank()})
						}
						res, err := tr.Run(job.cfg)
						if err == nil && c.Rank() == 0 {
							sum += res.SamplesPerSec
							runs++
						}
						return err
					}) {
						if err != nil {
							b.Fatalf("rank %d: %v", r, err)
						}
					}
				}
				b.ReportMetric(sum/float64(runs), "samples/s")
			})
		}
	}
}

// lastIndex is the index of the last s in names, or -1.
func lastIndex(names []string, s string) int {
	for i := len(names) - 1; i >= 0; i-- {
		if names[i] == s {
			return i
		}
	}
	return -1
}
