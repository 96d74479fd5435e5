package blas

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
	"github.com/dml-project/dml/kernels/onednn"
)

// Name is the name the backend is registered under.
const Name = "blas"

// LibEnv names the environment variable that, when set, is the path of the
// library to load instead of the default names.
const LibEnv = "DML_BLAS_LIB"

// ThreadsEnv is OpenBLAS's own thread-count variable; when set it wins
// over kernels.Options.Threads.
const ThreadsEnv = "OPENBLAS_NUM_THREADS"

// libNames are tried in order when LibEnv is unset: Debian's and Fedora's
// sonames of OpenBLAS (pthread, serial or OpenMP build), then the
// development symlink.
var libNames = []string{"libopenblas.so.0", "libopenblasp.so.0", "libopenblaso.so.0", "libopenblas.so"}

// installFix is what the unavailable error tells a person to do.
const installFix = "apt-get install libopenblas0-pthread, or make deps (or set " + LibEnv + " to the library's path)"

func init() {
	kernels.Register(Name, func(o kernels.Options) (kernels.Backend, error) { return Open(o) })
}

// lib is the library the process loaded, once.
var lib struct {
	sync.Mutex
	tried   bool
	path    string // the library loaded, when err is nil
	err     error  // why none loaded
	userSet bool   // ThreadsEnv was set before the load
}

// Open loads OpenBLAS (once per process; a failure is remembered too),
// sets its thread count as the package comment says, and returns a
// backend named "blas" whose Gemm runs on cblas_sgemm. Without the
// library it returns an *kernels.UnavailableError (wrapping
// kernels.ErrUnavailable) that says how to install it.
func Open(o kernels.Options) (*cpu.Backend, error) {
	if o.Threads < 0 {
		return nil, fmt.Errorf("backend %s: %d BLAS threads: want 0 (one) or more", Name, o.Threads)
	}
	threads := max(o.Threads, 1)
	lib.Lock()
	defer lib.Unlock()
	if !lib.tried {
		lib.tried = true
		_, lib.userSet = os.LookupEnv(ThreadsEnv)
		setenv := threads
		if lib.userSet {
			setenv = 0
		}
		lib.path, lib.err = load(setenv)
	}
	if lib.err != nil {
		return nil, lib.err
	}
	if !lib.userSet {
		setThreads(threads)
	}
	var gemm cpu.Sgemmer = openblas{}
	var lib cpu.Lib
	if o.Kernels.Wants(kernels.LibOneDNN) {
		l, v, err := openOneDNN(threads)
		switch {
		case err == nil:
			lib = oneDNN{l, "onednn " + v}
			if o.Kernels.Forced(kernels.LibOneDNN) || oneDNNGemmAuto {
				gemm = gemmRoute{min: oneDNNGemmMin, version: v}
			}
		case o.Kernels.Forced(kernels.LibOneDNN):
			return nil, &kernels.UnavailableError{Backend: Name, Reason: fmt.Sprintf("--kernels %s: %s did not load: %v", o.Kernels, onednn.Soname, err),
				Fix: oneDNNFix(), Else: "or leave onednn out of --kernels", Lib: kernels.LibOneDNN}
		case o.Notice != nil:
			o.Notice(fmt.Sprintf("dml: blas: %s did not load (%v); dml's own convolutions, batch norm and pooling serve; for oneDNN's: %s", onednn.Soname, err, oneDNNFix()))
		}
	}
	be := cpu.NewWithGemm(Name, gemm)
	be.SetPrecision(o.Precision)
	switch {
	case lib != nil && o.Kernels.Auto():
		// Under auto oneDNN's batch norm serves, and its convolutions
		// are candidates, measured against ours per shape when a model
		// is set up (kernels.OnTrial).
		be.SetLibOnTrial(lib)
	case lib != nil:
		be.SetLib(lib)
	}
	return be, nil
}

// openOneDNN loads oneDNN (once per process) and makes a Lib of it.
func openOneDNN(threads int) (*onednn.Lib, string, error) {
	v, err := onednn.Load(threads)
	if err != nil {
		return nil, "", err
	}
	l, err := onednn.New()
	return l, v, err
}

