//go:build !purego && !amd64.v3

package optim

import "golang.org/x/sys/cpu"

//go:noescape
func sgdAVX2(w, grad *float32, n int, rate, decay float32)

//go:noescape
func momentumAVX2(w, grad, v *float32, n int, rate, mom, decay float32)

//go:noescape
func larsAVX2(w, grad, v *float32, n int, rate, mom, decay float32)

//go:noescape
func adagradAVX2(w, grad, h *float32, n int, rate, eps, decay float32)

//go:noescape
func adamAVX2(w, grad, s *float32, n int, b1, omb1, b2, omb2, step, bc2s, eps, wdOrDecay float32, decoupled int)

// vectorRules says whether the whole-range rules run 8 floats at a time
// (AVX2, bit for bit the scalar rules: rules_amd64.s). A variable so that
// the tests compare both ways. BenchmarkStep, 65,536 floats in cache on
// the 2-core AMD EPYC guest, vector against scalar: SGD 5.9–6.0 µs against
// 65–69, Momentum 10.4–10.8 against 69–79, Adagrad 19.7–20.3 against
// 240–323.
var vectorRules = cpu.X86.HasAVX2

// sgdVec applies SGD to the first n - n%8 weights and returns how many it
// did (0 without AVX2).
func sgdVec(w, g []float32, lr, wd float32) int {
	n := len(w) &^ 7
	if !vectorRules || n == 0 {
		return 0
	}
	sgdAVX2(&w[0], &g[0], n, lr, wd)
	return n
}

// momentumVec is sgdVec for Momentum.
func momentumVec(w, g, v []float32, lr, mu, wd float32) int {
	n := len(w) &^ 7
	if !vectorRules || n == 0 {
		return 0
	}
	momentumAVX2(&w[0], &g[0], &v[0], n, lr, mu, wd)
	return n
}

// adagradVec is sgdVec for Adagrad.
func adagradVec(w, g, h []float32, lr, eps, wd float32) int {
	n := len(w) &^ 7
	if !vectorRules || n == 0 {
		return 0
	}
	adagradAVX2(&w[0], &g[0], &h[0], n, lr, eps, wd)
	return n
}

// adamVec is sgdVec for Adam and AdamW (s: the moments, interleaved).
func adamVec(w, g, s []float32, a *AdamStep) int {
	n := len(w) &^ 7
	if !vectorRules || n == 0 {
		return 0
	}
	wd, dec := a.WeightDecay, 0
	if a.Decoupled {
		wd, dec = a.Decay, 1
	}
	adamAVX2(&w[0], &g[0], &s[0], n, a.Beta1, a.OneMinusBeta1, a.Beta2, a.OneMinusBeta2, a.StepSize, a.BiasCorrection2Sqrt, a.Eps, wd, dec)
	return n
}

// larsVec is sgdVec for LARS's element-wise step (rate: lr·trust).
func larsVec(w, g, v []float32, rate, mu, wd float32) int {
	n := len(w) &^ 7
	if !vectorRules || n == 0 {
		return 0
	}
	larsAVX2(&w[0], &g[0], &v[0], n, rate, mu, wd)
	return n
}
