//go:build !cgo

package blas

import (
	"errors"

	"gonum.org/v1/gonum/blas"
)

// haveCgo is false: a binary without cgo cannot dlopen, so Open always
// reports the backend unavailable.
const haveCgo = false

func dlopen(string, int) error { return errors.New("built without cgo") }
func setThreads(int) bool      { return false }
func getThreads() int          { return -1 }
func libConfig() string        { return "" }

type openblas struct{}

func (openblas) Sgemm(blas.Transpose, blas.Transpose, int, int, int, float32, []float32, int, []float32, int, float32, []float32, int) {
	panic("blas: Sgemm in a binary built without cgo")
}
