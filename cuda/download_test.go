//go:build cuda

package cuda

import (
	"errors"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// TestDownloadAsync queues chunked device→host copies on the copy stream
// while the op stream stays busy (large GEMMs between them), as the
// training step does per layer: each copy must see its chunk as the ops
// queued before it left it (a copy that did not wait for the event would
// read the chunk before its Scale), none may be lost, and WaitDownloads
// makes them all visible.
func TestDownloadAsync(t *testing.T) {
	be := open(t, kernels.Options{})
	defer be.Close()
	const n = 3<<20 + 5
	const g = 1024
	a, err := be.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := be.Alloc(g * g)
	y, _ := be.Alloc(g * g)
	if err := be.Fill(a, 1); err != nil {
		t.Fatal(err)
	}
	if err := be.Fill(x, 0.001); err != nil {
		t.Fatal(err)
	}
	h, err := be.HostAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range h {
		h[i] = -1
	}
	// Chunks from the end, growing a final suffix like the gradient hook.
	bounds := []int{n, n - 2, n - 10 - 1<<20, 1 << 20, 7, 0}
	for c := 0; c+1 < len(bounds); c++ {
		lo, hi := bounds[c+1], bounds[c]
		for range 3 { // keep the op stream busy
			if err := be.Gemm(false, false, g, g, g, 1, x, x, 0, y); err != nil {
				t.Fatal(err)
			}
		}
		if err := be.Scale(float32(c+2), be.View(a, lo, hi-lo)); err != nil {
			t.Fatal(err)
		}
		if err := be.DownloadAsync(h[lo:hi], be.View(a, lo, hi-lo)); err != nil {
			t.Fatal(err)
		}
	}
	if err := be.WaitDownloads(); err != nil {
		t.Fatal(err)
	}
	for c := 0; c+1 < len(bounds); c++ {
		lo, hi := bounds[c+1], bounds[c]
		for i := lo; i < hi; i++ {
			if h[i] != float32(c+2) {
				t.Fatalf("chunk %d [%d,%d): h[%d] = %v, want %v", c, lo, hi, i, h[i], float32(c+2))
			}
		}
	}
	// Into memory not from HostAlloc: a plain Download, same bits.
	p := make([]float32, 100)
	if err := be.DownloadAsync(p, be.View(a, 0, 100)); err != nil {
		t.Fatal(err)
	}
	if err := be.WaitDownloads(); err != nil {
		t.Fatal(err)
	}
	for i, v := range p {
		if v != h[i] {
			t.Fatalf("pageable p[%d] = %v, want %v", i, v, h[i])
		}
	}
	// Bad lengths queue nothing and say so.
	if err := be.DownloadAsync(h[:10], be.View(a, 0, 11)); !errors.Is(err, kernels.ErrShape) {
		t.Fatalf("DownloadAsync of 11 into 10: %v, want ErrShape", err)
	}
	// Sync waits for the copy stream too.
	for i := range h {
		h[i] = -1
	}
	if err := be.DownloadAsync(h, a); err != nil {
		t.Fatal(err)
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	if h[n-1] != float32(2) || h[0] != float32(len(bounds)) {
		t.Fatalf("after Sync: h[0] = %v, h[n-1] = %v", h[0], h[n-1])
	}
	// HostFree: a subslice or a second free is refused.
	if err := be.HostFree(h[1:]); !errors.Is(err, kernels.ErrShape) {
		t.Fatalf("HostFree of a subslice: %v, want ErrShape", err)
	}
	if err := be.HostFree(h); err != nil {
		t.Fatal(err)
	}
	if err := be.HostFree(h); !errors.Is(err, kernels.ErrShape) {
		t.Fatalf("second HostFree: %v, want ErrShape", err)
	}
}
