package model

import "github.com/dml-project/dml/kernels"

// KindReLU is max(x, 0).
const KindReLU = "relu"

func init() {
	register(KindReLU, relu{})
}

// relu is max(x, 0). It works in place where its input has no other
// reader (its backward pass needs only its output); in training, a ReLU
// in place on a batch norm that the backend fuses with it is done by the
// batch norm, both ways (layer_norm.go).
type relu struct{ base }

func (relu) sequence() {}

func (relu) place(n *node) error { n.out = n.in; return nil }

func (relu) inPlace([]node, int, []bool) bool { return true }

func (relu) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	if m.training && m.fusedNorm(n.from) {
		return nil
	}
	return m.B.Relu(y, x)
}

func (relu) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	if m.fusedNorm(n.from) {
		m.have[n.from] = true // in place: its batch norm's backward applies it
		return nil
	}
	y := m.view(m.acts[i], m.rows, n.out.Size())
	return m.give(n.from, func(dst kernels.Buffer) error { return m.B.ReluGrad(dst, dy, y) })
}
