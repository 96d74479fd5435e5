//go:build !purego && !amd64.v3

package cpu

import "github.com/dml-project/dml/kernels/optim"

// momentumUpdate is optim.MomentumUpdate, with the AVX2 loop
// (optim_amd64.s) doing the longest multiple of 8 elements when the CPU has
// AVX2; optim's own loop does the rest. Same results bit for bit.
func momentumUpdate(w, g, v []float32, lr, mu, wd float32) {
	g, v = g[:len(w)], v[:len(w)]
	n := len(w) &^ 7
	if useAVX2 && n > 0 {
		momentumAVX2(&w[0], &g[0], &v[0], n, lr, mu, wd)
		w, g, v = w[n:], g[n:], v[n:]
	}
	optim.MomentumUpdate(w, g, v, lr, mu, wd)
}

// sgdUpdate is optim.SGDUpdate, vectorised likewise.
func sgdUpdate(w, g []float32, lr, wd float32) {
	g = g[:len(w)]
	n := len(w) &^ 7
	if useAVX2 && n > 0 {
		sgdAVX2(&w[0], &g[0], n, lr, wd)
		w, g = w[n:], g[n:]
	}
	optim.SGDUpdate(w, g, lr, wd)
}

//go:noescape
func momentumAVX2(w, grad, v *float32, n int, lr, mu, wd float32)

//go:noescape
func sgdAVX2(w, grad *float32, n int, lr, wd float32)
