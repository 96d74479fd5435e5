//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/kernelstest"
)

// The cuBLAS and cuDNN symbols the loaders resolve (libs.go), for the
// fake libraries below.
var (
	cublasSyms = []string{"cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2", "cublasSetMathMode",
		"cublasSetWorkspace_v2", "cublasGetProperty", "cublasSgemm_v2"}
	cudnnSyms = []string{"cudnnGetErrorString", "cudnnCreate", "cudnnDestroy", "cudnnSetStream",
		"cudnnCreateTensorDescriptor", "cudnnSetTensor4dDescriptor", "cudnnDestroyTensorDescriptor",
		"cudnnCreateFilterDescriptor", "cudnnSetFilter4dDescriptor", "cudnnDestroyFilterDescriptor",
		"cudnnCreateConvolutionDescriptor", "cudnnSetConvolution2dDescriptor", "cudnnSetConvolutionMathType",
		"cudnnDestroyConvolutionDescriptor", "cudnnGetConvolutionForwardAlgorithm_v7",
		"cudnnGetConvolutionBackwardDataAlgorithm_v7", "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
		"cudnnFindConvolutionForwardAlgorithmEx", "cudnnFindConvolutionBackwardDataAlgorithmEx",
		"cudnnFindConvolutionBackwardFilterAlgorithmEx", "cudnnConvolutionForward", "cudnnConvolutionBackwardData",
		"cudnnConvolutionBackwardFilter", "cudnnAddTensor",
		"cudnnBatchNormalizationForwardTraining", "cudnnBatchNormalizationForwardInference", "cudnnBatchNormalizationBackward"}
)

// fakeLib compiles a shared library named soname into dir exporting syms
// (each returning 0) and extra C source, with gcc.
func fakeLib(t *testing.T, dir, soname string, syms []string, extra string) {
	t.Helper()
	var src strings.Builder
	for _, s := range syms {
		fmt.Fprintf(&src, "int %s(void) { return 0; }\n", s)
	}
	src.WriteString(extra)
	c := filepath.Join(dir, soname+".c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", filepath.Join(dir, soname), c).CombinedOutput()
	if err != nil {
		t.Skipf("no C compiler to build a fake library: %v: %s", err, out)
	}
}

// noRealLibs skips where a driver loads: the loaders' entry points are
// process-wide, and a fake library must not replace a real one in use.
func noRealLibs(t *testing.T) {
	if loadDriver() == nil {
		t.Skip("a CUDA driver is here: the fake-library checks run where none is (CI)")
	}
}

