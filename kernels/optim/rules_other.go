//go:build !amd64 || purego || amd64.v3

package optim

var vectorRules = false

func sgdVec(w, g []float32, lr, wd float32) int             { return 0 }
func momentumVec(w, g, v []float32, lr, mu, wd float32) int { return 0 }
func adagradVec(w, g, h []float32, lr, eps, wd float32) int { return 0 }
func adamVec(w, g, s []float32, a *AdamStep) int            { return 0 }
func larsVec(w, g, v []float32, rate, mu, wd float32) int   { return 0 }
