package trainer

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dml-project/dml/kernels"
)

// Loss is a model's output loss.
type Loss int

const (
	// SoftmaxCE is softmax cross-entropy over Classes outputs.
	SoftmaxCE Loss = iota
	// SigmoidCE is the binary logistic loss on one output.
	SigmoidCE
)

// Layer is one linear layer's place in the flat parameter vector: the
// weight, Out×In row-major (PyTorch's nn.Linear layout), then the bias.
type Layer struct {
	In, Out int
	WOff    int // offset of the weight in the flat vector
	BOff    int // offset of the bias
}

// Arch is a model's shape: a stack of linear layers with ReLU between them
// and Loss on top. It is the whole of what a checkpoint needs to rebuild it.
type Arch struct {
	Sizes []int // Sizes[0] inputs, Sizes[k] outputs of layer k-1
	Loss  Loss
}

// NewArch builds an architecture: input features, hidden sizes (none for
// softmax or logistic regression), outputs.
func NewArch(inputs int, hidden []int, outputs int, loss Loss) (Arch, error) {
	sizes := append(append([]int{inputs}, hidden...), outputs)
	for i, s := range sizes {
		if s <= 0 {
			return Arch{}, fmt.Errorf("layer size %d (position %d of %v) must be positive", s, i, sizes)
		}
	}
	if loss == SigmoidCE && outputs != 1 {
		return Arch{}, fmt.Errorf("logistic loss needs 1 output, got %d", outputs)
	}
	return Arch{Sizes: sizes, Loss: loss}, nil
}

// Layers lays the layers out in the flat vector: layer 0's weight and bias,
// then layer 1's, and so on.
func (a Arch) Layers() []Layer {
	var ls []Layer
	off := 0
	for k := 0; k+1 < len(a.Sizes); k++ {
		l := Layer{In: a.Sizes[k], Out: a.Sizes[k+1], WOff: off}
		l.BOff = off + l.In*l.Out
		off = l.BOff + l.Out
		ls = append(ls, l)
	}
	return ls
}

// NumParams is the length of the flat parameter vector.
func (a Arch) NumParams() int {
	ls := a.Layers()
	last := ls[len(ls)-1]
	return last.BOff + last.Out
}

// LayerOf names the layer and tensor that flat index i belongs to
// ("layer1.weight"), for error messages.
func (a Arch) LayerOf(i int) string {
	for k, l := range a.Layers() {
		switch {
		case i >= l.WOff && i < l.BOff:
			return fmt.Sprintf("layer%d.weight", k)
		case i >= l.BOff && i < l.BOff+l.Out:
			return fmt.Sprintf("layer%d.bias", k)
		}
	}
	return fmt.Sprintf("index %d", i)
}

// InitParams fills a flat vector as PyTorch's nn.Linear does by default:
// weights and biases uniform in ±1/√in, from the given seed.
func (a Arch) InitParams(seed uint64) []float32 {
	p := make([]float32, a.NumParams())
	rng := rand.New(rand.NewPCG(seed, 0x6d6c70))
	for _, l := range a.Layers() {
		bound := 1 / math.Sqrt(float64(l.In))
		for i := l.WOff; i < l.BOff+l.Out; i++ {
			p[i] = float32((2*rng.Float64() - 1) * bound)
		}
	}
	return p
}

// GradStats is the number of slots after the gradient in Model.Grads: the
// training loop puts a batch's summed loss and correct count there, so that
// one AllReduce carries the gradient and the batch statistics together.
const GradStats = 2

// Model runs an Arch's forward and backward passes on a Backend for
// mini-batches of up to MaxRows rows. Params is the flat parameter vector in
// the Layers layout; Grads is the gradient in the same layout followed by
// GradStats slots, what the ranks reduce, in one piece.
type Model struct {
	Arch    Arch
	B       kernels.Backend
	MaxRows int
	Params  kernels.Buffer
	Grads   kernels.Buffer

	layers []Layer
	acts   []kernels.Buffer // acts[0] input, acts[k+1] output of layer k (after ReLU, logits for the last)
	dacts  []kernels.Buffer // gradient w.r.t. acts[k], k ≥ 1
}