// TestLibsAbsentOrWrong: a library that is not there, one that lacks an
// entry point, and a cuDNN older than 8 are each refused with a message
// naming what is wrong, and a forced one becomes an UnavailableError.
func TestLibsAbsentOrWrong(t *testing.T) {
	noRealLibs(t)
	dir := t.TempDir()
	t.Setenv("DML_CUDA_LIBS", dir)

	l := loadCUDNN([]string{"libdml-nonexistent.so.9"})
	if l.err == nil || !strings.Contains(l.err.Error(), "none of libdml-nonexistent.so.9 found") || !strings.Contains(l.err.Error(), dir) {
		t.Errorf("absent: %v, want a message naming the soname and the folders searched", l.err)
	}

	fakeLib(t, dir, "libcudnn-missing.so.9", cudnnSyms[1:], "unsigned long cudnnGetVersion(void) { return 91400; }\n")
	l = loadCUDNN([]string{"libcudnn-missing.so.9"})
	if l.err == nil || !strings.Contains(l.err.Error(), "has no cudnnGetErrorString") && !strings.Contains(l.err.Error(), "it has no cudnnGetErrorString") {
		t.Errorf("missing symbol: %v, want it named", l.err)
	}

	fakeLib(t, dir, "libcudnn-old.so.7", cudnnSyms, "unsigned long cudnnGetVersion(void) { return 7605; }\n")
	l = loadCUDNN([]string{"libcudnn-old.so.7"})
	if l.err == nil || !strings.Contains(l.err.Error(), "cuDNN 7.6.5 is older than 8.0") {
		t.Errorf("old version: %v, want 'cuDNN 7.6.5 is older than 8.0'", l.err)
	}

	fakeLib(t, dir, "libcudnn-good.so.9", cudnnSyms, "unsigned long cudnnGetVersion(void) { return 91400; }\n")
	l = loadCUDNN([]string{"libcudnn-good.so.9"})
	if l.err != nil || l.version != "9.14.0" || l.provider() != "cudnn 9.14" || !strings.HasPrefix(l.path, dir) {
		t.Errorf("good fake: err %v, version %q, provider %q, path %q", l.err, l.version, l.provider(), l.path)
	}

	fakeLib(t, dir, "libcublas-good.so.13", cublasSyms[:len(cublasSyms)-1], "")
	l = loadCUBLAS([]string{"libcublas-good.so.13"})
	if l.err == nil || !strings.Contains(l.err.Error(), "cublasSgemm_v2") {
		t.Errorf("cuBLAS without cublasSgemm_v2: %v, want it named", l.err)
	}

	// What becomes of a library that did not load: a note under auto,
	// nothing when not wanted, an UnavailableError when forced.
	why := errors.New("libcudnn.so.9: cannot open shared object file")
	auto, _ := kernels.ParseKernels("auto")
	if note, err := libVerdict(auto, "cudnn", why); err != nil || !strings.Contains(note, "cudnn not used (libcudnn.so.9") {
		t.Errorf("auto: note %q, err %v", note, err)
	}
	forced, _ := kernels.ParseKernels("cudnn,cublas")
	_, err := libVerdict(forced, "cudnn", why)
	var ue *kernels.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Error(), "--kernels cudnn,cublas: cudnn did not load: libcudnn.so.9") {
		t.Errorf("forced: %v, want an UnavailableError naming the flag and the library", err)
	}
	if note, err := libVerdict(forced, "cudnn", nil); note != "" || err != nil {
		t.Errorf("loaded: %q, %v", note, err)
	}
}

func TestCUDNNVersion(t *testing.T) {
	for _, c := range []struct{ v, major, minor, patch int }{{91400, 9, 14, 0}, {90100, 9, 1, 0}, {8907, 8, 9, 7}, {8100, 8, 1, 0}} {
		if a, b, p := cudnnVersion(c.v); a != c.major || b != c.minor || p != c.patch {
			t.Errorf("cudnnVersion(%d) = %d.%d.%d, want %d.%d.%d", c.v, a, b, p, c.major, c.minor, c.patch)
		}
	}
}

// TestConformanceOwn runs the suite on our own kernels alone (--kernels
// dml): TestConformance runs it with the libraries where they load.
func TestConformanceOwn(t *testing.T) {
	own := kernels.Options{Kernels: kernels.KernelChoice{Own: true}}
	open(t, own).Close()
	kernelstest.Run(t, func() kernels.Backend { return open(t, own) })
}

// TestLibraries says which libraries serve on this machine; with
// DML_EXPECT_LIBS=1 (the GPU run, where cuBLAS and cuDNN are installed)
// both must, and --kernels dml must use neither.
func TestLibraries(t *testing.T) {
	be := open(t, kernels.Options{})
	defer be.Close()
	t.Logf("auto: %s", kernels.Describe(be))
	cb, cd := loadLibs()
	for _, l := range []*lib{cb, cd} {
		t.Logf("%s: path %q version %q err %v", l.name, l.path, l.version, l.err)
	}
	if os.Getenv("DML_EXPECT_LIBS") == "1" && (be.libs.cublas == nil || be.libs.cudnn == nil) {
		t.Errorf("DML_EXPECT_LIBS=1 but %s", kernels.Describe(be))
	}
	own := open(t, kernels.Options{Kernels: kernels.KernelChoice{Own: true}})
	defer own.Close()
	if d := kernels.Describe(own); d != "cuda (rest: dml)" {
		t.Errorf("--kernels dml: %s, want cuda (rest: dml)", d)
	}
	if _, ok := kernels.WholeConvOf(own); ok {
		t.Error("--kernels dml offers whole convolutions")
	}
}

