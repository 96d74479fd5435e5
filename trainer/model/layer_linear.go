package model

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// KindLinear is y = x Wᵀ + b, W [out, in] (nn.Linear).
const KindLinear = "linear"

func init() {
	register(KindLinear, linear{})
}

// linear is nn.Linear: y = x Wᵀ + b, W [out, in], on a flat input, or
// on each position of a sequence of them (a (B, T, in) input).
type linear struct{ base }

func (linear) sequence() {}

func (linear) place(n *node) error {
	switch {
	case !n.in.Flat():
		return fmt.Errorf("needs a flat input, but it gets %v values per sample: put a flatten before it", n.in)
	case n.Out <= 0:
		return fmt.Errorf("out %d must be positive", n.Out)
	case n.Kernel != 0 || n.Stride != 0 || n.Pad != 0:
		return fmt.Errorf("kernel, stride and pad are for conv and pooling layers")
	}
	n.out = Shape{C: n.Out, H: 1, W: 1, T: n.in.T}
	return nil
}

func (linear) weight(n node) ([]int, int) { return []int{n.Out, n.in.C}, n.in.C }

func (linear) flops(n node) int64 { return 2 * int64(n.Out) * int64(n.in.Size()) }

func (linear) describe(n node) string { return fmt.Sprintf("%s %d", n.Name, n.Out) }

func (linear) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	b, l, rows := m.B, m.layers[n.param], m.tokens(n)
	if err := b.Gemm(false, true, rows, l.Out, l.In, 1, x, m.weight(m.Params, l), 0, y); err != nil || !l.HasBias() {
		return err
	}
	return b.AddBias(y, m.bias(m.Params, l), rows, l.Out)
}

// backward: dW = dYᵀ·X, db = the sum of dY's rows, then (unless the input
// is the batch) dX = dY·W, added to a part already there.
func (linear) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	b, l, rows := m.B, m.layers[n.param], m.tokens(n)
	err := b.Gemm(true, false, l.Out, l.In, rows, 1, dy, x, 0, m.weight(m.Grads, l))
	if err == nil && l.HasBias() {
		err = b.SumRows(m.bias(m.Grads, l), dy, rows, l.Out, 0)
	}
	if err == nil {
		err = m.hooked(hook, n, i)
	}
	if err != nil || n.from < 0 {
		return err
	}
	beta := float32(0)
	if m.have[n.from] {
		beta = 1 // add to the part already there
	}
	m.have[n.from] = true
	return b.Gemm(false, false, rows, l.In, l.Out, 1, dy, m.weight(m.Params, l), beta, m.view(m.dacts[n.from], rows, l.In))
}
