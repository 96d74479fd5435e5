// Package data holds the datasets dml trains on and the arithmetic that
// decides which rank sees which sample. It does no MPI and keeps no global
// state: loaders are functions of their input, generators are functions of a
// seed, and sample orders are functions of (seed, epoch, rank, size).
//
// Two in-memory layouts:
//   - Dense: a row-major float32 matrix with int32 class labels
//     (Fashion-MNIST, synthetic Gaussian classes).
//   - Sparse: CSR rows with int32 column indices in ascending order
//     (LIBSVM text files, synthetic power-law features).
//
// Sources:
//   - IDX files, the MNIST format, raw or gzip (idx.go), and Fashion-MNIST
//     from its Debian package directory (fashion.go).
//   - LIBSVM text (libsvm.go).
//   - Seeded generators (synthetic.go, synthetic_sparse.go).
//
// Distribution (shard.go, order.go): every rank computes the same global
// permutation of the samples from (seed, epoch); each global batch of
// size·b samples is then cut into size contiguous, balanced pieces, one per
// rank. Concatenating the pieces of ranks 0..size-1 gives exactly the batch a
// single rank with batch size·b would see, so N ranks × batch b and 1 rank ×
// batch N·b visit the samples in the same order.
//
// Mini-batches are gathered into caller-owned buffers (Dense.Gather,
// Sparse.Gather) so a training loop allocates nothing per step.
package data
