//go:build cuda

package trainer

import (
	"math"
	"slices"
	"testing"

	"github.com/dml-project/dml/collectives/local"
	"github.com/dml-project/dml/cuda"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/allreduce"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// plainBackend hides a backend's optional interfaces (HostAllocator,
// AsyncDownloader): the trainer then takes the whole-buffer Download /
// Upload path through pageable memory.
type plainBackend struct{ kernels.Backend }

// TestCUDAStagingSameBits: on the GPU, the step's staging (batch gathered
// into pinned memory, each layer's gradient downloaded on the copy stream
// as the backward pass completes it, a one-rank world keeping its gradient
// on the device) moves bits only: the weights equal, bit for bit, those of
// the plain path (one Download and one Upload of the whole gradient per
// step, pageable memory), at 2 ranks sharing the GPU and at 1 rank.
func TestCUDAStagingSameBits(t *testing.T) {
	needGPU(t)
	cfg := DefaultConfig()
	cfg.Data = DataConfig{Name: "synthetic", Samples: 4000, Features: 300, Classes: 10, Noise: 1}
	cfg.Hidden = []int{512, 256}
	cfg.Batch = 256 // 300 KB a batch: the direct pinned upload
	cfg.Epochs = 1
	cfg.MaxSteps = 12
	cfg.EvalEvery = 0
	open := func(plain bool) func(int) kernels.Backend {
		return func(r int) kernels.Backend {
			be, err := cuda.Open(kernels.Options{LocalRank: r})
			if err != nil {
				t.Fatal(err)
			}
			if plain {
				return plainBackend{be}
			}
			return be
		}
	}
	for _, ranks := range []int{2, 1} {
		staged, errs := runWorldWith(t, ranks, cfg, open(false))
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%d ranks, staged, rank %d: %v", ranks, r, err)
			}
		}
		allreduce.OneRankOnDevice = false
		plain, errs := runWorldWith(t, ranks, cfg, open(true))
		allreduce.OneRankOnDevice = true
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%d ranks, plain, rank %d: %v", ranks, r, err)
			}
		}
		for r := range ranks {
			a, b := staged[r].Params, plain[r].Params
			if !slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }) {
				t.Errorf("%d ranks, rank %d: staged weights differ from the plain path's by %.3g", ranks, r, numtest.MaxRelDiff(a, b))
			}
			if staged[r].Epochs[0].Loss != plain[r].Epochs[0].Loss {
				t.Errorf("%d ranks, rank %d: loss %v staged, %v plain", ranks, r, staged[r].Epochs[0].Loss, plain[r].Epochs[0].Loss)
			}
		}
		t.Logf("%d ranks: %d steps, loss %.6f, weights equal bit for bit", ranks, cfg.MaxSteps, staged[0].Epochs[0].Loss)
	}
}

// TestCUDAGraphSameBits: on the GPU, one rank training LeNet-5 with each
// step's forward and backward replayed from a CUDA graph (Trainer.CUDAGraph)
// ends with the weights of the op-by-op run, bit for bit, with the
// libraries (cuBLAS, cuDNN where they load) and with our own kernels; and
// two op-by-op runs with the libraries give the same bits (run-to-run
// determinism).
func TestCUDAGraphSameBits(t *testing.T) {
	needGPU(t)
	// cuDNN's heuristics choose the algorithms: the timed search (the
	// default) may choose others in another run.
	t.Setenv("DML_CUDNN_ALGO", "heuristic")
	cfg := cnnCfg()
	cfg.Data.Samples = 640
	cfg.Batch = 32
	cfg.Epochs = 1
	cfg.MaxSteps = 12
	cfg.EvalEvery = 0
	for _, k := range []kernels.KernelChoice{{}, {Own: true}} {
		run := func(graph bool) *Result {
			w := local.NewWorld(1)
			var res *Result
			errs := w.Run(func(c *local.Comm) error {
				be, err := cuda.Open(kernels.Options{Kernels: k})
				if err != nil {
					return err
				}
				defer be.Close()
				tr := &Trainer{Comm: c, Backend: be, CUDAGraph: graph}
				res, err = tr.Run(cfg)
				return err
			})
			if errs[0] != nil {
				t.Fatalf("--kernels %s, graph %v: %v", k, graph, errs[0])
			}
			return res
		}
		plain, again, graph := run(false), run(false), run(true)
		same := func(a, b []float32) bool {
			return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
		}
		if !same(plain.Params, again.Params) {
			t.Errorf("--kernels %s: two op-by-op runs differ by %.3g", k, numtest.MaxRelDiff(plain.Params, again.Params))
		}
		if !same(plain.Params, graph.Params) {
			t.Errorf("--kernels %s: the graph-replayed run differs from the op-by-op one by %.3g", k, numtest.MaxRelDiff(plain.Params, graph.Params))
		}
		t.Logf("--kernels %s: %d steps, loss %.6f, graph and op-by-op weights equal bit for bit: %v", k, cfg.MaxSteps, graph.Epochs[0].Loss, same(plain.Params, graph.Params))
	}
}

// needGPU skips t where no CUDA device is.
func needGPU(t *testing.T) {
	t.Helper()
	probe, err := cuda.Open(kernels.Options{})
	if cuda.ErrNoDevice(err) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	probe.Close()
}
