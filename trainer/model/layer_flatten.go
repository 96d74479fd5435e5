package model

import "github.com/dml-project/dml/kernels"

// KindFlatten is C×H×W → C·H·W (no data moves).
const KindFlatten = "flatten"

func init() {
	register(KindFlatten, flatten{})
}

// flatten is C×H×W → C·H·W: no data moves where it works in place (its
// input has no other reader), a copy otherwise.
type flatten struct{ base }

func (flatten) place(n *node) error {
	n.out = Shape{C: n.in.Size(), H: 1, W: 1}
	return nil
}

func (flatten) inPlace([]node, int, []bool) bool { return true }

func (flatten) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	if m.sameBuffer(i) {
		return nil
	}
	return m.B.Copy(y, x)
}

func (flatten) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	if m.sameBuffer(i) {
		m.have[n.from] = true
		return nil
	}
	return m.give(n.from, func(dst kernels.Buffer) error { return m.B.Copy(dst, dy) })
}
