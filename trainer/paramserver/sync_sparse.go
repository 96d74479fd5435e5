package paramserver

import (
	"fmt"
	"math"
	"slices"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/engine"
	"github.com/dml-project/dml/trainer/model"
	"github.com/dml-project/dml/trainer/trace"
)

// Sparse logistic regression, the parameter server's own workload (Li et
// al.'s main benchmark): p(y=1|x) = σ(w·x + b) over F features, F possibly
// in the millions. Keys 0..F-1 are w, key F is b — the same flat layout as
// Arch{Sizes: [F, 1]}, so --save writes layer0.weight [1, F] and
// layer0.bias [1]. A worker pulls only the keys its mini-batch touches (its
// working set) and pushes only their gradients. The arithmetic is plain Go
// on the host: a batch touches a few thousand of the F weights, which is not
// work for a dense backend.

// sparseWorker is one worker's sparse-logreg step.
type sparseWorker struct {
	psWorker
	f           int          // features; key f is the bias
	train, test *data.Sparse // this worker's shard; the whole test set
	batch       data.Sparse
	keys        []int64
	vals, grads []float32
	full        []float32 // the whole model, for the reporting worker's test accuracy
	sc          float32
	lossSum     float64
	correct     int
}

// SetStep: nothing to set here. The servers step the weights, each push
// at the rate serverLR gives its clock (schedule.go), which is the rate
// the loop gives this step.
func (s *sparseWorker) SetStep(float32, int) {}

// Prepare gathers the batch and pulls its working set: every feature the
// batch touches, and the bias.
func (s *sparseWorker) Prepare(idx []int, step int) error {
	sp := s.j.Trace.Begin("batch").Cat(trace.IO).Arg("rows", len(idx))
	err := s.train.Gather(&s.batch, idx)
	sp.Err(err).End()
	if err != nil {
		return err
	}
	b := &s.batch
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
	s.sc = s.scale(b.Rows, step)
	s.wait, err = s.timed("pull", nk, func() error { return s.w.PullKeys(s.keys, s.vals) })
	return err
}

// Compute is the logistic loss and its gradient over the working set.
func (s *sparseWorker) Compute() error {
	sp := s.j.Trace.Begin("forward+backward").Cat(trace.Compute).Arg("rows", s.batch.Rows).Arg("keys", len(s.keys))
	defer sp.End()
	b := &s.batch
	pos := func(j int32) int {
		k, _ := slices.BinarySearch(s.keys, int64(j))
		return k
	}
	clear(s.grads)
	bias := len(s.keys) - 1
	s.lossSum, s.correct = 0, 0
	for i := 0; i < b.Rows; i++ {
		lo, hi := b.Indptr[i], b.Indptr[i+1]
		z := float64(s.vals[bias])
		for e := lo; e < hi; e++ {
			z += float64(b.Values[e]) * float64(s.vals[pos(b.Indices[e])])
		}
		y := float64(b.Y[i])
		s.lossSum += softplus(z) - y*z
		if (z > 0) == (y == 1) {
			s.correct++
		}
		g := float32((sigmoid(z) - y) * float64(s.sc))
		for e := lo; e < hi; e++ {
			s.grads[pos(b.Indices[e])] += g * b.Values[e]
		}
		s.grads[bias] += g
	}
	if math.IsNaN(s.lossSum) || math.IsInf(s.lossSum, 0) {
		return fmt.Errorf("loss is %v: lower Config.Opt.LR or check the data: %w", s.lossSum, engine.ErrNonFinite)
	}
	return nil
}

// Exchange pushes the working set's gradient.
func (s *sparseWorker) Exchange(int) (engine.StepStats, error) {
	push, err := s.timed("push", len(s.keys), func() error { return s.w.PushKeys(s.keys, s.grads) })
	return engine.StepStats{LossSum: s.lossSum, Correct: float64(s.correct), Samples: float64(s.batch.Rows), CommSec: s.wait + push}, err
}

// Evaluate pulls the whole model and measures the whole test set, on the
// reporting worker only (the others return NaN).
func (s *sparseWorker) Evaluate() (engine.EvalResult, error) {
	if !s.j.Reports() {
		return engine.NotEvaluated, nil
	}
	s.full = grow(s.full, s.f+1)
	if err := s.w.Pull(s.full); err != nil {
		return engine.EvalResult{}, err
	}
	return engine.SumScores(nil, sparseScore(s.test, s.full))
}

// EvaluateSparse scores logistic-regression weights (arch [F, 1]: w then b)
// on every rank's strided shard of a sparse set and combines the counts.
// Features beyond F are ignored.
func EvaluateSparse(c collectives.Comm, arch model.Arch, params []float32, set *data.Sparse) (engine.EvalResult, error) {
	if len(arch.Sizes) != 2 || arch.Sizes[1] != 1 || len(params) != arch.NumParams() {
		return engine.EvalResult{}, fmt.Errorf("sparse evaluation needs a logistic regression (one layer, one output), got layers %v", arch.Sizes)
	}
	shard, err := set.Subset(data.StridedShard(set.Rows, c.Rank(), c.Size()))
	if err != nil {
		return engine.EvalResult{}, err
	}
	return engine.SumScores(c, sparseScore(shard, params))
}

// sparseScore scores the weights p (w, then b) on a sparse set.
func sparseScore(set *data.Sparse, p []float32) model.Score {
	f := len(p) - 1
	var e model.Score
	for i := 0; i < set.Rows; i++ {
		z := float64(p[f])
		idx, val := set.Row(i)
		for k, j := range idx {
			if int(j) < f {
				z += float64(val[k]) * float64(p[j])
			}
		}
		y := float64(set.Y[i])
		e.LossSum += softplus(z) - y*z
		if (z > 0) == (y == 1) {
			e.Correct++
		}
	}
	e.N = float64(set.Rows)
	return e
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