// TestPickAlgo: the algorithm choice among cuDNN's answers.
func TestPickAlgo(t *testing.T) {
	perf := []algoPerf{
		{algo: 6, ms: 1.0, deterministic: false},
		{algo: 5, ms: 1.05, deterministic: true},
		{algo: 1, ms: 1.1, deterministic: true},
		{algo: 0, ms: 1.5, deterministic: true},
		{algo: 2, ms: 0.5, status: 3, deterministic: true},       // failed
		{algo: 3, ms: 0.2, memory: 1 << 40, deterministic: true}, // too much workspace
	}
	for _, c := range []struct {
		timed, any bool
		want       int
	}{
		{false, false, 1}, // heuristics: the first deterministic one
		{true, false, 2},  // timed: within 10% of 1.05, the lowest-numbered (1)
		{true, true, 2},   // any: within 10% of 1.0: 6, 5, 1 → algorithm 1
		{false, true, 0},
	} {
		if got := pickAlgo(perf, c.timed, c.any); got != c.want {
			t.Errorf("timed %v any %v: index %d (algorithm %d), want index %d", c.timed, c.any, got, perf[max(got, 0)].algo, c.want)
		}
	}
	if got := pickAlgo([]algoPerf{{algo: 4, ms: 1}}, true, false); got != 0 {
		t.Errorf("only a non-deterministic one: %d, want it (0)", got)
	}
	if got := pickAlgo([]algoPerf{{algo: 4, status: 1}}, true, false); got != -1 {
		t.Errorf("none usable: %d, want -1", got)
	}
}

// TestSumsOfProducts: fp32 keeps the sums of products in FMA math; bf16
// and fp16 keep them in tensor-core math too; neither keeps a transform
// (FFT, Winograd) in any direction.
func TestSumsOfProducts(t *testing.T) {
	for dir := range 3 {
		perf := []algoPerf{
			{algo: 0, math: cudnnFMAMath},
			{algo: 1, math: 1}, // CUDNN_TENSOR_OP_MATH
			{algo: approximate[dir][0], math: cudnnFMAMath},
			{algo: approximate[dir][1], math: cudnnDefaultMath},
		}
		algos := func(ps []algoPerf) (out []int) {
			for _, p := range ps {
				out = append(out, p.algo)
			}
			return out
		}
		if got := algos(sumsOfProducts(perf, dir, true)); !slices.Equal(got, []int{0}) {
			t.Errorf("direction %d, fp32: %v, want [0]", dir, got)
		}
		if got := algos(sumsOfProducts(perf, dir, false)); !slices.Equal(got, []int{0, 1}) {
			t.Errorf("direction %d, rounded operands: %v, want [0 1]", dir, got)
		}
	}
}

// TestFasterGemm: the timed choice of the filter gradient's route.
func TestFasterGemm(t *testing.T) {
	for _, c := range []struct {
		cudnn, gemm float64
		want        bool
	}{
		{0.39, 0.11, true},  // cuDNN's deterministic FMA algorithm, slower
		{0.09, 0.11, false}, // its TF32 one, faster
		{0.1, 0.1, false},   // a tie keeps cuDNN's
		{0, 0.2, true},      // cuDNN's time unknown
		{0.3, 0, false},     // ours could not be timed
	} {
		if got := fasterGemm(c.cudnn, c.gemm); got != c.want {
			t.Errorf("cudnn %.2f ms, gemm %.2f ms: gemm %v, want %v", c.cudnn, c.gemm, got, c.want)
		}
	}
}

// TestEnvSetting: the DML_CUDNN_* settings' parsing and its one-line
// refusal.
func TestEnvSetting(t *testing.T) {
	const name = "DML_TEST_SETTING"
	for v, want := range map[string]int{"": 0, "auto": 0, "gemm": 1, "cudnn": 2} {
		t.Setenv(name, v)
		if got, err := envSetting(name, "auto", "gemm", "cudnn"); got != want || err != nil {
			t.Errorf("%q: %d, %v; want %d", v, got, err, want)
		}
	}
	t.Setenv(name, "fast")
	_, err := envSetting(name, "auto", "gemm", "cudnn")
	if err == nil || !strings.Contains(err.Error(), `DML_TEST_SETTING="fast" is not auto, gemm or cudnn`) {
		t.Errorf("a bad value: %v", err)
	}
}
