package model

import (
	"fmt"
	"math/rand/v2"

	"github.com/dml-project/dml/kernels"
)

// KindLayerNorm is nn.LayerNorm over a flat input's features (eps 1e-5,
// an affine weight and bias): each sample normalised by its own mean and
// variance, in training and evaluation alike.
const KindLayerNorm = "layernorm"

func init() { register(KindLayerNorm, layerNorm{}) }

// LayerNormEps is nn.LayerNorm's default eps.
const LayerNormEps = 1e-5

// layerNorm is nn.LayerNorm(features): weight (γ, ones) and bias (β,
// zeros) of one value per feature; its per-sample mean and inverse
// deviation (node scratch, Model.own) are kept for the backward pass.
type layerNorm struct{ base }

func (layerNorm) sequence() {}

func (layerNorm) place(n *node) error {
	if n.Out != 0 && n.Out != n.in.C || n.Kernel != 0 || n.Stride != 0 || n.Pad != 0 || n.NoBias {
		return fmt.Errorf("takes no settings but its name (out %d: its input has %d features)", n.Out, n.in.C)
	}
	if !n.in.Flat() {
		return fmt.Errorf("normalises a flat input's features, but it gets %v values per sample: put a flatten before it", n.in)
	}
	if n.from < 0 {
		return fmt.Errorf("a layer norm cannot read the data itself (its backward pass would need the data's gradient): put a linear layer before it")
	}
	n.Out = n.in.C
	n.out = n.in
	return nil
}

func (layerNorm) weight(n node) ([]int, int) { return []int{n.Out}, 1 }

// init is γ = 1, β = 0, as nn.LayerNorm (no draws from rng).
func (layerNorm) init(l Layer, p []float32, rng *rand.Rand) {
	for i := range l.BOff - l.WOff {
		p[i] = 1
	}
}

func (layerNorm) describe(n node) string { return n.Name }

// setup finds the transformer ops and allocates each layer norm's
// per-sample statistics (mean, then inverse deviation).
func (layerNorm) setup(m *Model, a *allocator) error {
	if err := m.findTransformerOps(KindLayerNorm); err != nil {
		return err
	}
	for i, n := range m.nodes {
		if n.Kind == KindLayerNorm {
			m.own[i] = a.alloc(n.Name+" row statistics", 2*m.MaxRows*n.in.Seq())
		}
	}
	return nil
}

// stats are node i's rows' statistics: one row per position of each
// sample.
func (layerNorm) stats(m *Model, i int, n node) (mean, inv kernels.Buffer) {
	rows := m.tokens(n)
	return m.B.View(m.own[i], 0, rows), m.B.View(m.own[i], m.MaxRows*n.in.Seq(), rows)
}

func (k layerNorm) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	l := m.layers[n.param]
	mean, inv := k.stats(m, i, n)
	return m.tf.LayerNorm(y, mean, inv, x, m.weight(m.Params, l), m.bias(m.Params, l), m.tokens(n), n.Out, LayerNormEps)
}

func (k layerNorm) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	l := m.layers[n.param]
	mean, inv := k.stats(m, i, n)
	err := m.give(n.from, func(dst kernels.Buffer) error {
		return m.tf.LayerNormGrad(dst, m.weight(m.Grads, l), m.bias(m.Grads, l), dy, x, mean, inv, m.weight(m.Params, l), m.tokens(n), n.Out)
	})
	if err != nil {
		return err
	}
	return m.hooked(hook, n, i)
}

func (layerNorm) scratch(n node) int { return 2 * n.in.Seq() } // the mean and inverse deviation
