//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/dml-project/dml/kernels"
)

var (
	_ kernels.Backend         = (*Backend)(nil)
	_ kernels.HostAllocator   = (*Backend)(nil)
	_ kernels.AsyncDownloader = (*Backend)(nil)
)

func init() {
	// Open's *Backend is returned as the interface only when it is usable:
	// a nil *Backend in a non-nil kernels.Backend would pass callers'
	// nil checks and panic in the first method call (conventions, 22).
	kernels.Register("cuda", func(o kernels.Options) (kernels.Backend, error) {
		be, err := Open(o)
		if err != nil {
			return nil, err
		}
		return be, nil
	})
}

// Backend is kernels.Backend on one NVIDIA GPU. Open it with Open (or
// kernels.Open("cuda", …)); the zero value is not usable. Like every
// kernels.Backend it is used by one goroutine at a time.
type Backend struct {
	dev       *device
	q         queue
	localRank int
	tf32      bool                // Gemm uses the TF32 tensor-core kernels
	tf32Gemm  map[string]function // they, by name
	// prec is the products' arithmetic; at BF16 and FP16 their operands
	// are rounded into scratch first (precision.go).
	prec   kernels.Precision
	rounds [2]*allocation // the rounded operands (a block holds class bytes)

	pool  pool
	mem   map[devPtr]struct{} // every cuMemAlloc'd block, freed by Close
	up    uploadRing
	down  pinned   // staging for Download, Dot, NonFinite
	hosts []pinned // from HostAlloc
	// copies: the second stream DownloadAsync queues on, made on first
	// use, the event it waits on (recorded on q), and whether copies are
	// in flight.
	copies    queue
	copiesOK  bool
	copyAfter event
	inFlight  int
	args      [16]uint64
	ops       opLog
	err       error // sticky: the device failed, the context is unusable
	closed    bool
	// capturing: a CUDA graph capture is under way (graph.go): ops that
	// wait for the device fail.
	capturing bool
	// libs: cuBLAS and cuDNN where they serve (providers.go).
	libs providers
	// syncEach makes every op wait for the device (DML_CUDA_SYNC=1), so an
	// asynchronous fault is reported by the op that caused it.
	syncEach bool
}

// Open opens device LocalRank mod count with a stream of its own. Without
// a driver or a GPU the error wraps errNoDevice and starts with
// "no CUDA device:". Precision TF32 selects the tensor-core GEMM on
// compute capability ≥ 8.0 (FP32 elsewhere); BF16 and FP16 round the
// products' operands and run them there too (precision.go).
func Open(o kernels.Options) (*Backend, error) {
	if err := loadDriver(); err != nil {
		return nil, err
	}
	all, err := Devices()
	if err != nil {
		return nil, err
	}
	ord := DeviceFor(o.LocalRank, len(all))
	d, tf32, err := openDevice(ord, o.Precision == kernels.TF32 || o.Precision.Rounds())
	if err != nil {
		if ErrNoDevice(err) {
			return nil, err
		}
		return nil, fmt.Errorf("cuda: local rank %d: %w: %w", o.LocalRank, kernels.ErrDevice, err)
	}
	be := &Backend{dev: d, localRank: o.LocalRank, prec: o.Precision, syncEach: os.Getenv("DML_CUDA_SYNC") == "1"}
	be.tf32, be.tf32Gemm = tf32 != nil, tf32
	if be.q, err = d.ctx.newQueue(); err != nil {
		return nil, be.deviceErr("Open", "", err)
	}
	if err := be.openProviders(o); err != nil {
		_ = be.Close()
		return nil, err
	}
	return be, nil
}

// ErrNoDevice reports whether err says the machine has no usable CUDA
// device (no driver library, no GPU, a driver that refuses to start).
func ErrNoDevice(err error) bool { return errors.Is(err, errNoDevice) }

// Name returns "cuda".
func (be *Backend) Name() string { return "cuda" }

// Device describes the GPU this backend runs on.
func (be *Backend) Device() Device { return be.dev.Device }

// Arch lists the PTX modules loaded on the device and their virtual
// architectures ("elementwise compute_90, gemm compute_90, …").
func (be *Backend) Arch() string { return be.dev.arch }

// TF32 reports whether Gemm uses the TF32 tensor-core kernels.
func (be *Backend) TF32() bool { return be.tf32 }

// Sync waits for every op queued so far and returns the first error the
// device reported since, naming the ops queued since the last sync.
func (be *Backend) Sync() error {
	if err := be.usable("Sync"); err != nil {
		return err
	}
	if be.capturing {
		return fmt.Errorf("cuda.Sync: %w", errCapturing)
	}
	if err := be.q.sync(); err != nil {
		return be.asyncErr("Sync", "", err)
	}
	be.ops.reset()
	return be.WaitDownloads()
}

