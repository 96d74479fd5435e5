package engine

import (
	"fmt"
	"math"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/model"
)

// Evaluate scores params (of arch) on every rank's strided shard of set,
// in batches of batch rows, and combines the ranks' counts. A rank reads
// only its shard's rows (set may be a data.IDXSource).
//
// st holds the weights and a network's buffers (Buffers, batch norm's
// running statistics; nil: the initial ones; an MLP has none); its
// optimizer state is not read.
func Evaluate(c collectives.Comm, b kernels.Backend, arch model.Arch, st model.State, set data.DenseSource, batch int) (EvalResult, error) {
	rows, cols, classes := set.Shape()
	if cols != arch.Sizes[0] {
		return EvalResult{}, fmt.Errorf("the data has %d features, the model takes %d", cols, arch.Sizes[0])
	}
	if out := arch.Sizes[len(arch.Sizes)-1]; (arch.Loss == model.SoftmaxCE && classes > out) || (arch.Loss == model.SigmoidCE && classes > 2) {
		return EvalResult{}, fmt.Errorf("the data has %d classes, the model predicts %d", classes, max(out, 2))
	}
	shard, err := set.Subset(data.StridedShard(rows, c.Rank(), c.Size()))
	if err != nil {
		return EvalResult{}, err
	}
	m, err := model.New(arch, b, max(1, min(batch, shard.Rows)))
	if err != nil {
		return EvalResult{}, err
	}
	defer m.Free()
	if err := st.Restore(b, m.Params, nil, m.State); err != nil {
		return EvalResult{}, err
	}
	s, err := m.Score(shard)
	if err != nil {
		return EvalResult{}, err
	}
	return SumScores(c, s)
}

// EvaluateShard scores m's weights on this rank's test shard and returns
// the result over every rank of c.
func EvaluateShard(c collectives.Comm, m *model.Model, shard *data.Dense) (EvalResult, error) {
	s, err := m.Score(shard)
	if err != nil {
		return EvalResult{}, err
	}
	return SumScores(c, s)
}

// NotEvaluated is the result of a rank that does not evaluate (a ps
// worker other than the reporting one).
var NotEvaluated = EvalResult{Accuracy: math.NaN(), Loss: math.NaN()}

// SumScores adds the scores of every rank of c (nil: this rank alone) and
// turns them into an EvalResult.
func SumScores(c collectives.Comm, s model.Score) (EvalResult, error) {
	stopped := float32(0)
	if s.Interrupted {
		stopped = 1
	}
	tot := []float32{float32(s.Correct), float32(s.LossSum), float32(s.N), stopped}
	if c != nil {
		if err := collectives.Allreduce(c, tot, collectives.Sum, collectives.Tree); err != nil {
			return EvalResult{}, fmt.Errorf("evaluation: %w", err)
		}
	}
	res := EvalResult{Samples: int(tot[2]), Accuracy: math.NaN(), Loss: math.NaN(), Interrupted: tot[3] > 0}
	if res.Samples > 0 && !res.Interrupted {
		res.Accuracy = float64(tot[0]) / float64(tot[2])
		res.Loss = float64(tot[1]) / float64(tot[2])
	}
	return res, nil
}
