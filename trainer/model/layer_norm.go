package model

import (
	"fmt"
	"math/rand/v2"

	"github.com/dml-project/dml/kernels"
)

// BatchNorm's constants (PyTorch's defaults).
const (
	BatchNormEps      = 1e-5
	BatchNormMomentum = 0.1
)

func init() {
	register(KindBatchNorm, batchNorm{})
}

// KindBatchNorm is BatchNorm2d (per channel; eps 1e-5, momentum 0.1):
// the batch's statistics in training, the running ones in evaluation.
const KindBatchNorm = "batchnorm"

// batchNorm is BatchNorm2d (per channel; eps 1e-5, momentum 0.1): the
// batch's statistics in training, the running ones in evaluation. Its
// weight γ and bias β are C values each; its buffers are PyTorch's
// running_mean, running_var and num_batches_tracked. Where the backend
// fuses a batch norm with its ReLU (kernels.NormReluOf), a batch norm
// whose output only a ReLU in place reads runs fused (normRun.fused).
type batchNorm struct{ base }

// normRun is what a Model's batch norms run with: the backend's ops, the
// fused ones, stats[i] node i's batch mean and inverse deviation of the
// last training forward pass, and one, a single 1 (the batch count's
// increment).
type normRun struct {
	norm     kernels.NormOps
	normRelu kernels.NormReluOps
	fused    []bool
	stats    []kernels.Buffer
	one      kernels.Buffer
	// Under Model.SyncBN: the backend's SyncNormOps, a batch norm's sums
	// (2·C on the device, 2·C + 1 on the host: the count last), and the
	// values node i's last training batch normalised over (every rank's).
	sync  kernels.SyncNormOps
	sums  kernels.Buffer
	host  []float32
	count []int
}

func (batchNorm) place(n *node) error {
	if n.Out != 0 && n.Out != n.in.C || n.Kernel != 0 || n.Stride != 0 || n.Pad != 0 || n.NoBias {
		return fmt.Errorf("takes no settings but its name (out %d: its input has %d channels)", n.Out, n.in.C)
	}
	if n.from < 0 {
		return fmt.Errorf("a batch norm cannot read the data itself (its backward pass would need the data's gradient): put a conv or linear layer before it")
	}
	n.Out = n.in.C
	n.out = n.in
	return nil
}

func (batchNorm) weight(n node) ([]int, int) { return []int{n.Out}, 1 }

// init is γ = 1, β = 0, as nn.BatchNorm2d (no draws from rng).
func (batchNorm) init(l Layer, p []float32, rng *rand.Rand) {
	for i := range l.BOff - l.WOff {
		p[i] = 1
	}
}

func (batchNorm) buffers(n node) []buffer {
	return []buffer{{"running_mean", []int{n.Out}, 0}, {"running_var", []int{n.Out}, 1}, {"num_batches_tracked", []int{}, 0}}
}

func (batchNorm) describe(n node) string { return n.Name }

// setup finds the backend's normalisation ops (and its fused ones, where
// it has them: for the batch norms whose output only a ReLU in place
// reads), and allocates each batch norm's statistics and the one.
func (batchNorm) setup(m *Model, a *allocator) error {
	nr := &m.bn
	var err error
	if nr.norm, err = needOps(m, kernels.NormOf, "batch norm needs normalisation ops"); err != nil {
		return err
	}
	if f, ok := kernels.NormReluOf(m.B); ok {
		inp := inPlace(m.nodes)
		nr.normRelu, nr.fused = f, make([]bool, len(m.nodes))
		for i, n := range m.nodes {
			if n.Kind == KindReLU && inp[i] && m.nodes[n.from].Kind == KindBatchNorm {
				nr.fused[n.from] = true
			}
		}
	}
	nr.stats = make([]kernels.Buffer, len(m.nodes))
	for i, n := range m.nodes {
		if n.Kind == KindBatchNorm {
			nr.stats[i] = a.alloc(n.Name+" batch statistics", 2*n.Out)
		}
	}
	nr.one = a.alloc("one", 1)
	a.then(func() error { return m.B.Fill(nr.one, 1) })
	if sn, ok := kernels.SyncNormOf(m.B); ok {
		maxC := 0
		for _, n := range m.nodes {
			if n.Kind == KindBatchNorm {
				maxC = max(maxC, n.Out)
			}
		}
		nr.sync, nr.host, nr.count = sn, make([]float32, 2*maxC+1), make([]int, len(m.nodes))
		nr.sums = a.alloc("batch-norm sums (SyncBatchNorm)", 2*maxC)
	}
	return nil
}

// fusedNorm reports whether node i is a batch norm run with its ReLU
// (fused).
func (m *Model) fusedNorm(i int) bool {
	return i >= 0 && m.bn.fused != nil && m.bn.fused[i] && m.SyncBN == nil
}

