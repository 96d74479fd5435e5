package trace

import "github.com/dml-project/dml/kernels"

// The traced backend passes kernels.TransformerOps through, a span per op
// (its element count, or rows and cols).

var _ kernels.TransformerOps = (*tracedBackend)(nil)

func (tb *tracedBackend) Gelu(y, x kernels.Buffer, tanh bool) error {
	return opSpan(tb, "Gelu", func(t kernels.TransformerOps) error { return t.Gelu(y, x, tanh) }, "n", x.Len())
}

func (tb *tracedBackend) GeluGrad(dx, dy, x kernels.Buffer, tanh bool) error {
	return opSpan(tb, "GeluGrad", func(t kernels.TransformerOps) error { return t.GeluGrad(dx, dy, x, tanh) }, "n", x.Len())
}

func (tb *tracedBackend) LayerNorm(y, mean, invstd, x, gamma, beta kernels.Buffer, rows, cols int, eps float32) error {
	return opSpan(tb, "LayerNorm", func(t kernels.TransformerOps) error {
		return t.LayerNorm(y, mean, invstd, x, gamma, beta, rows, cols, eps)
	}, "rows", rows, "cols", cols)
}

func (tb *tracedBackend) LayerNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma kernels.Buffer, rows, cols int) error {
	return opSpan(tb, "LayerNormGrad", func(t kernels.TransformerOps) error {
		return t.LayerNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma, rows, cols)
	}, "rows", rows, "cols", cols)
}

func (tb *tracedBackend) Dropout(y, x, keys kernels.Buffer, rows, cols int, salt, threshold uint32, scale float32) error {
	return opSpan(tb, "Dropout", func(t kernels.TransformerOps) error {
		return t.Dropout(y, x, keys, rows, cols, salt, threshold, scale)
	}, "rows", rows, "cols", cols)
}
