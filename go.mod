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
	gonum.org/v1/plot v0.10.1
	gopkg.in/yaml.v3 v3.0.1
)

require (
	git.sr.ht/~sbinet/gg v0.3.1 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/felixge/fgprof v0.9.3 // indirect
	github.com/go-fonts/liberation v0.2.0 // indirect
	github.com/go-latex/latex v0.0.0-20210823091927-c0d11ff05a81 // indirect
	github.com/go-pdf/fpdf v0.5.0 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	golang.org/x/image v0.0.0-20211028202545-6944b10bf410 // indirect
	golang.org/x/text v0.3.7 // indirect
	gonum.org/v1/netlib v0.0.0-20201012070519-2390d26c3658 // indirect
)
