package blas_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/blas"
	"github.com/dml-project/dml/kernels/kernelstest"
	"github.com/dml-project/dml/kernels/onednn"
)

// openOneDNN opens the blas backend with --kernels onednn, skipping where
// oneDNN is absent (outside CI, which installs it: make deps).
func openOneDNN(t *testing.T) kernels.Backend {
	t.Helper()
	be, err := blas.Open(kernels.Options{Kernels: kernels.KernelChoice{Libs: []string{kernels.LibOneDNN}}})
	if err != nil {
		if _, lerr := onednn.Load(1); lerr != nil && os.Getenv("CI") == "" {
			t.Skipf("no oneDNN here: %v", lerr)
		}
		t.Fatal(err)
	}
	return be
}

// TestOneDNNConformance runs the whole suite on the blas backend with
// oneDNN serving the whole convolutions (its WholeConv checks against
// float64 loops), and the model's whole-convolution path with it.
func TestOneDNNConformance(t *testing.T) {
	openOneDNN(t).Close()
	kernelstest.Run(t, func() kernels.Backend { return openOneDNN(t) })
}

// TestOneDNNPrecision runs the suite with oneDNN serving at BF16: its
// convolutions and its GEMM get rounded operands like ours.
func TestOneDNNPrecision(t *testing.T) {
	openOneDNN(t).Close()
	kernelstest.RunOpts(t, func() kernels.Backend {
		be, err := blas.Open(kernels.Options{Precision: kernels.BF16, Kernels: kernels.KernelChoice{Libs: []string{kernels.LibOneDNN}}})
		if err != nil {
			t.Fatal(err)
		}
		return be
	}, kernelstest.PrecisionOptions(kernels.BF16))
}

// TestOneDNNNamed: the start line names it; a forced oneDNN that cannot
// load is an UnavailableError saying how to install it.
func TestOneDNNNamed(t *testing.T) {
	be := openOneDNN(t)
	defer be.Close()
	if d := kernels.Describe(be); !strings.HasPrefix(d, "blas (gemm: onednn 2.") || !strings.Contains(d, "conv: onednn 2.") {
		t.Errorf("Describe: %q", d)
	}
	if _, ok := kernels.WholeConvOf(be); !ok {
		t.Error("no whole convolutions with --kernels onednn")
	}
	auto, err := blas.Open(kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer auto.Close()
	if _, ok := kernels.WholeConvOf(auto); !ok || !kernels.OnTrial(auto) {
		t.Errorf("--kernels auto: oneDNN's convolutions serve: %v, on trial: %v; want both (%s)", ok, kernels.OnTrial(auto), kernels.Describe(auto))
	}
	if kernels.OnTrial(be) {
		t.Error("--kernels onednn: its convolutions on trial, want them ordered")
	}
	own, err := blas.Open(kernels.Options{Kernels: kernels.KernelChoice{Own: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if _, ok := kernels.WholeConvOf(own); ok || kernels.Describe(own) != "blas" {
		t.Errorf("--kernels dml uses a library: %s", kernels.Describe(own))
	}
	var ue *kernels.UnavailableError
	if _, err := kernels.Open("cpu", kernels.Options{Kernels: kernels.KernelChoice{Libs: []string{kernels.LibOneDNN}}}); !errors.As(err, &ue) {
		t.Errorf("--backend cpu --kernels onednn: %v, want an UnavailableError", err)
	}
}

// TestOneDNNGemmConformance runs the suite with oneDNN's sgemm serving
// every Gemm (its threshold lowered to one multiply-add), so that the
// shapes the suite checks (beta 0 over NaN, transposes, sizes) all reach
// it.
func TestOneDNNGemmConformance(t *testing.T) {
	defer blas.SetOneDNNGemmMin(blas.SetOneDNNGemmMin(1))
	be := openOneDNN(t)
	if d := kernels.Describe(be); !strings.Contains(d, "gemm: onednn 2.") {
		t.Errorf("--kernels onednn: Describe %q names no oneDNN gemm", d)
	}
	be.Close()
	kernelstest.Run(t, func() kernels.Backend { return openOneDNN(t) })
}

// TestOneDNNFixSaysFolder: where the folder variable is set, the advice
// for a oneDNN that did not load says the variable names the folder
// searched and to unset it (the package may well be installed); else it
// names the package. (The refusal and the notice use it: TestBenchOps
// runs them with the variable set, in a process of their own, since a
// library once loaded stays loaded.)
func TestOneDNNFixSaysFolder(t *testing.T) {
	t.Setenv(onednn.DirEnv, "/x/y")
	if f := blas.OneDNNFix(); !strings.Contains(f, onednn.DirEnv+"=/x/y names the folder it was looked for in") || !strings.Contains(f, "unset "+onednn.DirEnv) {
		t.Errorf("%s set: %q", onednn.DirEnv, f)
	}
	t.Setenv(onednn.DirEnv, "")
	if f := blas.OneDNNFix(); !strings.HasPrefix(f, "apt-get install libdnnl2") {
		t.Errorf("%s unset: %q", onednn.DirEnv, f)
	}
}
