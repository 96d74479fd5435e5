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
