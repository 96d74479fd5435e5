//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/dml-project/dml/kernels"
)

// Host↔device copies go through pinned (page-locked) host memory: the DMA
// engines read and write it directly, and a copy from it is asynchronous.
//
//   - Upload copies the caller's slice into a pinned ring and queues the
//     copy from there, so it returns at once (the slice may be reused) and
//     the transfer overlaps the ops queued before it. A slice from
//     HostAlloc, if large, is copied from directly, then waited for.
//   - Download queues the copy into a pinned staging buffer, waits for the
//     queue, then copies into the caller's slice; into a slice from
//     HostAlloc it copies directly. Either way it is one device→host copy
//     of the whole buffer: the training step downloads its fused gradient
//     buffer in one piece.
//
// Which side reduces the gradient across ranks: the host. The ring
// AllReduce (package collectives) runs over MPI in host memory, so each
// rank's fused gradient buffer (every layer's gradient plus the loss and
// correct-count slots, one contiguous device buffer) crosses to the host
// once per step and the reduced sum comes back once. Reducing on the
// device instead would need GPU-aware MPI or NCCL, which the project does
// not have; and the round trip is cheap next to the step: on an H200, for
// the MLP 784-1024-1024-10 (1.86 M floats, 7.4 MB), one D2H into HostAlloc
// memory plus one H2D back adds 0.29 ms to a 0.61 ms step (about 51 GB/s
// each way; bench/gpu/RESULTS.md). What costs more is a host buffer that
// is not pinned: the staging memcpy both ways (see HostAlloc).

// pinned is page-locked host memory of the backend's context.
type pinned struct {
	p     unsafe.Pointer
	bytes int
}

// ensure makes h at least bytes long; its old contents are lost. Nothing
// queued may still use it.
func (h *pinned) ensure(q queue, bytes int) error {
	if h.bytes >= bytes {
		return nil
	}
	h.release(q)
	size := max(bytes, 1<<20)
	p, err := q.hostAlloc(size)
	if err != nil {
		return err
	}
	h.p, h.bytes = p, size
	return nil
}

func (h *pinned) release(q queue) {
	if h.p != nil {
		_ = q.hostFree(h.p)
	}
	h.p, h.bytes = nil, 0
}

// at returns the address off bytes in.
func (h *pinned) at(off int) unsafe.Pointer { return unsafe.Add(h.p, off) }

// contains reports whether [p, p+bytes) lies inside h.
func (h *pinned) contains(p unsafe.Pointer, bytes int) bool {
	if h.p == nil {
		return false
	}
	a, b := uintptr(h.p), uintptr(p)
	return b >= a && b-a <= uintptr(h.bytes) && uintptr(bytes) <= uintptr(h.bytes)-(b-a)
}

// uploadRing is pinned memory used as a ring of regions, each holding one
// Upload's data until the device has copied it (an event recorded after
// the copy says when).
type uploadRing struct {
	buf     pinned
	head    int
	pending []ringRegion // oldest first
	spare   []event
}

type ringRegion struct {
	start, end int
	ev         event
}

// reserve returns the offset of n free bytes, waiting for the oldest
// uploads still in flight where the ring is full. It grows the ring (after
// waiting for every pending upload) for an upload over half its size.
func (r *uploadRing) reserve(q queue, n int) (int, error) {
	n = (n + 255) &^ 255
	if 2*n > r.buf.bytes {
		if err := r.waitAll(q); err != nil {
			return 0, err
		}
		if err := r.buf.ensure(q, max(4*n, 8<<20)); err != nil {
			return 0, err
		}
		r.head = 0
	}
	off := r.head
	if off+n > r.buf.bytes {
		off = 0
	}
	for r.overlaps(off, off+n) {
		if err := r.popOldest(q); err != nil {
			return 0, err
		}
	}
	r.head = off + n
	return off, nil
}