// NewModel allocates a model's buffers on b (parameters zero: Upload them).
func NewModel(arch Arch, b kernels.Backend, maxRows int) *Model {
	m := &Model{Arch: arch, B: b, MaxRows: maxRows, layers: arch.Layers()}
	n := arch.NumParams()
	m.Params = b.Alloc(n)
	m.Grads = b.Alloc(n + GradStats)
	for k, s := range arch.Sizes {
		m.acts = append(m.acts, b.Alloc(maxRows*s))
		if k == 0 {
			m.dacts = append(m.dacts, nil)
		} else {
			m.dacts = append(m.dacts, b.Alloc(maxRows*s))
		}
	}
	return m
}

// Input is the buffer a batch's features go into (rows × inputs).
func (m *Model) Input(rows int) kernels.Buffer {
	return m.B.View(m.acts[0], 0, rows*m.Arch.Sizes[0])
}

func (m *Model) view(buf kernels.Buffer, rows, cols int) kernels.Buffer {
	return m.B.View(buf, 0, rows*cols)
}

func (m *Model) weight(buf kernels.Buffer, l Layer) kernels.Buffer {
	return m.B.View(buf, l.WOff, l.In*l.Out)
}

func (m *Model) bias(buf kernels.Buffer, l Layer) kernels.Buffer {
	return m.B.View(buf, l.BOff, l.Out)
}

// Forward runs the batch already in Input(rows) through the layers and
// returns the logits (rows × outputs).
func (m *Model) Forward(rows int) (kernels.Buffer, error) {
	b := m.B
	for k, l := range m.layers {
		in := m.view(m.acts[k], rows, l.In)
		out := m.view(m.acts[k+1], rows, l.Out)
		if err := b.Gemm(false, true, rows, l.Out, l.In, 1, in, m.weight(m.Params, l), 0, out); err != nil {
			return nil, fmt.Errorf("layer%d forward: %w", k, err)
		}
		if err := b.AddBias(out, m.bias(m.Params, l), rows, l.Out); err != nil {
			return nil, fmt.Errorf("layer%d bias: %w", k, err)
		}
		if k+1 < len(m.layers) {
			if err := b.Relu(out, out); err != nil {
				return nil, fmt.Errorf("layer%d relu: %w", k, err)
			}
		}
	}
	return m.view(m.acts[len(m.layers)], rows, m.layers[len(m.layers)-1].Out), nil
}

// Step runs forward and backward for one batch: Grads receives scale × the
// gradient of the summed loss (pass 1/global batch size for the mean).
// It returns the batch's summed loss and number of correct predictions.
func (m *Model) Step(labels []int32, rows int, scale float32) (lossSum float64, correct int, err error) {
	logits, err := m.Forward(rows)
	if err != nil {
		return 0, 0, err
	}
	last := len(m.layers)
	dlogits := m.view(m.dacts[last], rows, m.layers[last-1].Out)
	switch m.Arch.Loss {
	case SoftmaxCE:
		lossSum, correct, err = m.B.SoftmaxCrossEntropy(dlogits, logits, labels, rows, m.layers[last-1].Out, scale)
	case SigmoidCE:
		lossSum, correct, err = m.B.SigmoidCrossEntropy(dlogits, logits, labels, scale)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("loss: %w", err)
	}
	return lossSum, correct, m.backward(rows)
}

func (m *Model) backward(rows int) error {
	b := m.B
	for k := len(m.layers) - 1; k >= 0; k-- {
		l := m.layers[k]
		dz := m.view(m.dacts[k+1], rows, l.Out)
		in := m.view(m.acts[k], rows, l.In)
		if err := b.Gemm(true, false, l.Out, l.In, rows, 1, dz, in, 0, m.weight(m.Grads, l)); err != nil {
			return fmt.Errorf("layer%d weight gradient: %w", k, err)
		}
		if err := b.SumRows(m.bias(m.Grads, l), dz, rows, l.Out, 0); err != nil {
			return fmt.Errorf("layer%d bias gradient: %w", k, err)
		}
		if k == 0 {
			break
		}
		din := m.view(m.dacts[k], rows, l.In)
		if err := b.Gemm(false, false, rows, l.In, l.Out, 1, dz, m.weight(m.Params, l), 0, din); err != nil {
			return fmt.Errorf("layer%d input gradient: %w", k, err)
		}
		if err := b.ReluGrad(din, din, in); err != nil {
			return fmt.Errorf("layer%d relu gradient: %w", k-1, err)
		}
	}
	return nil
}

// Predict writes the predicted class of each row of the batch in Input(rows).
func (m *Model) Predict(out []int32, rows int) error {
	logits, err := m.Forward(rows)
	if err != nil {
		return err
	}
	return m.B.Predict(out, logits, rows, m.layers[len(m.layers)-1].Out)
}
