package trainer

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/ps"
	"github.com/dml-project/dml/trainer/data"
)

// Sparse logistic regression, the parameter server's own workload (Li et
// al.'s main benchmark): p(y=1|x) = σ(w·x + b) over F features, F possibly
// in the millions. Keys 0..F-1 are w, key F is b — the same flat layout as
// Arch{Sizes: [F, 1]}, so --save writes layer0.weight [1, F] and
// layer0.bias [1]. A worker pulls only the keys its mini-batch touches (its
// working set) and pushes only their gradients. The arithmetic is plain Go
// on the host: a batch touches a few thousand of the F weights, which is not
// work for a dense backend.

// runSparse trains sparse-logreg through the parameter server.
func (t *Trainer) runSparse(cfg Config, train, test *data.Sparse) (*Result, error) {
	c := t.Comm
	n, rank := c.Size(), c.Rank()
	if cfg.PS.Servers >= n {
		return nil, fmt.Errorf("--servers %d in a job of %d ranks leaves no worker: %w", cfg.PS.Servers, n, ErrUsage)
	}
	if train.Classes > 2 || test.Classes > 2 {
		return nil, fmt.Errorf("sparse-logreg is binary, but the data has %d classes", max(train.Classes, test.Classes))
	}
	members, idx := n-cfg.PS.Servers, rank-cfg.PS.Servers
	if err := data.CheckShards(train.Rows, members); err != nil {
		return nil, fmt.Errorf("training set: %w", err)
	}
	arch, err := NewArch(train.Cols, nil, 1, SigmoidCE)
	if err != nil {
		return nil, err
	}
	r := &run{Trainer: t, cfg: cfg, nTrain: train.Rows, nAll: members, reporter: cfg.PS.Servers}
	st := &sparseStepper{r: r, f: train.Cols, test: test}
	if idx >= 0 {
		if st.train, err = train.Subset(data.StridedShard(train.Rows, idx, members)); err != nil {
			return nil, err
		}
		r.shardRows, r.shardIdx = st.train.Rows, idx
	}
	params := make([]float32, arch.NumParams()) // logistic regression starts at zero
	evalAll := func(p []float32) (float64, error) {
		ev, err := EvaluateSparse(c, arch, p, test)
		return ev.Accuracy, err
	}
	return r.loopPS(arch, params, st, evalAll)
}

// sparseStepper is one worker's sparse-logreg step.
type sparseStepper struct {
	r           *run
	f           int          // features; key f is the bias
	train, test *data.Sparse // this worker's shard; the whole test set
	batch       data.Sparse
	keys        []int64
	vals, grads []float32
	full        []float32 // the whole model, for the reporting worker's test accuracy
}

func (s *sparseStepper) step(w *ps.Worker, idx []int, scale float32) (float64, int, float64, error) {
	if err := s.train.Gather(&s.batch, idx); err != nil {
		return 0, 0, 0, err
	}
	t0 := time.Now()
	b := &s.batch
	// The working set: every feature the batch touches, and the bias.
	s.keys = s.keys[:0]
	for _, j := range b.Indices {
		s.keys = append(s.keys, int64(j))
	}
	s.keys = append(s.keys, int64(s.f))
	slices.Sort(s.keys)
	s.keys = slices.Compact(s.keys)
	nk := len(s.keys)
	s.vals = grow(s.vals, nk)
	s.grads = grow(s.grads, nk)
	tw := time.Now()
	if err := w.PullKeys(s.keys, s.vals); err != nil {
		return 0, 0, 0, err
	}
	wait := time.Since(tw).Seconds()
	pos := func(j int32) int {
		k, _ := slices.BinarySearch(s.keys, int64(j))
		return k
	}
	clear(s.grads)
	bias := nk - 1
	var lossSum float64
	correct := 0
	for i := 0; i < b.Rows; i++ {
		lo, hi := b.Indptr[i], b.Indptr[i+1]
		z := float64(s.vals[bias])
		for e := lo; e < hi; e++ {
			z += float64(b.Values[e]) * float64(s.vals[pos(b.Indices[e])])
		}
		y := float64(b.Y[i])
		lossSum += softplus(z) - y*z
		if (z > 0) == (y == 1) {
			correct++
		}
		g := float32((sigmoid(z) - y) * float64(scale))
		for e := lo; e < hi; e++ {
			s.grads[pos(b.Indices[e])] += g * b.Values[e]
		}
		s.grads[bias] += g
	}
	if !finite(lossSum) {
		return 0, 0, 0, fmt.Errorf("loss is %v: lower --lr or check the data: %w", lossSum, ErrNonFinite)
	}
	if st := s.r.cfg.Straggle; st.Rank == s.r.Comm.Rank() && st.Factor > 1 {
		compute := time.Since(t0) - time.Duration(wait*float64(time.Second))
		time.Sleep(time.Duration(float64(compute) * (st.Factor - 1)))
	}
	tw = time.Now()
	if err := w.PushKeys(s.keys, s.grads); err != nil {
		return 0, 0, 0, err
	}
	return lossSum, correct, wait + time.Since(tw).Seconds(), nil
}

func (s *sparseStepper) testAccuracy(w *ps.Worker) (float64, error) {
	s.full = grow(s.full, s.f+1)
	if err := w.Pull(s.full); err != nil {
		return 0, err
	}
	ev, err := sparseCounts(s.test, s.full).sum(nil)
	return ev.Accuracy, err
}

// EvaluateSparse scores logistic-regression weights (arch [F, 1]: w then b)
// on every rank's strided shard of a sparse set and combines the counts.
// Features beyond F are ignored.
func EvaluateSparse(c collectives.Comm, arch Arch, params []float32, set *data.Sparse) (EvalResult, error) {
	if len(arch.Sizes) != 2 || arch.Sizes[1] != 1 || len(params) != arch.NumParams() {
		return EvalResult{}, fmt.Errorf("sparse evaluation needs a logistic regression (one layer, one output), got layers %v", arch.Sizes)
	}
	shard, err := set.Subset(data.StridedShard(set.Rows, c.Rank(), c.Size()))
	if err != nil {
		return EvalResult{}, err
	}
	return sparseCounts(shard, params).sum(c)
}

// sparseCounts scores the weights p (w, then b) on a sparse set.
func sparseCounts(set *data.Sparse, p []float32) evalCounts {
	f := len(p) - 1
	var e evalCounts
	for i := 0; i < set.Rows; i++ {
		z := float64(p[f])
		idx, val := set.Row(i)
		for k, j := range idx {
			if int(j) < f {
				z += float64(val[k]) * float64(p[j])
			}
		}
		y := float64(set.Y[i])
		e.lossSum += softplus(z) - y*z
		if (z > 0) == (y == 1) {
			e.correct++
		}
	}
	e.n = float64(set.Rows)
	return e
}

func grow(v []float32, n int) []float32 {
	if cap(v) < n {
		return make([]float32, n)
	}
	return v[:n]
}

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}

// softplus is log(1 + e^z), stable for large |z|.
func softplus(z float64) float64 { return math.Max(z, 0) + math.Log1p(math.Exp(-math.Abs(z))) }
