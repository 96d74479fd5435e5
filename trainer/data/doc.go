// Package data holds the datasets dml trains on and the arithmetic that
// decides which rank sees which sample. It does no MPI and keeps no global
// state: loaders are functions of their input, generators are functions of a
// seed, and sample orders are functions of (seed, epoch) and shards of (rank, size).
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
// Distribution (shard.go, order.go): rank r of size keeps the strided shard
// r, r+size, r+2·size, … and walks it each epoch in an order drawn from a
// seed (EpochOrder). Without shuffling, the b-sample batches of ranks
// 0..size-1 at step k together are exactly the samples [k·size·b,
// (k+1)·size·b) that one rank with batch size·b sees at step k.
//
// Hostile input: no header, gzip stream or LIBSVM index makes a loader
// allocate more than the input justifies. IDX headers are checked against
// the file's size before reading, gzip output is bounded by inflate.Limit
// of the compressed bytes (a gzip bomb is refused), LIBSVM feature indices
// by DefaultMaxFeatures, and Sparse.ToDense by MaxDenseExpansion.
//
// Loading only a shard (source.go): an IDXSource (OpenIDXPair,
// OpenFashionMNIST) reads labels and headers when opened and the pixels of
// just the rows a rank asks for; a *Dense is the in-memory DenseSource.
//
// Mini-batches are gathered into caller-owned buffers (Dense.Gather,
// Sparse.Gather) so a training loop allocates nothing per step.
package data