// oneDNN is package onednn's Lib as the cpu backend's Lib: the same
// calls, with the layouts' and shapes' types converted.
type oneDNN struct {
	l    *onednn.Lib
	name string
}

var (
	_ cpu.NormReluLib = oneDNN{}
	_ cpu.PoolLib     = oneDNN{}
)

func (d oneDNN) Name() string { return d.name }
func (d oneDNN) Close()       { d.l.Close() }
func (d oneDNN) Reorder(dst, src []float32, from, to cpu.Layout) error {
	return d.l.Reorder(dst, src, onednn.Layout(from), onednn.Layout(to))
}
func (d oneDNN) ConvForward(y, x, w, bias []float32, xl cpu.Layout, n, c, h, wd, o, k, stride, pad int) (cpu.Layout, error) {
	yl, err := d.l.Forward(y, x, w, bias, onednn.Layout(xl), shape(n, c, h, wd, o, k, stride, pad))
	return cpu.Layout(yl), err
}
func (d oneDNN) ConvBackwardData(dx, dy, w []float32, dyl cpu.Layout, n, c, h, wd, o, k, stride, pad int) (cpu.Layout, error) {
	dxl, err := d.l.BackwardData(dx, dy, w, onednn.Layout(dyl), shape(n, c, h, wd, o, k, stride, pad))
	return cpu.Layout(dxl), err
}
func (d oneDNN) ConvBackwardFilter(dw, db, x, dy []float32, xl, dyl cpu.Layout, n, c, h, wd, o, k, stride, pad int) error {
	return d.l.BackwardFilter(dw, db, x, dy, onednn.Layout(xl), onednn.Layout(dyl), shape(n, c, h, wd, o, k, stride, pad))
}
func (d oneDNN) NormTrain(y, mean, variance, x, gamma, beta []float32, xl cpu.Layout, n, c, hw int, eps float32) (cpu.Layout, error) {
	yl, err := d.l.NormTrain(y, mean, variance, x, gamma, beta, onednn.Layout(xl), n, c, hw, eps)
	return cpu.Layout(yl), err
}
func (d oneDNN) NormInfer(y, x, mean, variance, gamma, beta []float32, xl cpu.Layout, n, c, hw int, eps float32) (cpu.Layout, error) {
	yl, err := d.l.NormInfer(y, x, mean, variance, gamma, beta, onednn.Layout(xl), n, c, hw, eps)
	return cpu.Layout(yl), err
}
func (d oneDNN) NormGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma []float32, dyl, xl cpu.Layout, n, c, hw int, eps float32) (cpu.Layout, error) {
	dxl, err := d.l.NormGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma, onednn.Layout(dyl), onednn.Layout(xl), n, c, hw, eps)
	return cpu.Layout(dxl), err
}

func (d oneDNN) NormReluWorkspace(xl cpu.Layout, n, c, hw int, eps float32) (int, error) {
	return d.l.NormReluWorkspace(onednn.Layout(xl), n, c, hw, eps)
}
func (d oneDNN) NormReluTrain(y, mean, variance, ws, x, gamma, beta []float32, xl cpu.Layout, n, c, hw int, eps float32) (cpu.Layout, error) {
	yl, err := d.l.NormReluTrain(y, mean, variance, ws, x, gamma, beta, onednn.Layout(xl), n, c, hw, eps)
	return cpu.Layout(yl), err
}
func (d oneDNN) NormReluGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma, ws []float32, dyl, xl cpu.Layout, n, c, hw int, eps float32) (cpu.Layout, error) {
	dxl, err := d.l.NormReluGrad(dx, dgamma, dbeta, dy, x, mean, variance, gamma, ws, onednn.Layout(dyl), onednn.Layout(xl), n, c, hw, eps)
	return cpu.Layout(dxl), err
}

func (d oneDNN) PoolWorkspace(s cpu.PoolShape) (int, error) { return d.l.PoolWorkspace(poolShape(s)) }
func (d oneDNN) PoolForward(y, ws, x []float32, s cpu.PoolShape) (cpu.Layout, error) {
	yl, err := d.l.PoolForward(y, ws, x, poolShape(s))
	return cpu.Layout(yl), err
}
func (d oneDNN) PoolBackward(dx, dy, ws []float32, dyl cpu.Layout, s cpu.PoolShape) (cpu.Layout, error) {
	dxl, err := d.l.PoolBackward(dx, dy, ws, onednn.Layout(dyl), poolShape(s))
	return cpu.Layout(dxl), err
}