func (r *uploadRing) overlaps(start, end int) bool {
	for _, p := range r.pending {
		if p.start < end && start < p.end {
			return true
		}
	}
	return false
}

func (r *uploadRing) popOldest(q queue) error {
	p := r.pending[0]
	r.pending = r.pending[1:]
	r.spare = append(r.spare, p.ev)
	return q.wait(p.ev)
}

func (r *uploadRing) waitAll(q queue) error {
	for len(r.pending) > 0 {
		if err := r.popOldest(q); err != nil {
			return err
		}
	}
	return nil
}

// queued marks [off, off+n) in flight until the work queued so far is done.
func (r *uploadRing) queued(q queue, off, n int) error {
	var ev event
	if k := len(r.spare); k > 0 {
		ev, r.spare = r.spare[k-1], r.spare[:k-1]
	} else {
		var err error
		if ev, err = q.newEvent(false); err != nil {
			return err
		}
	}
	if err := q.record(ev); err != nil {
		return err
	}
	r.pending = append(r.pending, ringRegion{start: off, end: off + n, ev: ev})
	return nil
}

func (r *uploadRing) release(q queue) {
	for _, p := range r.pending {
		_ = q.destroyEvent(p.ev)
	}
	for _, e := range r.spare {
		_ = q.destroyEvent(e)
	}
	r.pending, r.spare = nil, nil
	r.buf.release(q)
	r.head = 0
}

// directBytes is the size from which an Upload from HostAlloc memory is
// copied directly (and waited for) rather than staged.
const directBytes = 256 << 10

// HostAlloc returns n zeroed float32 in pinned host memory, which Upload
// and Download move without a staging copy: the AllReduce buffer that
// gradients cross ranks in. The slice is valid until Close.
func (be *Backend) HostAlloc(n int) ([]float32, error) {
	if err := be.usable("HostAlloc"); err != nil {
		return nil, err
	}
	if n < 0 || n > maxElems {
		return nil, be.shapeErr("HostAlloc", "n=%d: bad length", n)
	}
	if n == 0 {
		return []float32{}, nil
	}
	p, err := be.q.hostAlloc(n * 4)
	if err != nil {
		return nil, be.deviceErr("HostAlloc", fmt.Sprintf("n=%d (%s)", n, byteSize(int64(n)*4)), err)
	}
	be.hosts = append(be.hosts, pinned{p: p, bytes: n * 4})
	s := unsafe.Slice((*float32)(p), n)
	clear(s)
	return s, nil
}

// fromHostAlloc reports whether s lies in memory from HostAlloc.
func (be *Backend) fromHostAlloc(s []float32) bool {
	p, n := unsafe.Pointer(unsafe.SliceData(s)), len(s)*4
	for i := range be.hosts {
		if be.hosts[i].contains(p, n) {
			return true
		}
	}
	return false
}

// Upload copies src into dst; lengths must match. src may be reused as
// soon as Upload returns.
func (be *Backend) Upload(dst kernels.Buffer, src []float32) error {
	const op = "Upload"
	d := be.buf(dst)
	if err := be.usable(op); err != nil {
		return err
	}
	if be.capturing {
		return fmt.Errorf("cuda.%s: %w", op, errCapturing)
	}
	if len(src) != d.n {
		return be.shapeErr(op, "src has %d elements, dst %d", len(src), d.n)
	}
	if d.n == 0 {
		return nil
	}
	bytes := d.n * 4
	if bytes >= directBytes && be.fromHostAlloc(src) {
		if err := be.q.htod(d.ptr, unsafe.Pointer(unsafe.SliceData(src)), bytes); err != nil {
			return be.deviceErr(op, fmt.Sprintf("n=%d", d.n), err)
		}
		if err := be.q.sync(); err != nil {
			return be.asyncErr(op, fmt.Sprintf("n=%d", d.n), err)
		}
		be.ops.reset()
		return nil
	}
	off, err := be.up.reserve(be.q, bytes)
	if err != nil {
		return be.asyncErr(op, fmt.Sprintf("n=%d", d.n), err)
	}
	parallelCopy(unsafe.Slice((*float32)(be.up.buf.at(off)), d.n), src)
	if err := be.q.htod(d.ptr, be.up.buf.at(off), bytes); err != nil {
		return be.deviceErr(op, fmt.Sprintf("n=%d", d.n), err)
	}
	if err := be.up.queued(be.q, off, bytes); err != nil {
		return be.deviceErr(op, fmt.Sprintf("n=%d", d.n), err)
	}
	return be.record(op, d.n)
}

