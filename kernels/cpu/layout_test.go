package cpu_test

import (
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/kernelstest"
)

// TestLayoutBookkeeping runs one sequence of ops on the backend whose
// library leaves outputs reversed (kernelstest.NewReversedCPU) and on the
// plain whole-convolution stand-in, and asks for the same bits at every
// read: a view of part of a library-layout buffer, HostBuffer.Data,
// per-element ops on operands in mixed layouts, a buffer freed while in
// the library's layout.
func TestLayoutBookkeeping(t *testing.T) {
	const n, c, h, w, o, k = 2, 3, 5, 5, 4, 3
	run := func(be kernels.Backend) [][]float32 {
		defer be.Close()
		whole, ok := kernels.WholeConvOf(be)
		if !ok {
			t.Fatal("no whole convolutions")
		}
		alloc := func(vals ...float32) kernels.Buffer {
			b, err := be.Alloc(len(vals))
			if err != nil {
				t.Fatal(err)
			}
			if err := be.Upload(b, vals); err != nil {
				t.Fatal(err)
			}
			return b
		}
		ramp := func(m int, scale float32) kernels.Buffer {
			v := make([]float32, m)
			for i := range v {
				v[i] = scale * float32((i*7)%11-5)
			}
			return alloc(v...)
		}
		var reads [][]float32
		read := func(b kernels.Buffer) {
			v := make([]float32, b.Len())
			if err := be.Download(v, b); err != nil {
				t.Fatal(err)
			}
			reads = append(reads, v)
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		x, wt := ramp(n*c*h*w, 0.25), ramp(o*c*k*k, 0.5)
		ylen := n * o * h * w
		y, z, p := ramp(ylen, 0), ramp(ylen, 0), ramp(ylen, 0.125)
		must(whole.ConvForward(y, x, wt, nil, n, c, h, w, o, k, 1, 1))
		must(be.Relu(z, y))              // z takes y's layout
		read(be.View(z, ylen/2, ylen/2)) // part of it: the whole is reordered
		must(be.Sum(z, z, p))            // z plain now, p plain
		must(whole.ConvForward(y, x, wt, nil, n, c, h, w, o, k, 1, 1))
		must(be.Sum(p, y, p))      // library layout + plain
		must(be.Axpy(0.5, p, z))   // p in the library's layout, z plain
		must(be.ReluGrad(z, z, y)) // both in the library's layout
		read(z)
		read(p)
		must(whole.ConvForward(y, x, wt, nil, n, c, h, w, o, k, 1, 1))
		reads = append(reads, slices.Clone(y.(kernels.HostBuffer).Data()))
		must(whole.ConvForward(y, x, wt, nil, n, c, h, w, o, k, 1, 1))
		must(be.Copy(z, y))
		must(be.Scale(2, z))
		must(be.Gemm(false, false, 1, ylen, 1, 1, alloc(1), z, 0, p)) // a plain op reads z
		read(p)
		dx := ramp(n*c*h*w, 0)
		must(whole.ConvBackwardData(dx, z, wt, n, c, h, w, o, k, 1, 1))
		dw := ramp(o*c*k*k, 0)
		must(whole.ConvBackwardFilter(dw, nil, dx, y, n, c, h, w, o, k, 1, 1)) // both in the library's layout
		read(dw)
		must(be.Free(y))
		y2 := ramp(ylen, 1)
		read(y2)
		return reads
	}
	want, got := run(kernelstest.NewWholeConvCPU()), run(kernelstest.NewReversedCPU())
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("read %d: %v, want %v", i, got[i][:min(8, len(got[i]))], want[i][:min(8, len(want[i]))])
		}
	}
}

// TestAxpyPartialOverlap: Axpy with alpha 1 on views that overlap in
// part keeps the element order of its loop (y[i] += x[i] with x[i]
// already updated: running sums), where the vector path would not.
func TestAxpyPartialOverlap(t *testing.T) {
	be := cpu.New()
	defer be.Close()
	const n = 40
	buf, err := be.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Fill(buf, 1); err != nil {
		t.Fatal(err)
	}
	if err := be.Axpy(1, be.View(buf, 0, n-1), be.View(buf, 1, n-1)); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := be.Download(got, buf); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != float32(i+1) {
			t.Fatalf("element %d: %v, want %d (running sums): %v", i, v, i+1, got)
		}
	}
}
