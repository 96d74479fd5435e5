package trainer

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// bucketCfg is synthCfg with one bucket per layer (the smallest plan).
func bucketCfg() Config {
	cfg := synthCfg()
	cfg.BucketBytes = 4
	return cfg
}

// TestOverlapSameBits: for a fixed bucket plan, reducing the buckets on the
// communication goroutine during the backward pass gives the weights of
// reducing them after it, bit for bit, on every rank count and algorithm;
// and the one-bucket plan (--bucket-mb 0) is what the unbucketed code
// computed (same AllReduce call as before buckets existed).
func TestOverlapSameBits(t *testing.T) {
	for _, algo := range []collectives.Algorithm{collectives.Ring, collectives.Tree} {
		for _, n := range []int{2, 3, 4} {
			for _, capBytes := range []int{0, 4, 300} {
				t.Run(fmt.Sprintf("%s/ranks=%d/cap=%d", algo, n, capBytes), func(t *testing.T) {
					cfg := synthCfg()
					cfg.Allreduce, cfg.BucketBytes = algo, capBytes
					cfg.Overlap = false
					off := mustRun(t, n, cfg)
					cfg.Overlap = true
					on := mustRun(t, n, cfg)
					for r := range on {
						if !slices.Equal(on[r].Params, off[r].Params) {
							t.Errorf("rank %d: overlapped weights differ from sequential ones (max rel %.3g)", r, numtest.MaxRelDiff(on[r].Params, off[r].Params))
						}
						if !slices.Equal(on[r].Params, on[0].Params) {
							t.Errorf("rank %d's weights differ from rank 0's", r)
						}
					}
					if got, want := on[0].Epochs[0].Loss, off[0].Epochs[0].Loss; got != want {
						t.Errorf("epoch loss %v overlapped, %v sequential", got, want)
					}
					if n == 2 && capBytes > 0 {
						// At 2 ranks every algorithm's sum is a+b, whatever
						// the plan: buckets and the bucket-wise update
						// must then give the one-bucket weights exactly.
						cfg.BucketBytes = 0
						if one := mustRun(t, n, cfg); !slices.Equal(one[0].Params, on[0].Params) {
							t.Errorf("2 ranks: buckets of %d bytes give other weights than one bucket", capBytes)
						}
					}
				})
			}
		}
	}
}

// TestBucketedEquivalence: N ranks × batch b with per-layer buckets,
// overlapped, still give 1 rank × batch N·b's weights.
func TestBucketedEquivalence(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		got := checkOneRankEquivalent(t, n, bucketCfg())
		if h := got[0].Epochs[0].CommHidden; h == nil || *h < 0 || *h > 1 {
			t.Errorf("ranks %d: comm_hidden %v, want a share in [0,1]", n, h)
		}
	}
}

// failingGemm is the cpu backend whose failAt-th Gemm call fails.
type failingGemm struct {
	*cpu.Backend
	calls, failAt int
}

var errGemm = errors.New("gemm failed on purpose")

func (f *failingGemm) Gemm(ta, tb bool, m, n, k int, alpha float32, a, b kernels.Buffer, beta float32, c kernels.Buffer) error {
	f.calls++
	if f.calls == f.failAt {
		return errGemm
	}
	return f.Backend.Gemm(ta, tb, m, n, k, alpha, a, b, beta, c)
}

// TestOverlapBackwardFails: a backward pass that fails after it handed
// buckets to the communication goroutine ends the run with its error on
// every rank, without waiting for anything.
func TestOverlapBackwardFails(t *testing.T) {
	cfg := bucketCfg()
	// Forward is 3 Gemms; backward's are layer 2's weight gradient (4),
	// its input gradient (5), layer 1's weight gradient (6): the 6th call
	// fails after layer 2's bucket went to the goroutine.
	// A rank that waited for the buckets never sent would end on the
	// world's timeout instead of the Gemm's error.
	_, errs := runWorldWith(t, 2, cfg, func(int) kernels.Backend { return &failingGemm{Backend: cpu.New(), failAt: 6} })
	for r, err := range errs {
		if !errors.Is(err, errGemm) || errors.Is(err, collectives.ErrTimeout) {
			t.Errorf("rank %d: %v, want the Gemm's error", r, err)
		}
	}
}
