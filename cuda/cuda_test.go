//go:build cuda

package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/kernelstest"
)

// open opens a backend for t, or skips t when the machine has no CUDA
// device (the message starts "no CUDA device:", which make test lists).
func open(t testing.TB, o kernels.Options) *Backend {
	t.Helper()
	be, err := Open(o)
	if ErrNoDevice(err) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return be
}

// TestNoDeviceMessage runs everywhere: without a GPU, opening the backend
// fails with one line starting "no CUDA device:"; with one it succeeds.
func TestNoDeviceMessage(t *testing.T) {
	be, err := kernels.Open("cuda", kernels.Options{})
	if err == nil {
		t.Logf("a CUDA device is present: %+v", be.(*Backend).Device())
		if err := be.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !ErrNoDevice(err) || !strings.HasPrefix(err.Error(), "no CUDA device: ") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Open without a device: %q, want one line starting %q", err, "no CUDA device: ")
	}
	t.Logf("as expected here: %v", err)
}

func TestConformance(t *testing.T) {
	open(t, kernels.Options{}).Close()
	kernelstest.Run(t, func() kernels.Backend { return open(t, kernels.Options{}) })
}

func TestConformanceTF32(t *testing.T) {
	be := open(t, kernels.Options{Precision: kernels.TF32})
	tf32 := be.TF32()
	be.Close()
	if !tf32 {
		t.Skipf("no TF32 GEMM on %s (compute capability %d.%d, %s PTX)", be.Device().Name, be.Device().Major, be.Device().Minor, be.Arch())
	}
	kernelstest.RunOpts(t, func() kernels.Backend { return open(t, kernels.Options{Precision: kernels.TF32}) },
		kernelstest.Options{GemmRelTol: kernelstest.TF32GemmRelTol})
}

// TestConformancePrecision runs the suite at BF16 and FP16, with the
// libraries where they load and on our kernels alone: every product must
// be the float32 sum of the exact products of the rounded operands (the
// bound is float32's, against float64 loops over the rounded operands),
// on cuBLAS and our TF32 or FP32 GEMMs alike; cuDNN's convolutions may
// transform the rounded operands in TF32 and get TF32's bound.
func TestConformancePrecision(t *testing.T) {
	open(t, kernels.Options{}).Close()
	for _, p := range []kernels.Precision{kernels.BF16, kernels.FP16} {
		for _, own := range []bool{false, true} {
			o := kernels.Options{Precision: p, Kernels: kernels.KernelChoice{Own: own}}
			name := p.String()
			if own {
				name += "/dml"
			}
			t.Run(name, func(t *testing.T) {
				ko := kernelstest.PrecisionOptions(p)
				ko.WholeConvRelTol = kernelstest.TF32GemmRelTol
				kernelstest.RunOpts(t, func() kernels.Backend { return open(t, o) }, ko)
			})
		}
	}
}

// TestPoolReuse checks that freed memory is reused by the next Alloc of
// the same size class, with no new device allocation, and comes back zeroed.
func TestPoolReuse(t *testing.T) {
	be := open(t, kernels.Options{})
	defer be.Close()
	a, err := be.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := be.Fill(a, 7); err != nil {
		t.Fatal(err)
	}
	p := a.(*Buffer).ptr
	live, _ := be.MemoryInUse()
	if err := be.Free(a); err != nil {
		t.Fatal(err)
	}
	b, err := be.Alloc(1001) // same class
	if err != nil {
		t.Fatal(err)
	}
	if b.(*Buffer).ptr != p {
		t.Errorf("Alloc after Free got %#x, want the freed %#x", b.(*Buffer).ptr, p)
	}
	if l, _ := be.MemoryInUse(); l != live {
		t.Errorf("live bytes %d after Free+Alloc, want %d", l, live)
	}
	got := make([]float32, 1001)
	if err := be.Download(got, b); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != 0 {
			t.Fatalf("reused buffer [%d] = %v, want 0", i, v)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("use after Free did not panic")
			}
		}()
		_ = be.Fill(a, 1)
	}()
}

