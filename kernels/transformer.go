package kernels

import (
	"fmt"
	"math"
)

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
	// Dropout sets y = x·scale where DropoutKeep(key of the row, salt,
	// column, threshold), else 0, for rows rows of cols values; keys
	// holds each row's key as the bits of a float32 (math.Float32frombits).
	// The same call on dy gives the backward pass. y may be x.
	Dropout(y, x, keys Buffer, rows, cols int, salt, threshold uint32, scale float32) error
}

// Dropout's mask is a function of each row's key (the sample's: its index
// in the training set, the epoch and the seed, trainer side), the layer's
// salt and the column alone, so that it is the same on any backend, any
// number of ranks, and after a resume.

// fmix32 is MurmurHash3's finaliser: every input bit moves every output
// bit.
func fmix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// DropoutBits is the 32 random bits of column col of a row of key key in
// the layer of salt.
func DropoutBits(key, salt, col uint32) uint32 { return fmix32(key ^ fmix32(col*0x9e3779b9+salt)) }

// DropoutKeep reports whether that element is kept: its bits at or above
// threshold (DropoutThreshold: a share p of draws falls below).
func DropoutKeep(key, salt, col, threshold uint32) bool {
	return DropoutBits(key, salt, col) >= threshold
}

// DropoutThreshold is the threshold that drops a share p (0 ≤ p < 1) of
// the elements: ⌊p·2³²⌋.
func DropoutThreshold(p float64) uint32 {
	return uint32(min(math.Floor(math.Ldexp(p, 32)), math.MaxUint32))
}

// DropoutRowKey is the key of a sample's row: a hash of the seed, the
// epoch and the sample's index in the training set.
func DropoutRowKey(seed uint64, epoch, sample int) uint32 {
	h := fmix32(uint32(sample) ^ fmix32(uint32(sample>>32)+0x27d4eb2f))
	h = fmix32(h ^ fmix32(uint32(epoch)+0x165667b1))
	return fmix32(h ^ fmix32(uint32(seed)^fmix32(uint32(seed>>32)+0x9e3779b9)))
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
