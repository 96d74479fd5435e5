package blas_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/blas"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/kernelstest"
)

// openOrSkip opens the backend, skipping the test when OpenBLAS is not on
// this machine (the message says so: CI, which installs it, fails such a
// skip). Any other error fails the test.
func openOrSkip(t testing.TB) *cpu.Backend {
	t.Helper()
	be, err := blas.Open(kernels.Options{})
	if errors.Is(err, kernels.ErrUnavailable) {
		t.Skipf("OpenBLAS is not available here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return be
}

func TestConformance(t *testing.T) {
	openOrSkip(t)
	kernelstest.Run(t, func() kernels.Backend { return openOrSkip(t) })
}

func TestRegistered(t *testing.T) {
	openOrSkip(t)
	for _, name := range []string{blas.Name, kernels.AutoBackend} {
		var notices []string
		be, err := kernels.Open(name, kernels.Options{Notice: func(s string) { notices = append(notices, s) }})
		if err != nil {
			t.Fatalf("Open(%q): %v", name, err)
		}
		if be.Name() != "blas" {
			t.Errorf("Open(%q).Name() = %q, want blas", name, be.Name())
		}
		if len(notices) > 0 {
			t.Errorf("Open(%q) with OpenBLAS present noticed %q", name, notices)
		}
	}
	if !containsString(kernels.Names(), "blas") || containsString(kernels.Names(), kernels.AutoBackend) {
		t.Errorf("Names() = %v: want blas and not %s", kernels.Names(), kernels.AutoBackend)
	}
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestThreads checks the thread count OpenBLAS reports: 1 by default,
// Options.Threads when given, OPENBLAS_NUM_THREADS's when the environment
// sets it (then Options.Threads is ignored).
func TestThreads(t *testing.T) {
	openOrSkip(t)
	env, fromEnv := os.LookupEnv(blas.ThreadsEnv)
	for _, c := range []struct{ opt, want int }{{0, 1}, {2, 2}, {0, 1}} {
		if _, err := blas.Open(kernels.Options{Threads: c.opt}); err != nil {
			t.Fatal(err)
		}
		info, ok := blas.Loaded()
		if !ok {
			t.Fatal("Loaded() = false after a successful Open")
		}
		if info.Threads < 0 {
			t.Skipf("%s has no openblas_get_num_threads", info.Path)
		}
		want := c.want
		if fromEnv {
			want, _ = strconv.Atoi(env)
		}
		// OpenBLAS caps the count it reads from the environment (and
		// perhaps the one it is set to) at the number of CPUs.
		if (info.Threads != want && info.Threads != min(want, runtime.NumCPU())) || info.FromEnv != fromEnv {
			t.Errorf("Threads %d (%s=%q set %v): Loaded() = %+v, want %d threads", c.opt, blas.ThreadsEnv, env, fromEnv, info, want)
		}
	}
	if _, err := blas.Open(kernels.Options{Threads: -1}); err == nil {
		t.Error("Open with Threads -1 succeeded")
	}
	info, _ := blas.Loaded()
	t.Logf("loaded: %v", info)
}

// childEnv marks the test binary's re-run of itself with no OpenBLAS.
const childEnv = "DML_BLAS_TEST_CHILD"

// TestUnavailable re-runs this test binary with DML_BLAS_LIB pointing at a
// file that does not exist, so the child's first (and only) load fails:
// there Open("blas") returns ErrUnavailable saying how to install OpenBLAS,
// and Open("auto") falls back to cpu with one notice.
func TestUnavailable(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		unavailableChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnavailable$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1", blas.LibEnv+"=/nonexistent/libopenblas.so.0")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUnavailable") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func unavailableChild(t *testing.T) {
	_, err := kernels.Open("blas", kernels.Options{})
	if !errors.Is(err, kernels.ErrUnavailable) {
		t.Fatalf("Open(blas) without the library: %v, want ErrUnavailable", err)
	}
	var ue *kernels.UnavailableError
	if !errors.As(err, &ue) || ue.Backend != "blas" {
		t.Fatalf("Open(blas) error %#v is not a *kernels.UnavailableError for blas", err)
	}
	wants := []string{"backend blas", "OpenBLAS", "/nonexistent/libopenblas.so.0", "apt-get install libopenblas0-pthread", "make deps"}
	noticeWants := []string{"dml: ", "OpenBLAS not", "pure-Go cpu backend", "apt-get install libopenblas0-pthread", "make deps"}
	if !blas.HaveCgo {
		wants = []string{"backend blas", "OpenBLAS", "without cgo", "CGO_ENABLED=1"}
		noticeWants = []string{"dml: ", "without cgo", "pure-Go cpu backend", "CGO_ENABLED=1"}
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	t.Logf("Open(blas): %v", err)
	// A second Open fails the same way (the failure is remembered).
	if _, err2 := blas.Open(kernels.Options{}); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second Open: %v, want %v", err2, err)
	}
	if _, ok := blas.Loaded(); ok {
		t.Error("Loaded() = true without the library")
	}

	var notices []string
	be, err := kernels.Open(kernels.AutoBackend, kernels.Options{Notice: func(s string) { notices = append(notices, s) }})
	if err != nil {
		t.Fatalf("Open(auto) without OpenBLAS: %v", err)
	}
	if be.Name() != "cpu" {
		t.Errorf("Open(auto) without OpenBLAS opened %q, want cpu", be.Name())
	}
	if len(notices) != 1 {
		t.Fatalf("Open(auto) without OpenBLAS gave notices %q, want one", notices)
	}
	n := notices[0]
	for _, want := range noticeWants {
		if !strings.Contains(n, want) {
			t.Errorf("notice %q does not mention %q", n, want)
		}
	}
	if strings.Contains(n, "\n") {
		t.Errorf("notice %q is more than one line", n)
	}
	t.Logf("notice: %s", n)
	// Nil Notice is allowed.
	if _, err := kernels.Open(kernels.AutoBackend, kernels.Options{}); err != nil {
		t.Errorf("Open(auto) with a nil Notice: %v", err)
	}
}

// TestConcurrentGemm runs Gemm from several goroutines at once, each on its
// own backend (as in-process ranks do in the trainer's tests), and checks
// every result against the same product computed alone: OpenBLAS must be
// safe to call concurrently, and one thread per call gives the same bits.
func TestConcurrentGemm(t *testing.T) {
	openOrSkip(t)
	const m, n, k, workers, rounds = 64, 96, 80, 4, 20
	a, b := make([]float32, m*k), make([]float32, k*n)
	for i := range a {
		a[i] = float32(i%13) - 6.5
	}
	for i := range b {
		b[i] = float32(i%7)*0.25 - 0.7
	}
	gemm := func(be *cpu.Backend) ([]float32, error) {
		ab, _ := be.Alloc(m * k)
		bb, _ := be.Alloc(k * n)
		cb, _ := be.Alloc(m * n)
		if err := errors.Join(be.Upload(ab, a), be.Upload(bb, b), be.Gemm(false, true, m, n, k, 1, ab, bb, 0, cb)); err != nil {
			return nil, err
		}
		c := make([]float32, m*n)
		return c, be.Download(c, cb)
	}
	want, err := gemm(openOrSkip(t))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, workers)
	for range workers {
		go func() {
			be, err := blas.Open(kernels.Options{})
			if err != nil {
				errs <- err
				return
			}
			for range rounds {
				got, err := gemm(be)
				if err != nil {
					errs <- err
					return
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						errs <- fmt.Errorf("element %d: %v concurrently, %v alone", i, got[i], want[i])
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
