package model

import (
	"fmt"

	"github.com/dml-project/dml/kernels"
)

// KindLRN is local response normalisation across channels
// (nn.LocalResponseNorm(size, alpha, beta, k); AlexNet's): size is
// needed; alpha, beta and k default to PyTorch's 1e-4, 0.75 and 1.
const KindLRN = "lrn"

func init() { register(KindLRN, lrn{}) }

// lrn normalises each value by the squares of its neighbours across
// channels (kernels.LRNOps); it keeps the scale s of its forward pass in
// its node's scratch (Model.own) for the backward pass, which reads its
// input too.
type lrn struct{ base }

// lrnSettings are a node's α, β and k, defaults filled in.
func lrnSettings(n node) (alpha, beta, k float32) {
	alpha, beta, k = 1e-4, 0.75, 1
	if n.Alpha != 0 {
		alpha = float32(n.Alpha)
	}
	if n.Beta != 0 {
		beta = float32(n.Beta)
	}
	if n.K != 0 {
		k = float32(n.K)
	}
	return alpha, beta, k
}

func (lrn) place(n *node) error {
	switch {
	case n.Out != 0 || n.Kernel != 0 || n.Stride != 0 || n.Pad != 0 || n.NoBias || n.P != 0:
		return fmt.Errorf("takes size, and optionally alpha, beta and k, nothing else")
	case n.Size <= 0:
		return fmt.Errorf("size %d: want the channels each window spans (AlexNet's 5)", n.Size)
	case n.Alpha < 0 || n.Beta < 0 || n.K < 0:
		return fmt.Errorf("alpha %v, beta %v, k %v: want positive values (0: PyTorch's default)", n.Alpha, n.Beta, n.K)
	}
	n.out = n.in
	return nil
}

func (lrn) describe(n node) string { return fmt.Sprintf("lrn %d", n.Size) }

// setup finds the backend's LRNOps and allocates each layer's scale.
func (lrn) setup(m *Model, a *allocator) error {
	var err error
	if m.lrn, err = needOps(m, kernels.LRNOf, "local response normalisation needs kernels.LRNOps"); err != nil {
		return err
	}
	for i, n := range m.nodes {
		if n.Kind == KindLRN {
			m.own[i] = a.alloc("local response normalisation scale", m.MaxRows*n.out.Size())
		}
	}
	return nil
}

func (lrn) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	alpha, beta, k := lrnSettings(n)
	s := m.view(m.own[i], m.rows, n.out.Size())
	return m.lrn.LRN(y, s, x, m.rows, n.in.C, n.in.H*n.in.W, n.Size, alpha, beta, k)
}

func (lrn) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	alpha, beta, k := lrnSettings(n)
	s := m.view(m.own[i], m.rows, n.out.Size())
	return m.give(n.from, func(dst kernels.Buffer) error {
		return m.lrn.LRNGrad(dst, dy, x, s, m.rows, n.in.C, n.in.H*n.in.W, n.Size, alpha, beta, k)
	})
}

func (lrn) scratch(n node) int { return n.out.Size() } // the scale s
