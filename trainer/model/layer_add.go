package model

import "github.com/dml-project/dml/kernels"

func init() {
	register(kindAdd, add{})
}

// add is a residual block's sum of its two paths, node from's output and
// node plus's (placed by the block, never named in a network). In place
// (where its first input owns its buffers, has no other reader and does
// not read its output backward: not a ReLU) it sums into that input's
// output and takes its output gradient as its own: ResNet's add onto its
// block's last batch norm.
type add struct{ base }

func (add) sequence() {}

func (add) place(n *node) error { n.out = n.in; return nil }

func (add) describe(node) string { return "+" }

func (add) inPlace(ns []node, i int, in []bool) bool {
	from := ns[i].from
	return !in[from] && ns[from].Kind != KindReLU
}

func (add) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	return m.B.Sum(y, x, m.output(n.plus))
}

// backward hands dy to both inputs (in place, the first one's gradient is
// dy's buffer already).
func (add) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	if m.sameBuffer(i) {
		m.have[n.from] = true
	} else if err := m.give(n.from, func(dst kernels.Buffer) error { return m.B.Copy(dst, dy) }); err != nil {
		return err
	}
	return m.give(n.plus, func(dst kernels.Buffer) error { return m.B.Copy(dst, dy) })
}
