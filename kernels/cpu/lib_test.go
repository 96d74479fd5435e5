package cpu_test

import (
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
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

// TestPrecisionChecks runs the suite at BF16 and FP16 on the cpu backend
// as the registry opens it, and on the stand-in library's path (whose
// whole convolutions must get rounded operands too): the products match
// the float64 products of the rounded operands.
func TestPrecisionChecks(t *testing.T) {
	for _, p := range []kernels.Precision{kernels.BF16, kernels.FP16} {
		t.Run(p.String(), func(t *testing.T) {
			kernelstest.RunOpts(t, func() kernels.Backend {
				be, err := kernels.Open("cpu", kernels.Options{Precision: p})
				if err != nil {
					t.Fatal(err)
				}
				return be
			}, kernelstest.PrecisionOptions(p))
		})
		t.Run(p.String()+"/library", func(t *testing.T) {
			kernelstest.RunOpts(t, func() kernels.Backend {
				be := kernelstest.NewReversedCPU().(*cpu.Backend)
				be.SetPrecision(p)
				return be
			}, kernelstest.PrecisionOptions(p))
		})
	}
}
