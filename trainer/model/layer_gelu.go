package model

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// KindGELU is x·Φ(x) (nn.GELU), or its tanh approximation where the
// layer says approximate: tanh.
const KindGELU = "gelu"

func init() { register(KindGELU, gelu{}) }

// gelu is nn.GELU. Its backward pass reads its input, so it never works
// in place.
type gelu struct{ base }

func (gelu) sequence() {}

func (gelu) place(n *node) error {
	if n.Out != 0 || n.Kernel != 0 || n.Stride != 0 || n.Pad != 0 || n.NoBias {
		return fmt.Errorf("takes no settings but approximate (none or tanh)")
	}
	switch n.Approximate {
	case "", "none", "tanh":
	default:
		return fmt.Errorf("approximate %q: want none or tanh", n.Approximate)
	}
	n.out = n.in
	return nil
}

func (gelu) describe(n node) string {
	if n.Approximate == "tanh" {
		return "gelu(tanh)"
	}
	return "gelu"
}

func (gelu) setup(m *Model, a *allocator) error { return m.findTransformerOps(KindGELU) }

func (gelu) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	return m.tf.Gelu(y, x, n.Approximate == "tanh")
}

func (gelu) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	return m.give(n.from, func(dst kernels.Buffer) error { return m.tf.GeluGrad(dst, dy, x, n.Approximate == "tanh") })
}

// findTransformerOps finds the backend's kernels.TransformerOps, which
// layers of kind need.
func (m *Model) findTransformerOps(kind string) error {
	if m.tf != nil {
		return nil
	}
	var err error
	m.tf, err = needOps(m, kernels.TransformerOf, kind+" layers need the transformer ops")
	return err
}
