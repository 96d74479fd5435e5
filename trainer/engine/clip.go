package engine

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

// Gradient clipping by the L2 norm (--clip-norm C), PyTorch's
// clip_grad_norm_: with n = ‖g‖, g is scaled by C/(n + 1e-6) when that is
// below 1. Under allreduce g is the reduced gradient, the same on every
// rank, so every rank clips alike; under dpsgd and adpsgd each rank clips
// its own gradient, and under ps each worker its own batch's mean gradient
// before the push (the servers hold the reduced gradient in pieces:
// departure from "the global norm after the reduction", said in the docs).

// clipScale is the factor clipping multiplies a gradient of norm n by
// (1: none).
func clipScale(n float64, maxNorm float32) float32 {
	if maxNorm <= 0 || math.IsNaN(n) {
		return 1
	}
	c := float64(maxNorm) / (n + 1e-6)
	if c >= 1 {
		return 1
	}
	return float32(c)
}

// ClipGrad clips the gradient g on backend b to maxNorm and returns its
// norm before.
func ClipGrad(b kernels.Backend, g kernels.Buffer, maxNorm float32) (float64, error) {
	n2, err := b.Dot(g, g)
	if err != nil {
		return 0, err
	}
	n := math.Sqrt(n2)
	if c := clipScale(n, maxNorm); c < 1 {
		return n, b.Scale(c, g)
	}
	return n, nil
}

// ClipHost clips g in host memory, whose mean-gradient norm is ‖g‖·per,
// to maxNorm.
func ClipHost(g []float32, per float64, maxNorm float32) {
	var n2 float64
	for _, v := range g {
		n2 += float64(v) * float64(v)
	}
	if c := clipScale(math.Sqrt(n2)*per, maxNorm); c < 1 {
		for i := range g {
			g[i] *= c
		}
	}
}
