//go:build !amd64 || purego || amd64.v3

package cpu

import "github.com/dml-project/dml/kernels/optim"

// Without the assembly loops (or with GOAMD64=v3, where Go fuses optim's
// a*b+c into FMAs that the unfused assembly would not match) the updates
// are optim's own loops.

func momentumUpdate(w, g, v []float32, lr, mu, wd float32) { optim.MomentumUpdate(w, g, v, lr, mu, wd) }

func sgdUpdate(w, g []float32, lr, wd float32) { optim.SGDUpdate(w, g, lr, wd) }