// Download copies src into dst; lengths must match. It waits for every op
// queued before it and returns the first error the device reported.
func (be *Backend) Download(dst []float32, src kernels.Buffer) error {
	const op = "Download"
	s := be.buf(src)
	if err := be.usable(op); err != nil {
		return err
	}
	if be.capturing {
		return fmt.Errorf("cuda.%s: %w", op, errCapturing)
	}
	if len(dst) != s.n {
		return be.shapeErr(op, "dst has %d elements, src %d", len(dst), s.n)
	}
	shapes := fmt.Sprintf("n=%d", s.n)
	bytes := s.n * 4
	direct := s.n > 0 && be.fromHostAlloc(dst)
	if s.n > 0 {
		var host unsafe.Pointer
		if direct {
			host = unsafe.Pointer(unsafe.SliceData(dst))
		} else {
			if err := be.down.ensure(be.q, bytes); err != nil {
				return be.deviceErr(op, shapes, err)
			}
			host = be.down.p
		}
		if err := be.q.dtoh(host, s.ptr, bytes); err != nil {
			return be.deviceErr(op, shapes, err)
		}
	}
	if err := be.q.sync(); err != nil {
		return be.asyncErr(op, shapes, err)
	}
	be.ops.reset()
	if s.n > 0 && !direct {
		parallelCopy(dst, unsafe.Slice((*float32)(be.down.p), s.n))
	}
	return nil
}

// readScalar downloads the 8 bytes at p (after the queue) into v.
func (be *Backend) read8(op, shapes string, p devPtr) (uint64, error) {
	if err := be.down.ensure(be.q, 8); err != nil {
		return 0, be.deviceErr(op, shapes, err)
	}
	if err := be.q.dtoh(be.down.p, p, 8); err != nil {
		return 0, be.deviceErr(op, shapes, err)
	}
	if err := be.q.sync(); err != nil {
		return 0, be.asyncErr(op, shapes, err)
	}
	be.ops.reset()
	return *(*uint64)(be.down.p), nil
}

// Copy copies src into dst; lengths must match.
func (be *Backend) Copy(dst, src kernels.Buffer) error {
	const op = "Copy"
	d, s := be.buf(dst), be.buf(src)
	if err := be.usable(op); err != nil {
		return err
	}
	if d.n != s.n {
		return be.shapeErr(op, "src has %d elements, dst %d", s.n, d.n)
	}
	if d.n == 0 || d.ptr == s.ptr {
		return nil
	}
	return be.done(op, be.q.dtod(d.ptr, s.ptr, d.n*4), d.n)
}

// Fill sets every element of b to v (a 32-bit memset of v's bits).
func (be *Backend) Fill(b kernels.Buffer, v float32) error {
	const op = "Fill"
	d := be.buf(b)
	if err := be.usable(op); err != nil {
		return err
	}
	if d.n == 0 {
		return nil
	}
	return be.done(op, be.q.memset32(d.ptr, math.Float32bits(v), d.n), d.n)
}