func poolShape(s cpu.PoolShape) onednn.PoolShape {
	return onednn.PoolShape{X: onednn.Layout(s.X), N: s.N, C: s.C, H: s.H, W: s.W, K: s.K, Stride: s.Stride, Pad: s.Pad, Max: s.Max}
}

func shape(n, c, h, wd, o, k, stride, pad int) onednn.Shape {
	return onednn.Shape{N: n, C: c, H: h, W: wd, O: o, K: k, Stride: stride, Pad: pad}
}

// load opens the library LibEnv names, or the first of libNames that
// opens, and returns its path, or an *kernels.UnavailableError.
func load(threads int) (string, error) {
	unavailable := func(reason string) error {
		return &kernels.UnavailableError{Backend: Name, Reason: reason, Fix: installFix}
	}
	if !haveCgo {
		return "", &kernels.UnavailableError{Backend: Name,
			Reason: "this binary was built without cgo, so it cannot load OpenBLAS",
			Fix:    "rebuild it with CGO_ENABLED=1 and a C compiler"}
	}
	if p := os.Getenv(LibEnv); p != "" {
		if err := dlopen(p, threads); err != nil {
			return "", unavailable(fmt.Sprintf("OpenBLAS not loaded from %s=%s (%v)", LibEnv, p, err))
		}
		return p, nil
	}
	var errs []string
	for _, p := range libNames {
		err := dlopen(p, threads)
		if err == nil {
			return p, nil
		}
		errs = append(errs, err.Error())
	}
	// The first name's error is the one that matters on Debian; the rest
	// say the same of the other names.
	return "", unavailable(fmt.Sprintf("OpenBLAS not found (%s)", errs[0]))
}

// Info describes the library the process loaded.
type Info struct {
	// Path is what was passed to dlopen ("libopenblas.so.0", or LibEnv's
	// value).
	Path string
	// Config is openblas_get_config(), e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH
	// NO_AFFINITY Zen MAX_THREADS=64"; empty for a library without it.
	Config string
	// Threads is openblas_get_num_threads(), or -1 for a library without it.
	Threads int
	// FromEnv is true when ThreadsEnv set the thread count, not
	// kernels.Options.Threads.
	FromEnv bool
}

// String is one line for a log, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH
// NO_AFFINITY Zen MAX_THREADS=64 (libopenblas.so.0), 1 thread".
func (i Info) String() string {
	name := i.Config
	if name == "" {
		name = "BLAS"
	}
	s := fmt.Sprintf("%s (%s)", strings.TrimSpace(name), i.Path)
	switch {
	case i.Threads < 0:
	case i.Threads == 1:
		s += ", 1 thread"
	default:
		s += ", " + strconv.Itoa(i.Threads) + " threads"
	}
	if i.FromEnv {
		s += " (" + ThreadsEnv + ")"
	}
	return s
}

// Loaded returns what Open loaded, and false when no Open has succeeded.
func Loaded() (Info, bool) {
	lib.Lock()
	defer lib.Unlock()
	if !lib.tried || lib.err != nil {
		return Info{}, false
	}
	return Info{Path: lib.path, Config: libConfig(), Threads: getThreads(), FromEnv: lib.userSet}, true
}

// oneDNNFix says how to get oneDNN loaded: where the folder variable is
// set, that it names the folder searched (the package may well be
// installed), else the package.
func oneDNNFix() string {
	if d := os.Getenv(onednn.DirEnv); d != "" {
		return fmt.Sprintf("%s=%s names the folder it was looked for in: put %s there, or unset %s to load the system's (apt-get install libdnnl2)", onednn.DirEnv, d, onednn.Soname, onednn.DirEnv)
	}
	return "apt-get install libdnnl2 (make deps; " + onednn.DirEnv + " names its folder where it lies elsewhere)"
}
