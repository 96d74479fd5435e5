package kernels

// Optional interfaces a device Backend may implement beside Backend. Code
// that crosses between host and device (the training step) detects them
// with a type assertion and takes a slower, plainer path where they are
// missing; the CPU backend implements neither (its buffers are
// HostBuffers: nothing is copied at all).

// HostAllocator hands out host memory the device copies to and from
// directly (pinned, page-locked): Upload from it and Download into it skip
// the staging copy through the backend's own pinned buffers, and
// DownloadAsync into it overlaps the ops queued after it.
type HostAllocator interface {
	// HostAlloc returns n zeroed float32 of such memory.
	HostAlloc(n int) ([]float32, error)
	// HostFree releases a slice from HostAlloc (the whole slice, as
	// returned); it must not be used afterwards. HostFree(nil) does nothing.
	HostFree(s []float32) error
}

// AsyncDownloader queues device→host copies that run while the backend
// goes on with later ops (on a device: a second stream, started once the
// ops queued before the call are done), so that a layer's gradient travels
// while the backward pass computes the next layer's.
type AsyncDownloader interface {
	// DownloadAsync queues a copy of src into dst (lengths must match) of
	// src as the ops queued before the call leave it. dst is not complete
	// until WaitDownloads returns, and neither dst nor src may be touched
	// (src not written by a later op) until then. A dst not from HostAlloc
	// may make it a plain, waiting Download.
	DownloadAsync(dst []float32, src Buffer) error
	// WaitDownloads waits for every copy DownloadAsync queued and returns
	// the first error one of them met.
	WaitDownloads() error
}
