package model

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// KindAttention is causal multi-head self-attention on a sequence of
// query, key and value vectors (3·width per position, as nanoGPT's c_attn
// writes them): softmax(Q·Kᵀ/√d + causal mask)·V per head, the heads'
// outputs side by side (width per position). Its projections are linear
// layers around it (gptblock).
const KindAttention = "attention"

func init() { register(KindAttention, attention{}) }

// attention keeps each head's probabilities (node scratch, Model.own:
// rows × heads × T × T) for the backward pass.
type attention struct{ base }

func (attention) sequence() {}

func (attention) place(n *node) error {
	switch {
	case n.in.T <= 0 || !n.in.Flat() || n.in.C%3 != 0:
		return fmt.Errorf("takes a sequence of query, key and value vectors (3 × the width per position), but it gets %v values per sample", n.in)
	case n.Heads <= 0 || (n.in.C/3)%n.Heads != 0:
		return fmt.Errorf("%d heads do not divide the width %d (embed must be a multiple of heads)", n.Heads, n.in.C/3)
	case n.Out != 0 || n.Kernel != 0 || n.Stride != 0 || n.Pad != 0:
		return fmt.Errorf("takes no settings but heads")
	}
	n.out = Shape{C: n.in.C / 3, H: 1, W: 1, T: n.in.T}
	return nil
}

func (attention) describe(n node) string { return fmt.Sprintf("attention %dh", n.Heads) }

func (attention) scratch(n node) int { return n.Heads * n.in.T * n.in.T }

// flops: Q·Kᵀ and P·V, each T²·width multiply-adds per sample.
func (attention) flops(n node) int64 {
	return 4 * int64(n.in.T) * int64(n.in.T) * int64(n.out.C)
}

func (k attention) setup(m *Model, a *allocator) error {
	if err := m.findSequenceOps(KindAttention); err != nil {
		return err
	}
	for i, n := range m.nodes {
		if n.Kind == KindAttention {
			m.own[i] = a.alloc(n.Name+" attention probabilities", m.MaxRows*k.scratch(n))
		}
	}
	return nil
}

func (k attention) probs(m *Model, i int, n node) kernels.Buffer {
	return m.B.View(m.own[i], 0, m.rows*k.scratch(n))
}

func (k attention) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	return m.sq.ops.Attention(y, k.probs(m, i, n), x, m.rows, n.in.T, n.Heads, n.out.C)
}

func (k attention) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	return m.give(n.from, func(dst kernels.Buffer) error {
		return m.sq.ops.AttentionGrad(dst, dy, x, k.probs(m, i, n), m.rows, n.in.T, n.Heads, n.out.C)
	})
}
