// Package numtest holds the numeric comparisons the trainer's tests share
// (trainer, trainer/model, trainer/mpitest).
package numtest

import "math"

// MaxRelDiff is max_i |a_i − b_i| / max(1, max_j |b_j|).
func MaxRelDiff(a, b []float32) float64 {
	var scale, d float64 = 1, 0
	for _, v := range b {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d / scale
}