// parallelCopy copies src into dst (equal lengths) like copy, splitting a
// large copy over up to 8 goroutines: one core's memcpy moves ~5 GB/s, so a
// 7.4 MB gradient staged through pinned memory costs ~1.5 ms a step each way
// on one core.
func parallelCopy(dst, src []float32) {
	const minPart = 256 << 10 // elements (1 MiB) per goroutine, at least
	parts := min(runtime.GOMAXPROCS(0), 8, len(src)/minPart)
	if parts <= 1 {
		copy(dst, src)
		return
	}
	var wg sync.WaitGroup
	step := (len(src) + parts - 1) / parts
	for lo := 0; lo < len(src); lo += step {
		hi := min(lo+step, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}

// HostFree releases a slice from HostAlloc (the whole slice). It waits for
// copies DownloadAsync queued first, since one may still write it.
func (be *Backend) HostFree(s []float32) error {
	const op = "HostFree"
	if len(s) == 0 {
		return nil
	}
	if err := be.usable(op); err != nil {
		return err
	}
	p := unsafe.Pointer(unsafe.SliceData(s))
	for i := range be.hosts {
		if h := be.hosts[i]; h.p == p && h.bytes == len(s)*4 {
			werr := be.WaitDownloads()
			if err := be.q.hostFree(p); err != nil {
				return be.deviceErr(op, fmt.Sprintf("n=%d", len(s)), err)
			}
			be.hosts = append(be.hosts[:i], be.hosts[i+1:]...)
			return werr
		}
	}
	return be.shapeErr(op, "n=%d: not a slice HostAlloc returned (or freed already)", len(s))
}

// DownloadAsync queues a copy of src into dst, a slice from HostAlloc, on
// the backend's copy stream, behind an event recorded on its op stream: the
// copy starts once the ops queued before it are done and runs while later
// ops execute. dst is complete once WaitDownloads returns; until then src
// must not be written by a later op. (The training step downloads each
// layer's gradient this way as the backward pass completes it, so the
// copies of the large early layers overlap the remaining backward GEMMs;
// the H2D upload of the reduced gradient stays on the op stream, where the
// update that reads it is queued.) Into other memory, which a DMA engine
// cannot write asynchronously, it is a plain Download.
func (be *Backend) DownloadAsync(dst []float32, src kernels.Buffer) error {
	const op = "DownloadAsync"
	s := be.buf(src)
	if err := be.usable(op); err != nil {
		return err
	}
	if len(dst) != s.n {
		return be.shapeErr(op, "dst has %d elements, src %d", len(dst), s.n)
	}
	if s.n == 0 {
		return nil
	}
	if !be.fromHostAlloc(dst) {
		return be.Download(dst, src)
	}
	shapes := fmt.Sprintf("n=%d", s.n)
	if !be.copiesOK {
		c, err := be.dev.ctx.newQueue()
		if err != nil {
			return be.deviceErr(op, shapes, err)
		}
		ev, err := be.q.newEvent(false)
		if err != nil {
			_ = c.destroy()
			return be.deviceErr(op, shapes, err)
		}
		be.copies, be.copyAfter, be.copiesOK = c, ev, true
	}
	// One event serves every call: cuStreamWaitEvent waits for the record
	// that precedes it, and a later record does not change that wait.
	if err := be.q.record(be.copyAfter); err != nil {
		return be.deviceErr(op, shapes, err)
	}
	if err := be.copies.after(be.copyAfter); err != nil {
		return be.deviceErr(op, shapes, err)
	}
	if err := be.copies.dtoh(unsafe.Pointer(unsafe.SliceData(dst)), s.ptr, s.n*4); err != nil {
		return be.deviceErr(op, shapes, err)
	}
	be.inFlight++
	return be.record(op, s.n)
}

// WaitDownloads waits for the copies DownloadAsync queued and returns the
// first error the device reported.
func (be *Backend) WaitDownloads() error {
	const op = "WaitDownloads"
	if err := be.usable(op); err != nil {
		return err
	}
	if be.inFlight == 0 {
		return nil
	}
	n := be.inFlight
	be.inFlight = 0
	if err := be.copies.sync(); err != nil {
		return be.asyncErr(op, fmt.Sprintf("%d copies", n), err)
	}
	return nil
}
