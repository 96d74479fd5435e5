package cpu_test

import (
	"testing"

	"github.com/dml-project/dml/kernels/kernelstest"
)

// TestWholeConvChecks runs the suite on the cpu backend with the
// whole-convolution op set built from its own ops, so that the WholeConv
// checks are exercised (and their reference checked) without a library.
func TestWholeConvChecks(t *testing.T) {
	kernelstest.Run(t, kernelstest.NewWholeConvCPU)
}

// TestLayoutsChecks runs the suite on the cpu backend with a stand-in
// library that leaves its outputs in a layout of its own (the plain one
// reversed): every op must see plain data wherever it reads one.
func TestLayoutsChecks(t *testing.T) {
	kernelstest.Run(t, kernelstest.NewReversedCPU)
}
