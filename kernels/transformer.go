package kernels

import "fmt"

// TransformerOps is the optional op set (TransformerOf) of the layers a
// transformer adds to the convolutional networks' ops: GELU and layer
// normalisation, as PyTorch's nn.GELU and nn.LayerNorm compute them.
// Every output is overwritten.
type TransformerOps interface {
	// Gelu sets y = x·Φ(x), Φ the standard normal's distribution
	// function (nn.GELU(), with erf), or, where tanh, PyTorch's
	// approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
	// (nn.GELU(approximate="tanh")). y may be x.
	Gelu(y, x Buffer, tanh bool) error
	// GeluGrad sets dx = dy·GELU′(x) for the same form. dx may be dy.
	GeluGrad(dx, dy, x Buffer, tanh bool) error
	// LayerNorm normalises each of rows rows of cols values over the row:
	// μ = its mean, σ² its biased variance, y = γ·(x − μ)/√(σ² + eps) +
	// β with γ and β of cols values; it writes μ and 1/√(σ² + eps) into
	// mean and invstd (rows each) for the backward pass.
	LayerNorm(y, mean, invstd, x, gamma, beta Buffer, rows, cols int, eps float32) error
	// LayerNormGrad is LayerNorm's backward pass given the mean and
	// invstd it wrote: dγ = Σ_rows dy·x̂, dβ = Σ_rows dy (overwritten),
	// and per row dx = invstd·(g − mean(g) − x̂·mean(g·x̂)), g = γ·dy, x̂ =
	// (x − μ)·invstd.
	LayerNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma Buffer, rows, cols int) error
}

// TransformerOf returns b's TransformerOps (looking through decorators,
// as ConvOf).
func TransformerOf(b Backend) (TransformerOps, bool) { return optional[TransformerOps](b) }

// CheckLayerNorm validates layer-norm shapes: x of rows·cols, per-row
// vectors (mean, invstd) of rows and per-column ones (γ, β, their
// gradients) of cols.
func CheckLayerNorm(op string, xLen, rows, cols int, perRow []int, perCol []int) error {
	all, ok := mulAll(rows, cols)
	if rows < 0 || cols <= 0 || !ok || xLen != all {
		return fmt.Errorf("%s: %d elements for rows %d × cols %d: %w", op, xLen, rows, cols, ErrShape)
	}
	for i, l := range perRow {
		if l != rows {
			return fmt.Errorf("%s: per-row argument %d has %d elements, want %d: %w", op, i, l, rows, ErrShape)
		}
	}
	for i, l := range perCol {
		if l != cols {
			return fmt.Errorf("%s: per-column argument %d has %d elements, want %d: %w", op, i, l, cols, ErrShape)
		}
	}
	return nil
}
