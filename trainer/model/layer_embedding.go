package model

import (
	"fmt"
	"math/rand/v2"

	"github.com/dml-project/dml/kernels"
)

// KindEmbedding is nn.Embedding: each token of a token sequence (the
// batch itself) becomes its row of a table of Rows (the vocabulary) × Out
// values; KindPosEmbed adds a learned position's row of a table of Rows
// (the longest sequence) × the input's width to each position (nanoGPT's
// wte and wpe).
const (
	KindEmbedding = "embedding"
	KindPosEmbed  = "posembed"
)

func init() {
	register(KindEmbedding, embedding{})
	register(KindPosEmbed, posEmbed{})
}

// seqRun is what the sequence layers run with: the backend's
// kernels.SequenceOps, and which embeddings a tiedlinear layer also
// reads (their gradient has the head's part when they begin theirs).
type seqRun struct {
	ops  kernels.SequenceOps
	tied map[int]bool
}

// findSequenceOps finds the backend's kernels.SequenceOps, which layers
// of kind need, and notes the tied embeddings.
func (m *Model) findSequenceOps(kind string) error {
	if m.sq.ops != nil {
		return nil
	}
	var err error
	m.sq.ops, err = needOps(m, kernels.SequenceOf, kind+" layers need the sequence ops")
	m.sq.tied = map[int]bool{}
	for _, n := range m.nodes {
		if n.Kind == KindTiedLinear {
			m.sq.tied[n.tie] = true
		}
	}
	return err
}

// tokens is the positions of node n's input in the batch loaded: its
// rows times its sequence's length (the rows, for a sample that is not a
// sequence).
func (m *Model) tokens(n node) int { return m.rows * n.in.Seq() }

// embedding is nn.Embedding(Rows, Out) on the batch's tokens; its table
// is a weight without bias (init N(0, 1), as nn.Embedding's, or Std's).
type embedding struct{ base }

func (embedding) sequence() {}

func (embedding) place(n *node) error {
	switch {
	case n.from >= 0 || n.in.T <= 0 || n.in.C != 1 || !n.in.Flat():
		return fmt.Errorf("reads the batch's tokens, a token sequence (--data text), but it gets %v values per sample", n.in)
	case n.Rows <= 0 || n.Out <= 0:
		return fmt.Errorf("rows %d (the vocabulary) and out %d (the width) must be positive", n.Rows, n.Out)
	case n.Kernel != 0 || n.Stride != 0 || n.Pad != 0:
		return fmt.Errorf("kernel, stride and pad are for conv and pooling layers")
	}
	n.NoBias = true
	n.out = Shape{C: n.Out, H: 1, W: 1, T: n.in.T}
	return nil
}

func (embedding) weight(n node) ([]int, int) { return []int{n.Rows, n.Out}, n.Rows }

// init is nn.Embedding's: N(0, 1).
func (embedding) init(l Layer, p []float32, rng *rand.Rand) {
	for i := range p {
		p[i] = float32(rng.NormFloat64())
	}
}

func (embedding) describe(n node) string { return fmt.Sprintf("%s %d×%d", n.Name, n.Rows, n.Out) }

func (embedding) setup(m *Model, _ *allocator) error { return m.findSequenceOps(KindEmbedding) }

func (embedding) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	return m.sq.ops.Embedding(y, x, m.weight(m.Params, m.layers[n.param]), m.tokens(n), n.Rows, n.Out)
}

// backward adds each position's output gradient to its token's row: onto
// the tied head's part (which ran first), or onto zeros.
func (embedding) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	g := m.weight(m.Grads, m.layers[n.param])
	if !m.sq.tied[i] {
		if err := m.B.Fill(g, 0); err != nil {
			return err
		}
	}
	if err := m.sq.ops.EmbeddingGrad(g, x, dy, m.tokens(n), n.Rows, n.Out); err != nil {
		return err
	}
	return m.hooked(hook, n, i)
}

// posEmbed adds row t of its table (Rows × the width, no bias) to
// position t of each sequence, in its input's buffers where it can; its
// gradient is the sum of the batch's output gradients at each position.
type posEmbed struct{ base }

func (posEmbed) sequence() {}

func (posEmbed) place(n *node) error {
	switch {
	case n.in.T <= 0 || !n.in.Flat():
		return fmt.Errorf("adds a position's row to a sequence of vectors, but it gets %v values per sample", n.in)
	case n.Rows < n.in.T:
		return fmt.Errorf("a sequence of %d positions is longer than its table of %d rows: lower --seq-len or raise rows", n.in.T, n.Rows)
	case n.Out != 0 && n.Out != n.in.C:
		return fmt.Errorf("out %d: its rows are the input's width, %d", n.Out, n.in.C)
	case n.Kernel != 0 || n.Stride != 0 || n.Pad != 0:
		return fmt.Errorf("kernel, stride and pad are for conv and pooling layers")
	}
	n.Out, n.NoBias = n.in.C, true
	n.out = n.in
	return nil
}

func (posEmbed) weight(n node) ([]int, int) { return []int{n.Rows, n.Out}, n.Rows }

// init is nn.Embedding's: N(0, 1).
func (posEmbed) init(l Layer, p []float32, rng *rand.Rand) { embedding{}.init(l, p, rng) }

func (posEmbed) inPlace([]node, int, []bool) bool { return true }

func (posEmbed) describe(n node) string { return fmt.Sprintf("%s %d×%d", n.Name, n.Rows, n.Out) }

// table is the first T rows of the table in buf (the parameters or the
// gradient): those a sequence of T positions uses.
func (posEmbed) table(m *Model, buf kernels.Buffer, n node) kernels.Buffer {
	return m.B.View(buf, m.layers[n.param].WOff, n.in.Size())
}

func (k posEmbed) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	if !m.sameBuffer(i) {
		if err := m.B.Copy(y, x); err != nil {
			return err
		}
	}
	return m.B.AddBias(y, k.table(m, m.Params, n), m.rows, n.in.Size())
}

func (k posEmbed) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	if n.Rows > n.in.T { // rows past the sequence get no gradient
		if err := m.B.Fill(m.weight(m.Grads, m.layers[n.param]), 0); err != nil {
			return err
		}
	}
	if err := m.B.SumRows(k.table(m, m.Grads, n), dy, m.rows, n.in.Size(), 0); err != nil {
		return err
	}
	if err := m.hooked(hook, n, i); err != nil {
		return err
	}
	if m.sameBuffer(i) {
		m.have[n.from] = true
		return nil
	}
	return m.give(n.from, func(dst kernels.Buffer) error { return m.B.Copy(dst, dy) })
}
