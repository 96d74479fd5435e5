module github.com/dml-project/dml

go 1.26.8

// The design card names gorgonia.org/cu for the CUDA driver API and
// gorgonia.org/tensor; neither is required. cu v0.9.6's package init calls
// cuInit and os.Exit(1)s when it fails and the package links libcuda, so a
// binary importing it cannot start (nor its tests skip) on a machine without
// a GPU; package cuda opens libcuda.so.1 itself with dlopen instead (see
// cuda/driver.go). The CPU backend's GEMM is gonum's, so tensor is unused.

require (
	github.com/google/pprof v0.0.0-20211214055906-6f57359322fd
	github.com/pkg/profile v1.7.0
	github.com/sbinet/npyio v0.6.0
	github.com/sbromberger/gompi v0.2.0
	golang.org/x/sys v0.49.0
	gonum.org/v1/gonum v0.9.3
)

require (
	github.com/felixge/fgprof v0.9.3 // indirect
	gonum.org/v1/netlib v0.0.0-20201012070519-2390d26c3658 // indirect
)