// Close waits for the queue, then releases the backend's buffers (every
// Buffer from it becomes invalid), pinned memory (HostAlloc slices too)
// and stream. The device's context and kernels stay for other backends in
// the process.
func (be *Backend) Close() error {
	if be.closed {
		return nil
	}
	var errs []error
	if be.err == nil {
		if err := be.q.sync(); err != nil {
			errs = append(errs, be.asyncErr("Close", "", err))
		}
	}
	if be.copiesOK {
		if err := be.copies.sync(); err != nil && be.err == nil {
			errs = append(errs, be.asyncErr("Close", "copy stream", err))
		}
		_ = be.q.destroyEvent(be.copyAfter)
		if err := be.copies.destroy(); err != nil && be.err == nil {
			errs = append(errs, err)
		}
		be.copiesOK, be.inFlight = false, 0
	}
	be.closeProviders()
	// Every device allocation, in the pool's free lists or still live.
	for p := range be.mem {
		if err := be.q.free(p); err != nil && be.err == nil {
			errs = append(errs, err)
		}
	}
	be.mem = nil
	be.pool = pool{}
	be.up.release(be.q)
	be.down.release(be.q)
	for i := range be.hosts {
		be.hosts[i].release(be.q)
	}
	be.hosts = nil
	if err := be.q.destroy(); err != nil && be.err == nil {
		errs = append(errs, err)
	}
	be.closed = true
	if len(errs) > 0 {
		return be.deviceErr("Close", "", errors.Join(errs...))
	}
	return nil
}

// Live buffers stay allocated until Close; the pool counts them.
// MemoryInUse returns the bytes handed out and the bytes cached in the
// pool's free lists.
func (be *Backend) MemoryInUse() (live, cached int64) { return be.pool.live, be.pool.cached }

// usable returns the sticky device error, or an error for a closed backend.
func (be *Backend) usable(op string) error {
	if be.closed {
		panic("cuda: " + op + " on a closed Backend")
	}
	return be.err
}

// where names the device and rank for messages.
func (be *Backend) where() string {
	return fmt.Sprintf("device %d (%s), local rank %d", be.dev.Ordinal, be.dev.Name, be.localRank)
}

// shapeErr returns an error wrapping kernels.ErrShape.
func (be *Backend) shapeErr(op, format string, args ...any) error {
	return fmt.Errorf("cuda.%s: %s: %w", op, fmt.Sprintf(format, args...), kernels.ErrShape)
}

// deviceErr wraps a failed driver call of op (with its shapes) in
// kernels.ErrDevice, naming the device and the rank. A fault (see fatal)
// makes the error sticky: the context is unusable after one, so every
// later call returns it; out of memory or a rejected launch leave the
// backend usable.
func (be *Backend) deviceErr(op, shapes string, err error) error {
	e := fmt.Errorf("cuda.%s(%s) on %s: %w: %w", op, shapes, be.where(), kernels.ErrDevice, err)
	if fatal(err) {
		be.err = e
	}
	return e
}

// asyncErr is deviceErr for an error a wait reported: it may come from any
// op queued since the last sync, so those are listed.
func (be *Backend) asyncErr(op, shapes string, err error) error {
	e := fmt.Errorf("cuda.%s(%s) on %s: %w: %w (ops queued since the last sync, oldest first: %s; DML_CUDA_SYNC=1 reports the failing op itself)",
		op, shapes, be.where(), kernels.ErrDevice, err, be.ops.String())
	if fatal(err) {
		be.err = e
	}
	return e
}

// opLog remembers the last ops queued since the last sync, for messages.
type opLog struct {
	recs  [8]opRec
	n     int // ops since the last sync
	first int // index of the oldest kept
}

type opRec struct {
	name string
	dims [4]int
	nd   int
}

func (l *opLog) add(name string, dims []int) {
	r := &l.recs[l.n%len(l.recs)]
	r.name, r.nd = name, copy(r.dims[:], dims)
	l.n++
}

func (l *opLog) reset() { l.n = 0 }

func (l *opLog) String() string {
	if l.n == 0 {
		return "none"
	}
	var parts []string
	start := max(0, l.n-len(l.recs))
	if start > 0 {
		parts = append(parts, fmt.Sprintf("%d earlier", start))
	}
	for i := start; i < l.n; i++ {
		r := l.recs[i%len(l.recs)]
		d := make([]string, r.nd)
		for j := range d {
			d[j] = fmt.Sprint(r.dims[j])
		}
		parts = append(parts, r.name+"("+strings.Join(d, ",")+")")
	}
	return strings.Join(parts, ", ")
}

// record notes a queued op; with DML_CUDA_SYNC=1 it waits for it.
func (be *Backend) record(op string, dims ...int) error {
	be.ops.add(op, dims)
	if be.syncEach && !be.capturing {
		if err := be.q.sync(); err != nil {
			return be.asyncErr(op, fmt.Sprint(dims), err)
		}
		be.ops.reset()
	}
	return nil
}
