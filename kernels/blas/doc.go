// Package blas is the "blas" kernels.Backend: package kernels/cpu's backend
// (host buffers, the same element-wise ops, losses and optimizer updates,
// bit for bit) with Gemm running on OpenBLAS's cblas_sgemm instead of
// gonum's pure-Go SGEMM. At the MLP's shapes that is the difference between
// a few and ~100 GFLOP/s per core.
//
// OpenBLAS is loaded at run time with dlopen, not linked: the same binary
// starts on a machine without it, where Open returns an error wrapping
// kernels.ErrUnavailable that says how to install it, and
// kernels.Open(kernels.AutoBackend, …) falls back to the pure-Go "cpu"
// backend with a one-line notice. That is why this package does not use
// gonum.org/v1/netlib, whose cgo binding links -lopenblas at build time (a
// binary built with it does not start without the library), and why no
// BLAS headers are needed to build it. The call itself is one cgo call
// through a function pointer: measured against netlib's Sgemm on the same
// buffers (a scratch benchmark, 2026-11-22), a 1×1×1 product took 80-100 ns
// through this backend's Gemm (its shape and ownership checks included)
// and 55-90 ns through netlib, and 64×10×256 took 7.1-7.3 µs against
// 6.5-7.3 µs: a few tens of ns per call, against the 4-600 µs each of the
// MLP's products takes.
//
// The library is the first of libopenblas.so.0, libopenblas.so,
// libopenblasp.so.0 and libopenblaso.so.0 that loads; DML_BLAS_LIB=path
// names another (any library exporting cblas_sgemm, e.g. BLIS's or MKL's
// libmkl_rt.so, though only OpenBLAS's thread control is used).
//
// Threads: OpenBLAS sizes its thread pool when it is loaded, from
// OPENBLAS_NUM_THREADS. When the environment does not set it, the first
// Open sets it (in C, before dlopen) to kernels.Options.Threads, or 1 when
// that is 0, so that ranks sharing a machine do not fight over its cores,
// and every Open calls openblas_set_num_threads with that count (a
// process-wide setting: the last Open wins). When the environment sets
// OPENBLAS_NUM_THREADS, that count is used and Options.Threads is ignored.
//
// A binary built without cgo registers "blas" too; its Open always returns
// the ErrUnavailable error, saying to rebuild with CGO_ENABLED=1.
package blas
