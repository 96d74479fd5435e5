package cpu_test

import (
	"runtime"
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

// TestFreeDropsSaved: what a library's max pools and batch norms keep by
// their buffers (workspaces, variances) goes with the buffers: pooling
// and freeing a 4 MiB input 10 times leaves the heap near where it was
// (it had kept each input and workspace alive, 10 × 5 MiB).
func TestFreeDropsSaved(t *testing.T) {
	be := kernelstest.NewReversedCPU()
	defer be.Close()
	lp, ok := kernels.LibPoolOf(be)
	nb, ok2 := kernels.NormOf(be)
	if !ok || !ok2 {
		t.Fatal("the stand-in library does not pool, or no batch norm")
	}
	wc, _ := kernels.WholeConvOf(be)
	const n, c, h = 16, 16, 64 // 4 MiB
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	alloc := func(k int) kernels.Buffer {
		b, err := be.Alloc(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	id := alloc(c * c)
	eye := make([]float32, c*c)
	for i := range c {
		eye[i*c+i] = 1
	}
	if err := be.Upload(id, eye); err != nil {
		t.Fatal(err)
	}
	before := heap()
	for range 10 {
		in, x, y := alloc(n*c*h*h), alloc(n*c*h*h), alloc(n*c*h*h/4)
		mean, inv, rm, rv, g, b := alloc(c), alloc(c), alloc(c), alloc(c), alloc(c), alloc(c)
		if err := wc.ConvForward(x, in, id, nil, n, c, h, h, c, 1, 1, 0); err != nil {
			t.Fatal(err)
		}
		if err := lp.Pool(y, x, true, n, c, h, h, 2, 2, 0); err != nil {
			t.Fatal(err)
		}
		if err := nb.BatchNormTrain(in, mean, inv, rm, rv, x, g, b, n, c, h*h, 1e-5, 0.1); err != nil {
			t.Fatal(err)
		}
		for _, buf := range []kernels.Buffer{in, x, y, mean, inv, rm, rv, g, b} {
			be.Free(buf)
		}
	}
	if grew := int64(heap()) - int64(before); grew > 16<<20 {
		t.Errorf("the heap grew by %d MiB over 10 freed inputs: what the library kept by them stayed", grew>>20)
	}
}
