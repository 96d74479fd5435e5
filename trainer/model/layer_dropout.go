package model

import (
	"fmt"
	"math"

	"github.com/dml-project/dml/kernels"
)

// KindDropout is nn.Dropout(p): in training, each element zeroed with
// probability p and the rest scaled by 1/(1 − p); the identity in
// evaluation.
const KindDropout = "dropout"

func init() { register(KindDropout, dropout{}) }

// dropout is inverted dropout whose mask is a function of the row's key
// (Model.RowKeys: the sample, the epoch, the seed), the layer (its node
// index, the salt) and the column alone (kernels.DropoutBits): the same on
// every backend and number of ranks, and after a resume, with nothing
// stored. Its backward pass is the same op on the gradient, so it works
// in place wherever its input has no other reader.
type dropout struct{ base }

func (dropout) sequence() {}

func (dropout) place(n *node) error {
	if n.Out != 0 || n.Kernel != 0 || n.Stride != 0 || n.Pad != 0 || n.NoBias || n.Approximate != "" {
		return fmt.Errorf("takes no settings but p")
	}
	if !(n.P > 0 && n.P < 1) {
		return fmt.Errorf("p %v: want 0 < p < 1, the share of elements zeroed (nn.Dropout's default is 0.5: give p: 0.5)", n.P)
	}
	n.out = n.in
	return nil
}

func (dropout) inPlace([]node, int, []bool) bool { return true }

func (dropout) describe(n node) string { return fmt.Sprintf("dropout %g", n.P) }

// setup finds the transformer ops and allocates the rows' keys.
func (dropout) setup(m *Model, a *allocator) error {
	if err := m.findTransformerOps(KindDropout); err != nil {
		return err
	}
	m.keys = a.alloc("dropout row keys", m.MaxRows)
	m.hostKeys, m.keyBits = make([]float32, m.MaxRows), make([]uint32, m.MaxRows)
	return nil
}

// mask runs the layer's dropout of node i (salt i) from src into dst.
func (dropout) mask(m *Model, i int, n node, dst, src kernels.Buffer) error {
	cols := n.out.Size()
	return m.tf.Dropout(dst, src, m.B.View(m.keys, 0, m.rows), m.rows, cols, uint32(i), kernels.DropoutThreshold(n.P), float32(1/(1-n.P)))
}

func (k dropout) forward(m *Model, i int, n node, x, y kernels.Buffer) error {
	if m.training {
		return k.mask(m, i, n, y, x)
	}
	if m.sameBuffer(i) {
		return nil
	}
	return m.B.Copy(y, x)
}

func (k dropout) backward(m *Model, i int, n node, x, dy kernels.Buffer, hook GradHook) error {
	return m.give(n.from, func(dst kernels.Buffer) error { return k.mask(m, i, n, dst, dy) })
}

// uploadKeys writes the dropout keys of the training batch of rows idx.
func (m *Model) uploadKeys(idx []int) error {
	bits := m.keyBits[:len(idx)]
	if m.RowKeys != nil {
		m.RowKeys(bits, idx)
	} else {
		for r, i := range idx {
			bits[r] = kernels.DropoutRowKey(0, 0, i)
		}
	}
	for r, b := range bits {
		m.hostKeys[r] = math.Float32frombits(b)
	}
	if err := m.B.Upload(m.B.View(m.keys, 0, len(idx)), m.hostKeys[:len(idx)]); err != nil {
		return fmt.Errorf("uploading the dropout keys: %w", err)
	}
	return nil
}

func (dropout) scratch(node) int { return 1 } // a row key (shared: counted per dropout, an over-count)