// TestUploadRing uploads many batches of changing sizes, back to back
// without waiting, into distinct buffers, so the staging ring wraps and
// grows while copies are in flight; every buffer must hold its batch.
func TestUploadRing(t *testing.T) {
	be := open(t, kernels.Options{})
	defer be.Close()
	const k = 200
	bufs := make([]kernels.Buffer, k)
	want := make([][]float32, k)
	src := make([]float32, 0)
	for i := range k {
		n := 1 + (i*7919)%300000
		if i == 150 {
			n = 5 << 20 // forces the ring to grow mid-way
		}
		src = src[:0]
		for j := range n {
			src = append(src, float32(i*1000003+j))
		}
		want[i] = append([]float32(nil), src...)
		var err error
		if bufs[i], err = be.Alloc(n); err != nil {
			t.Fatal(err)
		}
		if err := be.Upload(bufs[i], src); err != nil {
			t.Fatal(err)
		}
		for j := range src { // the caller reuses src at once
			src[j] = -1
		}
	}
	for i := range k {
		got := make([]float32, len(want[i]))
		if err := be.Download(got, bufs[i]); err != nil {
			t.Fatal(err)
		}
		for j := range got {
			if got[j] != want[i][j] {
				t.Fatalf("upload %d: [%d] = %v, want %v", i, j, got[j], want[i][j])
			}
		}
	}
}

// TestHostAlloc moves data through pinned memory from HostAlloc, the
// direct path (no staging copy).
func TestHostAlloc(t *testing.T) {
	be := open(t, kernels.Options{})
	defer be.Close()
	const n = 1 << 20
	h, err := be.HostAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range h {
		h[i] = float32(i) * 0.5
	}
	b, _ := be.Alloc(n)
	if err := be.Upload(b, h); err != nil {
		t.Fatal(err)
	}
	if err := be.Scale(2, b); err != nil {
		t.Fatal(err)
	}
	if err := be.Download(h, b); err != nil {
		t.Fatal(err)
	}
	for i := range h {
		if h[i] != float32(i) {
			t.Fatalf("h[%d] = %v, want %v", i, h[i], float32(i))
		}
	}
}

// TestOutOfMemory asks for more than the device has: the error wraps
// kernels.ErrDevice, names the op, the size and the rank, and the backend
// stays usable.
func TestOutOfMemory(t *testing.T) {
	be := open(t, kernels.Options{LocalRank: 3})
	defer be.Close()
	n := int(be.Device().TotalMemory/4) * 2
	_, err := be.Alloc(n)
	if err == nil {
		t.Fatalf("Alloc(%d) on a device of %d bytes succeeded", n, be.Device().TotalMemory)
	}
	if !errors.Is(err, kernels.ErrDevice) || !outOfMemory(err) {
		t.Fatalf("Alloc too large: %v, want an out-of-memory kernels.ErrDevice", err)
	}
	for _, s := range []string{"cuda.Alloc", "GiB", "local rank 3", "out of memory"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	b, err := be.Alloc(10)
	if err != nil {
		t.Fatalf("Alloc after an out-of-memory error: %v", err)
	}
	if err := be.Fill(b, 1); err != nil {
		t.Fatal(err)
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestShapeErrorsQueueNothing checks that a shape error names the op and
// shapes and leaves the op log empty (nothing was queued).
func TestShapeErrorsQueueNothing(t *testing.T) {
	be := open(t, kernels.Options{})
	defer be.Close()
	a, _ := be.Alloc(6)
	b, _ := be.Alloc(5)
	c, _ := be.Alloc(4)
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	err := be.Gemm(false, false, 2, 2, 3, 1, a, b, 0, c)
	if !errors.Is(err, kernels.ErrShape) || !strings.Contains(err.Error(), "cuda.Gemm") || !strings.Contains(err.Error(), "m=2 n=2 k=3") {
		t.Fatalf("Gemm with B of 5 elements for 3×2: %v", err)
	}
	if be.ops.n != 0 {
		t.Errorf("%d ops queued by a call that failed its shape check", be.ops.n)
	}
}

// TestLaunchError provokes a launch the driver rejects (a block larger than
// the device allows) through the launch wrapper: the error wraps
// kernels.ErrDevice and names the op.
func TestLaunchError(t *testing.T) {
	be := open(t, kernels.Options{})
	defer be.Close()
	x, _ := be.Alloc(8)
	err := be.done("Scale", be.launch(be.dev.k.scale, 1, 1, 4096, ptr(x.(*Buffer)), i64(8), f32(2)), 8)
	if !errors.Is(err, kernels.ErrDevice) || !strings.Contains(err.Error(), "cuda.Scale(8)") || !strings.Contains(err.Error(), "cuLaunchKernel") {
		t.Fatalf("launch with 4096 threads per block: %v", err)
	}
}
