package engine

import (
	"fmt"

	"github.com/dml-project/dml/collectives"
	"github.com/dml-project/dml/trainer/model"
)

// The model's buffers (batch-norm statistics) across the ranks.

// SyncState sets every rank's batch-norm running statistics to their
// average over the ranks that train (a collective over every rank of the
// Comm; trains: this rank is one of them), returning it; nil and no
// collective for a model without state. Running statistics do not enter
// training (batch norm trains on each batch's own statistics), so the
// weights are the same whenever this runs; it runs where the statistics
// are used or kept: evaluations that every rank takes part in, checkpoints,
// the end of training. Each rank's statistics come from its own batches,
// as under PyTorch DDP without SyncBatchNorm.
func (j *Job) SyncState(m *model.Model, trains bool) ([]float32, error) {
	n := m.Arch.NumState()
	if n == 0 {
		return nil, nil
	}
	st := make([]float32, n+1)
	if trains {
		if err := j.Backend.Download(st[:n], m.State); err != nil {
			return nil, err
		}
		st[n] = 1
	}
	if err := collectives.Allreduce(j.Comm, st, collectives.Sum, collectives.Tree); err != nil {
		return nil, fmt.Errorf("averaging the batch-norm statistics: %w", err)
	}
	for i := range n {
		st[i] /= st[n]
	}
	st = st[:n]
	upload := func() error { return j.Backend.Upload(m.State, st) }
	var err error
	if j.LW != nil { // the allreduce strategy's model, whose statistics LastWord reads
		err = j.LW.changeState(upload)
	} else {
		err = upload()
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}
