package model

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// KindTiedLinear is y = x·Wᵀ with W the table of the embedding named by
// Tie (vocabulary × width): nanoGPT's lm_head, whose weight is
// transformer.wte's. It has no parameters of its own: its weight's
// gradient is added to the embedding's, and the .npz files carry the
// table a second time under its name (Arch.Aliases).
const KindTiedLinear = "tiedlinear"

func init() { register(KindTiedLinear, tiedLinear{}) }

type tiedLinear struct{ base }

func (tiedLinear) sequence() {}

// bind finds the embedding named Tie among the earlier nodes (n.tie) and
// takes its rows as Out.
func (tiedLinear) bind(n *node, earlier []node) error {
	n.tie = -1
	for j, o := range earlier {
		if o.Name == n.Tie && o.Kind == KindEmbedding {
			n.tie = j
		}
	}
	if n.tie < 0 {
		return fmt.Errorf("tie %q: no embedding of that name before it", n.Tie)
	}
	if w := earlier[n.tie].Out; w != n.in.C {
		return fmt.Errorf("its input has %d values per position, the table of %s rows of %d", n.in.C, n.Tie, w)
	}
	n.Out = earlier[n.tie].Rows
	return nil
}

// alias: the weight is saved a second time as NAME.weight, the tied
// embedding's table.
func (tiedLinear) alias(n node, ns []node, ls []Layer) Tensor {
	l := ls[ns[n.tie].param]
	return Tensor{n.Name + ".weight", l.WShape, l.WOff}
}

// place: bind found the embedding (n.tie) and set Out to its rows.
func (tiedLinear) place(n *node) error {
	switch {
	case n.Name == "" || badName(n.Name) != "":
		return fmt.Errorf("needs a name (its weight is saved as NAME.weight, the tied table)")
	case !n.in.Flat():
		return fmt.Errorf("needs a flat input (or a sequence of them), but it gets %v values per sample", n.in)
	case n.Kernel != 0 || n.Stride != 0 || n.Pad != 0:
		return fmt.Errorf("takes no settings but tie")
	}
	n.NoBias = true
	n.out = Shape{C: n.Out, H: 1, W: 1, T: n.in.T}
	return nil
}

func (tiedLinear) flops(n node) int64 { return 2 * int64(n.Out) * int64(n.in.C) }

func (tiedLinear) describe(n node) string {
	return fmt.Sprintf("%s %d (tied to %s)", n.Name, n.Out, n.Tie)
}

func (tiedLinear) table(m *Model, buf kernels.Buffer, n node) kernels.Buffer {
	return m.weight(buf, m.layers[m.nodes[n.tie].param])
}

func (k tiedLinear) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	return m.B.Gemm(false, true, m.tokens(n), n.Out, n.in.C, 1, x, k.table(m, m.Params, n), 0, y)
}

// backward writes the table's gradient (the embedding, later in the
// backward pass, adds its part) and hands its input dY·W.
func (k tiedLinear) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	rows := m.tokens(n)
	if err := m.B.Gemm(true, false, n.Out, n.in.C, rows, 1, dy, x, 0, k.table(m, m.Grads, n)); err != nil {
		return err
	}
	return m.give(n.from, func(dst kernels.Buffer) error {
		return m.B.Gemm(false, false, rows, n.in.C, n.Out, 1, dy, k.table(m, m.Params, n), 0, dst)
	})
}
