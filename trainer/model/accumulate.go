package model

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/trainer/data"
	"github.com/dml-project/dml/trainer/trace"
)

// Accumulator runs a step of several micro-batches (--accumulate): the
// step's rows are split into micro-batches of the model's rows; each
// micro-batch but the last runs its forward and backward pass and adds its
// gradient (and loss statistics) into acc; the last one's backward pass
// adds acc into each layer's gradient as it completes (Wrap), before the
// layer's hook sees it — under allreduce, before the layer goes to the
// AllReduce's buckets (DDP's no_sync on all but the last micro-batch) —
// so that a step exchanges once, whatever the strategy, and equals a
// batch Accumulate times larger, up to float32 rounding. Batch norm
// normalises each micro-batch with its own statistics, as PyTorch does
// under accumulation. Checkpoints, stops and resumes are at step
// boundaries, as without it. Its methods do nothing on a nil
// *Accumulator: a step is then one batch.
type Accumulator struct {
	m     *Model
	b     kernels.Backend
	micro int            // a micro-batch's rows
	count int            // a full step's micro-batches
	idx   []int          // the step's rows, as Prepare got them
	acc   kernels.Buffer // the earlier micro-batches' Grads, summed
	// pending: the step had earlier micro-batches, whose sum the last
	// one's hook adds; added: Grads[added:] has it.
	pending bool
	added   int
}

// NewAccumulator readies m for steps of count micro-batches of micro rows
// (the model's rows).
func NewAccumulator(m *Model, b kernels.Backend, micro, count int) (*Accumulator, error) {
	n := m.NumParams() + GradStats
	acc, err := b.Alloc(n)
	if err != nil {
		return nil, fmt.Errorf("--accumulate: allocating the gradient's sum (%d floats): %w", n, err)
	}
	return &Accumulator{m: m, b: b, micro: max(micro, 1), count: count, acc: acc}, nil
}

// Free releases the sum.
func (a *Accumulator) Free() error {
	if a == nil {
		return nil
	}
	return a.b.Free(a.acc)
}

// First keeps the step's rows and returns its first micro-batch's (all
// of them without an accumulator).
func (a *Accumulator) First(idx []int) []int {
	if a == nil {
		return idx
	}
	a.idx = append(a.idx[:0], idx...)
	return idx[:min(a.micro, len(idx))]
}

// Earlier runs every micro-batch of the step but the last (the first is
// loaded already; it loads the others from train), summing their
// gradients into acc, and loads the last: a Step with Wrap's hook then
// finishes the step.
func (a *Accumulator) Earlier(scale float32, train *data.Dense, tr trace.Tracer) error {
	if a == nil {
		return nil
	}
	a.pending, a.added = false, a.m.NumParams()+GradStats
	ms := a.micros()
	for i, r := range ms[:len(ms)-1] {
		if i > 0 {
			if err := a.load(train, a.idx[r[0]:r[1]], tr); err != nil {
				return err
			}
		}
		if err := a.m.Step(scale, nil); err != nil {
			return err
		}
		var err error
		if i == 0 {
			err = a.b.Copy(a.acc, a.m.Grads)
		} else {
			err = a.b.Axpy(1, a.m.Grads, a.acc)
		}
		if err != nil {
			return fmt.Errorf("--accumulate: summing a micro-batch's gradient: %w", err)
		}
		a.pending = true
	}
	if !a.pending {
		return nil
	}
	last := ms[len(ms)-1]
	return a.load(train, a.idx[last[0]:last[1]], tr)
}

// micros is the step's micro-batches, as ranges of a.idx: micro rows
// each, the last what is left (one, empty, for a rank without rows).
// Under SyncBN each micro-batch's statistics are summed over the ranks,
// so that every rank must run as many micro-batches: a rank with fewer
// rows than the others (an epoch's last step) runs empty ones up to a
// full step's count.
func (a *Accumulator) micros() [][2]int {
	var ms [][2]int
	for lo := 0; lo == 0 || lo < len(a.idx); lo += a.micro {
		ms = append(ms, [2]int{lo, min(lo+a.micro, len(a.idx))})
	}
	for a.m.SyncBN != nil && len(ms) < a.count {
		ms = append(ms, [2]int{len(a.idx), len(a.idx)})
	}
	return ms
}

func (a *Accumulator) load(train *data.Dense, idx []int, tr trace.Tracer) error {
	sp := tr.Begin("batch").Cat(trace.IO).Arg("rows", len(idx))
	_, err := a.m.LoadBatch(train, idx)
	sp.Err(err).End()
	return err
}

// Wrap is the last micro-batch's gradient hook: it adds acc into what
// became final (Grads[lo:], GradHook) before next sees it. Without
// earlier micro-batches it is next.
func (a *Accumulator) Wrap(next GradHook) GradHook {
	if a == nil || !a.pending {
		return next
	}
	return func(layer, lo, hi int) error {
		if err := a.add(lo); err != nil {
			return err
		}
		if next == nil {
			return nil
		}
		return next(layer, lo, hi)
	}
}

// add adds acc into Grads[lo:added].
func (a *Accumulator) add(lo int) error {
	if lo >= a.added {
		return nil
	}
	n := a.added - lo
	if err := a.b.Axpy(1, a.b.View(a.acc, lo, n), a.b.View(a.m.Grads, lo, n)); err != nil {
		return fmt.Errorf("--accumulate: adding the earlier micro-batches' gradient: %w", err)
	}
	a.added = lo
	return nil
}

// Finish completes the step after the last Step: whatever the hooks did
// not reach (nothing, where every layer called it) gets acc added.
func (a *Accumulator) Finish(err error) error {
	if a == nil || !a.pending || err != nil {
		return err
	}
	a.pending = false
	return a.add(0)
}

// StepMicro is a whole step on m without a hook of its own: a's earlier
// micro-batches, the last one's Step, the sum, so that Grads holds the
// gradient of every row a.First kept; with a nil a, m.Step(scale, nil).
func (m *Model) StepMicro(a *Accumulator, scale float32, train *data.Dense, tr trace.Tracer) error {
	if err := a.Earlier(scale, train, tr); err != nil {
		return err
	}
	return a.Finish(m.Step(scale, a.Wrap(nil)))
}

// Micro is a micro-batch's rows (0 for a nil Accumulator).
func (a *Accumulator) Micro() int {
	if a == nil {
		return 0
	}
	return a.micro
}
