package trainer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/trainer/internal/numtest"
)

// asyncDevice is deviceBackend with pinned host memory (HostAllocator) and
// queued downloads (AsyncDownloader), as the CUDA backend has them. A
// queued download takes its snapshot when queued (what a copy ordered
// after the ops before it reads) and lands in dst only at WaitDownloads,
// which also fails when the source was written while the copy was in
// flight: a trainer that read dst before waiting, queued a layer before
// its gradient was final, or let a later op overwrite it, gets other
// weights or an error.
type asyncDevice struct {
	*deviceBackend
	pinned         [][]float32
	pending        []queuedCopy
	asyncs, waits  int
	hostAllocs     int
	notPinnedAsync int
}

type queuedCopy struct {
	dst, snap []float32
	src       kernels.Buffer
}

func newAsyncDevice() *asyncDevice { return &asyncDevice{deviceBackend: &deviceBackend{b: cpu.New()}} }

func (a *asyncDevice) HostAlloc(n int) ([]float32, error) {
	s := make([]float32, n)
	a.pinned = append(a.pinned, s)
	a.hostAllocs++
	return s, nil
}

func (a *asyncDevice) HostFree(s []float32) error {
	for i, p := range a.pinned {
		if unsafe.SliceData(p) == unsafe.SliceData(s) && len(p) == len(s) {
			a.pinned = slices.Delete(a.pinned, i, i+1)
			return nil
		}
	}
	return fmt.Errorf("fake-device: HostFree of %d floats not from HostAlloc", len(s))
}

func (a *asyncDevice) isPinned(s []float32) bool {
	if len(s) == 0 {
		return true
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	for _, h := range a.pinned {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(h)))
		if p >= lo && p+uintptr(4*len(s)) <= lo+uintptr(4*len(h)) {
			return true
		}
	}
	return false
}

func (a *asyncDevice) DownloadAsync(dst []float32, src kernels.Buffer) error {
	if len(dst) != src.Len() {
		return fmt.Errorf("fake-device: DownloadAsync %d into %d: %w", src.Len(), len(dst), kernels.ErrShape)
	}
	if !a.isPinned(dst) {
		a.notPinnedAsync++
	}
	snap := make([]float32, len(dst))
	if err := a.b.Download(snap, un(src)); err != nil {
		return err
	}
	a.pending = append(a.pending, queuedCopy{dst: dst, snap: snap, src: src})
	a.asyncs++
	return nil
}

func (a *asyncDevice) WaitDownloads() error {
	a.waits++
	pend := a.pending
	a.pending = nil
	for _, c := range pend {
		now := make([]float32, len(c.snap))
		if err := a.b.Download(now, un(c.src)); err != nil {
			return err
		}
		for i := range now {
			if math.Float32bits(now[i]) != math.Float32bits(c.snap[i]) {
				return fmt.Errorf("fake-device: the source of a queued download was written before WaitDownloads (element %d)", i)
			}
		}
		copy(c.dst, c.snap)
	}
	return nil
}

var (
	_ kernels.HostAllocator   = (*asyncDevice)(nil)
	_ kernels.AsyncDownloader = (*asyncDevice)(nil)
)

// TestAsyncDownloadSameWeights: on a backend with pinned memory and queued
// downloads, AllReduce training queues one download per layer as the
// backward pass completes it (into pinned memory), makes no plain gradient
// download, and gives the CPU backend's weights bit for bit; the pinned
// memory (gradient buffer and batch staging) is freed at the end.
func TestAsyncDownloadSameWeights(t *testing.T) {
	cfg := synthCfg()
	cfg.MaxSteps = 9
	const ranks = 2
	ref := mustRun(t, ranks, cfg)
	devs := make([]*asyncDevice, ranks)
	got, errs := runWorldWith(t, ranks, cfg, func(r int) kernels.Backend {
		devs[r] = newAsyncDevice()
		return devs[r]
	})
	layers := len(cfg.Hidden) + 1
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		d := devs[r]
		if !slices.Equal(got[r].Params, ref[r].Params) {
			t.Errorf("rank %d: weights differ from the CPU backend's by %.3g", r, numtest.MaxRelDiff(got[r].Params, ref[r].Params))
		}
		if d.asyncs != layers*cfg.MaxSteps || d.waits != cfg.MaxSteps || d.notPinnedAsync != 0 {
			t.Errorf("rank %d: %d queued downloads (%d not into pinned memory), %d waits in %d steps: want %d a step into pinned memory, 1 wait",
				r, d.asyncs, d.notPinnedAsync, d.waits, cfg.MaxSteps, layers)
		}
		// Plain downloads: only outside the steps (final weights, evaluation).
		if d.downloads > 8 {
			t.Errorf("rank %d: %d plain downloads in %d steps: the gradient should travel by DownloadAsync", r, d.downloads, cfg.MaxSteps)
		}
		if d.hostAllocs != 2 || len(d.pinned) != 0 || d.live != 0 {
			t.Errorf("rank %d: %d HostAllocs (want 2: gradient, batch staging), %d not freed; %d device buffers not freed", r, d.hostAllocs, len(d.pinned), d.live)
		}
	}
}

// TestOneRankKeepsGradientOnDevice: a world of one rank on a device
// backend skips the gradient's download and upload (the AllReduce of one
// buffer is itself) and gives the CPU backend's weights bit for bit.
func TestOneRankKeepsGradientOnDevice(t *testing.T) {
	cfg := synthCfg()
	cfg.MaxSteps = 20
	ref := mustRun(t, 1, cfg)
	for _, async := range []bool{false, true} {
		var d *deviceBackend
		got, errs := runWorldWith(t, 1, cfg, func(int) kernels.Backend {
			if async {
				a := newAsyncDevice()
				d = a.deviceBackend
				return a
			}
			d = &deviceBackend{b: cpu.New()}
			return d
		})
		if errs[0] != nil {
			t.Fatal(errs[0])
		}
		if !slices.Equal(got[0].Params, ref[0].Params) {
			t.Errorf("async %v: weights differ from the CPU backend's by %.3g", async, numtest.MaxRelDiff(got[0].Params, ref[0].Params))
		}
		// Per step: the batch upload and the stats download; besides: the
		// initial and final weights and evaluation (under 10; a gradient
		// round trip would add 20 of each).
		if n := cfg.MaxSteps; d.uploads < n || d.uploads > n+10 || d.downloads < n || d.downloads > n+10 {
			t.Errorf("async %v: %d uploads, %d downloads in %d steps: want 1 and 1 a step, a few more outside", async, d.uploads, d.downloads, n)
		}
	}
}

// TestNonFiniteStopsOnDevice: the device paths (one rank, gradient on the
// device; two ranks, queued downloads) stop a diverging run with an error
// naming the step and the layers, as the CPU path does.
func TestNonFiniteStopsOnDevice(t *testing.T) {
	cfg := synthCfg()
	cfg.Opt.LR = 1e30
	for _, ranks := range []int{1, 2} {
		_, errs := runWorldWith(t, ranks, cfg, func(int) kernels.Backend { return newAsyncDevice() })
		for r, err := range errs {
			if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "step") || !strings.Contains(err.Error(), "layer") {
				t.Errorf("%d ranks, rank %d: got %v, want ErrNonFinite naming the step and layer", ranks, r, err)
			}
		}
	}
}
