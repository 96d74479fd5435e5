package data

import (
	"math"
	"math/rand/v2"
)

// SyntheticConfig describes a Gaussian-classes dataset for Synthetic.
type SyntheticConfig struct {
	Rows    int     // samples, ≥ 0
	Cols    int     // features, ≥ 1
	Classes int     // classes, ≥ 2
	Noise   float64 // standard deviation of the per-feature noise, ≥ 0
	Seed    uint64
}

// balancedLabels is n labels, classes balanced to within one sample, in
// the random order of (seed, stream).
func balancedLabels(n, classes int, seed, stream uint64) []int32 {
	y := make([]int32, n)
	for i := range y {
		y[i] = int32(i % classes)
	}
	permute(newPCG(seed, stream), y)
	return y
}

// Synthetic generates Gaussian classes around random means:
//
//	μ_k ~ N(0, I_Cols)            one mean per class k
//	y_i = i mod Classes, then the labels are shuffled (classes balanced
//	      to within one sample, in random order)
//	x_i = μ_{y_i} + Noise·ε_i,    ε_i ~ N(0, I_Cols)
//
// Two means lie about √(2·Cols) apart, so the nearest-mean classifier (Bayes
// optimal here) confuses two classes with probability about
// Φ(−√(Cols/2) / Noise): Noise = 0 puts every sample on its class mean
// (perfectly separable), Noise well below √(Cols/2) leaves the classes
// separable in practice, and Noise well above it makes them overlap until
// accuracy falls to chance (1/Classes).
//
// The result is deterministic for a seed: means, labels and noise come from
// separate PCG streams of Seed (normal variates from math/rand/v2).
func Synthetic(cfg SyntheticConfig) (*Dense, error) {
	switch {
	case cfg.Rows < 0 || cfg.Cols < 1 || cfg.Classes < 2:
		return nil, errorf(ErrConfig, "synthetic: rows=%d cols=%d classes=%d, want rows ≥ 0, cols ≥ 1, classes ≥ 2", cfg.Rows, cfg.Cols, cfg.Classes)
	case cfg.Classes > math.MaxInt32:
		return nil, errorf(ErrConfig, "synthetic: %d classes do not fit int32 labels", cfg.Classes)
	case !(cfg.Noise >= 0) || math.IsInf(cfg.Noise, 0):
		return nil, errorf(ErrConfig, "synthetic: noise %v, want a finite value ≥ 0", cfg.Noise)
	case cfg.Rows > MaxDenseElements/cfg.Cols || cfg.Classes > MaxDenseElements/cfg.Cols:
		return nil, errorf(ErrTooLarge, "synthetic: %d (or %d class means) × %d cols exceeds %d elements", cfg.Rows, cfg.Classes, cfg.Cols, MaxDenseElements)
	}
	c := cfg.Cols

	means := make([]float64, cfg.Classes*c)
	r := rand.New(newPCG(cfg.Seed, streamDenseMeans))
	for i := range means {
		means[i] = r.NormFloat64()
	}

	y := balancedLabels(cfg.Rows, cfg.Classes, cfg.Seed, streamDenseLabels)

	x := make([]float32, cfg.Rows*c)
	r = rand.New(newPCG(cfg.Seed, streamDenseNoise))
	for i, l := range y {
		mu := means[int(l)*c : (int(l)+1)*c]
		row := x[i*c : (i+1)*c]
		for j := range row {
			row[j] = float32(mu[j] + cfg.Noise*r.NormFloat64())
		}
	}
	return &Dense{X: x, Y: y, Rows: cfg.Rows, Cols: c, Classes: cfg.Classes}, nil
}
