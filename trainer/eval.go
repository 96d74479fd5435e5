package trainer

import (
	"fmt"
	"math"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/data"
)

// EvalResult is a model's score on a dataset, over all ranks.
type EvalResult struct {
	Samples  int
	Accuracy float64
	Loss     float64 // mean loss per sample
}

// Evaluate scores params (of arch) on every rank's strided shard of set,
// in batches of batch rows, and combines the ranks' counts.
func Evaluate(c collectives.Comm, b kernels.Backend, arch Arch, params []float32, set *data.Dense, batch int) (EvalResult, error) {
	if set.Cols != arch.Sizes[0] {
		return EvalResult{}, fmt.Errorf("the data has %d features, the model takes %d", set.Cols, arch.Sizes[0])
	}
	if out := arch.Sizes[len(arch.Sizes)-1]; (arch.Loss == SoftmaxCE && set.Classes > out) || (arch.Loss == SigmoidCE && set.Classes > 2) {
		return EvalResult{}, fmt.Errorf("the data has %d classes, the model predicts %d", set.Classes, max(out, 2))
	}
	shard, err := set.Subset(data.StridedShard(set.Rows, c.Rank(), c.Size()))
	if err != nil {
		return EvalResult{}, err
	}
	rows := max(1, min(batch, shard.Rows))
	m := NewModel(arch, b, rows)
	if err := b.Upload(m.Params, params); err != nil {
		return EvalResult{}, err
	}
	local, err := evaluateLocal(m, shard, make([]float32, rows*arch.Sizes[0]), make([]int32, rows))
	if err != nil {
		return EvalResult{}, err
	}
	return local.sum(c)
}

// evalCounts are one rank's evaluation sums.
type evalCounts struct{ correct, lossSum, n float64 }

// sum adds the counts of every rank of c (nil: this rank alone) and turns
// them into an EvalResult.
func (e evalCounts) sum(c collectives.Comm) (EvalResult, error) {
	tot := []float32{float32(e.correct), float32(e.lossSum), float32(e.n)}
	if c != nil {
		if err := collectives.Allreduce(c, tot, collectives.Sum, collectives.Tree); err != nil {
			return EvalResult{}, fmt.Errorf("evaluation: %w", err)
		}
	}
	res := EvalResult{Samples: int(tot[2]), Accuracy: math.NaN(), Loss: math.NaN()}
	if res.Samples > 0 {
		res.Accuracy = float64(tot[0]) / float64(tot[2])
		res.Loss = float64(tot[1]) / float64(tot[2])
	}
	return res, nil
}

// evaluateLocal runs m over a shard in batches of m.MaxRows (x and y are
// host staging buffers of that size) and returns this rank's sums.
func evaluateLocal(m *Model, shard *data.Dense, x []float32, y []int32) (evalCounts, error) {
	b := m.B
	out := m.Arch.Sizes[len(m.Arch.Sizes)-1]
	scratch := b.Alloc(m.MaxRows * out)
	idx := make([]int, 0, m.MaxRows)
	var lossSum, correct float64
	for lo := 0; lo < shard.Rows; lo += m.MaxRows {
		rows := min(m.MaxRows, shard.Rows-lo)
		idx = idx[:0]
		for i := lo; i < lo+rows; i++ {
			idx = append(idx, i)
		}
		xs, ys := x[:rows*m.Arch.Sizes[0]], y[:rows]
		if err := shard.Gather(xs, ys, idx); err != nil {
			return evalCounts{}, err
		}
		if err := b.Upload(m.Input(rows), xs); err != nil {
			return evalCounts{}, err
		}
		logits, err := m.Forward(rows)
		if err != nil {
			return evalCounts{}, err
		}
		g := b.View(scratch, 0, rows*out)
		var l float64
		var k int
		if m.Arch.Loss == SigmoidCE {
			l, k, err = b.SigmoidCrossEntropy(g, logits, ys, 0)
		} else {
			l, k, err = b.SoftmaxCrossEntropy(g, logits, ys, rows, out, 0)
		}
		if err != nil {
			return evalCounts{}, fmt.Errorf("evaluation: %w", err)
		}
		lossSum += l
		correct += float64(k)
	}
	return evalCounts{correct: correct, lossSum: lossSum, n: float64(shard.Rows)}, nil
}
