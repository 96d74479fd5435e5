// Package cuda is the kernels.Backend on NVIDIA GPUs, built with the tag
// `cuda` (`make build-cuda`); without the tag the package is empty.
//
// Each process (MPI rank) opens device LocalRank mod count, in that
// device's primary context, with one stream of its own: every op is queued
// on the stream in call order and returns at once, and only Download, Dot,
// NonFinite and Sync wait for the device. The kernels are the project's
// own CUDA C (kernels/cu, contract kernels/cu/ABI.md), embedded as PTX by
// package kernels/ptx and JIT-compiled by the driver once per process:
// compute_90 on Hopper, compute_70 elsewhere.
//
// Memory: device buffers come from a pool of size classes (no cuMemAlloc
// after a training step's first); views share their buffer's memory;
// host↔device copies go through pinned host memory (transfer.go).
//
// The driver library is opened at run time (driver.go): a binary built
// with the tag runs everywhere, and opening the backend on a machine
// without a driver or GPU returns an error starting "no CUDA device:".
//
// Errors: shapes are checked on the host before anything is queued
// (kernels.ErrShape); a failed launch, copy or allocation, and an
// asynchronous fault reported by a later wait, wrap kernels.ErrDevice and
// name the op, its shapes, the device and the local rank (a fault also
// lists the ops queued since the last wait; DML_CUDA_SYNC=1 makes every op
// wait, to pin it on one).
package cuda