func (batchNorm) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	l, c, nr := m.layers[n.param], n.Out, &m.bn
	g, be := m.weight(m.Params, l), m.bias(m.Params, l)
	rm, rv := m.B.View(m.State, n.state, c), m.B.View(m.State, n.state+c, c)
	if !m.training {
		return nr.norm.BatchNormInfer(y, x, rm, rv, g, be, m.rows, c, n.in.H*n.in.W, BatchNormEps)
	}
	mean, inv := m.B.View(nr.stats[i], 0, c), m.B.View(nr.stats[i], c, c)
	if m.SyncBN != nil {
		return m.syncNormForward(i, n, x, y, mean, inv, rm, rv, g, be)
	}
	if m.rows == 0 {
		// No batch (a rank's share of an epoch's last step): nothing to
		// normalise, and the running statistics and num_batches_tracked
		// stay as they are, as PyTorch's would where no batch was seen
		// (the update would have pulled them towards 0).
		return nil
	}
	train := nr.norm.BatchNormTrain
	if m.fusedNorm(i) {
		train = nr.normRelu.BatchNormReluTrain
	}
	if err := train(y, mean, inv, rm, rv, x, g, be, m.rows, c, n.in.H*n.in.W, BatchNormEps, BatchNormMomentum); err != nil {
		return err
	}
	return m.B.Axpy(1, nr.one, m.B.View(m.State, n.state+2*c, 1)) // num_batches_tracked
}

func (batchNorm) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	l, c, nr, rows := m.layers[n.param], n.Out, &m.bn, m.rows
	mean, inv := m.B.View(nr.stats[i], 0, c), m.B.View(nr.stats[i], c, c)
	dg, db := m.weight(m.Grads, l), m.bias(m.Grads, l)
	if m.SyncBN != nil {
		if err := m.syncNormBackward(i, n, x, dy, mean, inv, dg, db); err != nil {
			return err
		}
		return m.hooked(hook, n, i)
	}
	err := m.give(n.from, func(dst kernels.Buffer) error {
		if m.fusedNorm(i) { // dy is the ReLU's output gradient
			y := m.view(m.acts[i], rows, n.out.Size())
			return nr.normRelu.BatchNormReluGrad(dst, dg, db, dy, y, x, mean, inv, m.weight(m.Params, l), rows, c, n.in.H*n.in.W)
		}
		return nr.norm.BatchNormGrad(dst, dg, db, dy, x, mean, inv, m.weight(m.Params, l), rows, c, n.in.H*n.in.W)
	})
	if err != nil {
		return err
	}
	return m.hooked(hook, n, i)
}

// syncNormForward is node i's training forward pass under SyncBN: this
// batch's per-channel sums, summed over the ranks (with the values they
// cover) by m.SyncBN, then the normalisation with those statistics.
func (m *Model) syncNormForward(i int, n node, x, y, mean, inv, rm, rv, g, be kernels.Buffer) error {
	nr, c, hw := &m.bn, n.Out, n.in.H*n.in.W
	if nr.sync == nil {
		return fmt.Errorf("SyncBatchNorm needs kernels.SyncNormOps, which backend %s lacks: %w", m.B.Name(), kernels.ErrNoConv)
	}
	sums := m.B.View(nr.sums, 0, 2*c)
	if err := nr.sync.BatchNormSums(sums, x, m.rows, c, hw); err != nil {
		return err
	}
	h := nr.host[:2*c+1]
	if err := m.B.Download(h[:2*c], sums); err != nil {
		return err
	}
	h[2*c] = float32(m.rows * hw)
	if err := m.SyncBN(h); err != nil {
		return fmt.Errorf("summing the batch statistics over the ranks: %w", err)
	}
	if err := m.B.Upload(sums, h[:2*c]); err != nil {
		return err
	}
	nr.count[i] = int(h[2*c])
	if nr.count[i] == 0 {
		// No rank has a row (model.Accumulator's padding of a short
		// step): the running statistics and num_batches_tracked stay.
		return nil
	}
	if err := nr.sync.BatchNormTrainSums(y, mean, inv, rm, rv, x, g, be, sums, nr.count[i], m.rows, c, hw, BatchNormEps, BatchNormMomentum); err != nil {
		return err
	}
	return m.B.Axpy(1, nr.one, m.B.View(m.State, n.state+2*c, 1)) // num_batches_tracked
}

// syncNormBackward is node i's backward pass under SyncBN: this batch's
// Σdy and Σdy·x̂ are its dβ and dγ (the gradient's AllReduce sums them
// over the ranks with the rest); summed over the ranks by m.SyncBN they
// give the input gradient over every rank's batch.
func (m *Model) syncNormBackward(i int, n node, x, dy, mean, inv, dg, db kernels.Buffer) error {
	nr, c, hw := &m.bn, n.Out, n.in.H*n.in.W
	sums := m.B.View(nr.sums, 0, 2*c)
	if err := nr.sync.BatchNormGradSums(sums, dy, x, mean, inv, m.rows, c, hw); err != nil {
		return err
	}
	if err := m.B.Copy(db, m.B.View(sums, 0, c)); err != nil {
		return err
	}
	if err := m.B.Copy(dg, m.B.View(sums, c, c)); err != nil {
		return err
	}
	h := nr.host[:2*c]
	if err := m.B.Download(h, sums); err != nil {
		return err
	}
	if err := m.SyncBN(h); err != nil {
		return fmt.Errorf("summing the batch-norm gradient sums over the ranks: %w", err)
	}
	if err := m.B.Upload(sums, h); err != nil {
		return err
	}
	gamma := m.weight(m.Params, m.layers[n.param])
	return m.give(n.from, func(dst kernels.Buffer) error {
		return nr.sync.BatchNormGradInput(dst, dy, x, mean, inv, gamma, sums, nr.count[i], m.rows, c, hw)
	})
}
