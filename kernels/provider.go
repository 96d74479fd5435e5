package kernels

import (
	"fmt"
	"slices"
	"strings"
)

// Providers: an op of a backend may be served by a vendor library found at
// run time (cuBLAS, cuDNN on the cuda backend) instead of the project's
// own kernel, which stays as the fallback and the reference. The choice
// is the --kernels flag, read by ParseKernels into Options.Kernels; the
// backend reports what serves each op through ProviderReporter, and
// Describe puts that on the line printed before training.

// Library names --kernels takes. Each belongs to one backend; a backend
// opened with a library it does not use refuses it (UnavailableError).
const (
	KernelsAuto = "auto" // every library the backend can load, else dml's own
	KernelsDML  = "dml"  // dml's own kernels only
	LibCUBLAS   = "cublas"
	LibCUDNN    = "cudnn"
	LibOneDNN   = "onednn"
)

// knownLibs lists every library a backend of this project can use, for the
// flag's message.
var knownLibs = []string{LibCUBLAS, LibCUDNN, LibOneDNN}

// libBackend is the backend each library serves.
var libBackend = map[string]string{LibCUBLAS: "cuda", LibCUDNN: "cuda", LibOneDNN: "blas"}

// useLib says how to get a backend that library lib serves: the flag, and
// where that backend is not in this binary, the build that has it.
func useLib(lib string) string {
	b := libBackend[lib]
	fix := fmt.Sprintf("--backend %s (%s serves it)", b, lib)
	if !slices.Contains(Names(), b) && b == "cuda" {
		fix += ", in the binary `make build-cuda` builds (bin/dml-cuda)"
	}
	return fix
}

// KernelChoice is what --kernels asked for. The zero value is auto.
type KernelChoice struct {
	// Own is true for "dml": no library at all.
	Own bool
	// Libs, when not empty, are the libraries forced: each must load (or
	// the backend does not open) and nothing else is tried.
	Libs []string
}

// Auto reports whether the choice is auto (every library that loads).
func (k KernelChoice) Auto() bool { return !k.Own && len(k.Libs) == 0 }

// Wants reports whether lib may serve ops: auto, or lib forced.
func (k KernelChoice) Wants(lib string) bool {
	return k.Auto() || slices.Contains(k.Libs, lib)
}

// Forced reports whether lib was named: its absence is then an error.
func (k KernelChoice) Forced(lib string) bool { return slices.Contains(k.Libs, lib) }

// String is the flag's form: "auto", "dml" or the libraries, comma-separated.
func (k KernelChoice) String() string {
	switch {
	case k.Own:
		return KernelsDML
	case len(k.Libs) == 0:
		return KernelsAuto
	}
	return strings.Join(k.Libs, ",")
}

// ParseKernels reads --kernels: "auto", "dml", or one or more library
// names separated by commas ("cudnn,cublas").
func ParseKernels(s string) (KernelChoice, error) {
	s = strings.TrimSpace(s)
	switch s {
	case KernelsAuto, "":
		return KernelChoice{}, nil
	case KernelsDML:
		return KernelChoice{Own: true}, nil
	}
	var k KernelChoice
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(strings.ToLower(p))
		switch {
		case p == KernelsAuto || p == KernelsDML:
			return KernelChoice{}, fmt.Errorf("%q: %s stands alone, not in a list of libraries", s, p)
		case !slices.Contains(knownLibs, p):
			return KernelChoice{}, fmt.Errorf("%q: unknown library %q (want auto, dml, or some of %s, comma-separated)", s, p, strings.Join(knownLibs, ", "))
		case slices.Contains(k.Libs, p):
			return KernelChoice{}, fmt.Errorf("%q: %s named twice", s, p)
		}
		k.Libs = append(k.Libs, p)
	}
	for _, p := range k.Libs[1:] {
		if a, b := libBackend[k.Libs[0]], libBackend[p]; a != b {
			return KernelChoice{}, fmt.Errorf("%q: %s serves the %s backend and %s the %s backend, and a run uses one backend: name the libraries of one", s, k.Libs[0], a, p, b)
		}
	}
	return k, nil
}

// Provided says which provider serves a group of ops: Ops ("gemm",
// "conv", "batchnorm"), Provider ("cublas 13.1", "cudnn 9.14", "dml").
type Provided struct {
	Ops, Provider string
}

// ProviderReporter is implemented by a backend whose ops may come from
// libraries: Providers lists who serves what, libraries first.
type ProviderReporter interface {
	Providers() []Provided
}

// Describe names the backend for the line before training: its name, and,
// for a backend that reports its providers, which serves each op group,
// e.g. "cuda (gemm: cublas 13.1, conv: cudnn 9.14, batchnorm: cudnn 9.14,
// rest: dml)", and its products' precision where it is not FP32.
func Describe(b Backend) string {
	s := b.Name()
	if r, ok := Innermost(b).(ProviderReporter); ok {
		var parts []string
		for _, p := range r.Providers() {
			parts = append(parts, p.Ops+": "+p.Provider)
		}
		if len(parts) > 0 {
			s += " (" + strings.Join(parts, ", ") + ")"
		}
	}
	if r, ok := Innermost(b).(PrecisionReporter); ok {
		if note := r.PrecisionNote(); note != "" {
			s += ", " + note
		}
	}
	return s
}

// PrecisionReporter is a backend that says how its products compute at
// a precision other than FP32 (for Describe), e.g. "bf16 products
// (operands rounded, float32 sums; emulated on the CPU, no faster)"; ""
// at FP32.
type PrecisionReporter interface {
	PrecisionNote() string
}

// WholeConvOps is an optional op set (WholeConvOf): a convolution layer's
// three products in PyTorch's layouts — x n×c×h×w, weights o×c×k×k, y
// n×o×oh×ow (kernels.ConvOut) — for any stride and zero padding, run by a
// library (cuDNN) without the columns Im2col makes. WholeConv reports
// whether the ops run: a backend has the methods always and the library
// only where it loaded.
type WholeConvOps interface {
	WholeConv() bool
	// ConvForward sets y = x ⋆ w (+ bias[oc] when bias is not nil), the
	// cross-correlation PyTorch's Conv2d computes.
	ConvForward(y, x, w, bias Buffer, n, c, h, wd, o, k, stride, pad int) error
	// ConvBackwardData sets dx (n×c×h×w) to the gradient of that
	// convolution's input given dy.
	ConvBackwardData(dx, dy, w Buffer, n, c, h, wd, o, k, stride, pad int) error
	// ConvBackwardFilter sets dw (o×c×k×k) and db (o, when not nil) to
	// the gradients of the weights and the bias over the batch.
	ConvBackwardFilter(dw, db, x, dy Buffer, n, c, h, wd, o, k, stride, pad int) error
}

// LibTrial is implemented by a backend whose library's whole convolutions
// came with --kernels auto as candidates rather than an order: a model
// measures each convolution shape on them and on its own kernels when it
// is set up, and takes the faster (model.ChooseConvs; the trainer makes
// every rank take rank 0's choice).
type LibTrial interface {
	LibOnTrial() bool
}

// OnTrial reports whether b's whole convolutions are candidates (LibTrial).
func OnTrial(b Backend) bool {
	t, ok := Innermost(b).(LibTrial)
	return ok && t.LibOnTrial()
}

// WholeConvOf returns b's WholeConvOps when it has them and they run.
func WholeConvOf(b Backend) (WholeConvOps, bool) {
	w, ok := optional[WholeConvOps](b)
	if !ok {
		return nil, false
	}
	if inner, ok := Innermost(b).(WholeConvOps); !ok || !inner.WholeConv() {
		return nil, false
	}
	return w, true
}

// CheckWholeConv validates the lengths of a whole convolution's buffers:
// y (or dy) of n·o·oh·ow, x (or dx) of n·c·h·w, the weights of o·c·k·k,
// the bias of o (bLen < 0: none).
func CheckWholeConv(op string, yLen, xLen, wLen, bLen, n, c, h, w, o, k, stride, pad int) error {
	oh, ow := ConvOut(h, w, k, stride, pad)
	ys, ok1 := mulAll(n, o, oh, ow)
	xs, ok2 := mulAll(n, c, h, w)
	ws, ok3 := mulAll(o, c, k, k)
	if n < 0 || c <= 0 || h <= 0 || w <= 0 || o <= 0 || k <= 0 || stride <= 0 || pad < 0 || oh <= 0 || !ok1 || !ok2 || !ok3 ||
		yLen != ys || xLen != xs || wLen != ws || bLen >= 0 && bLen != o {
		return fmt.Errorf("%s: y %d, x %d, weights %d, bias %d elements for n %d, %d→%d channels of %d×%d, kernel %d, stride %d, padding %d: %w",
			op, yLen, xLen, wLen, bLen, n, c, o, h, w, k, stride, pad, ErrShape)
	}
	return nil
}

// GraphOps is an optional op set (GraphOf): a device backend that can
// record the ops a function queues, once, and replay them as one launch
// (a CUDA graph). A replay runs the same kernels on the same buffers with
// the same arguments: the same bits as queueing them again.
type GraphOps interface {
	// Capture runs f with the backend recording, instead of running,
	// every op f queues, and returns the recording. f must not wait for
	// the device (Download, Sync, Dot, NonFinite): such a call fails the
	// capture. Nothing f queued has run when Capture returns.
	Capture(f func() error) (Graph, error)
}

// Graph is a recording from GraphOps.Capture.
type Graph interface {
	// Launch queues the recorded ops, in their order, after everything
	// queued before.
	Launch() error
	// Free releases the recording.
	Free() error
}

// GraphOf returns b's GraphOps when the backend itself has them (a
// decorator such as trace.Backend, which must see every op, hides them).
func GraphOf(b Backend) (GraphOps, bool) {
	g, ok := b.(GraphOps)
	if !ok {
		return nil, false
	}
	if s, ok := b.(interface{ Graphs() bool }); ok && !s.Graphs() {
		return nil, false
	}
	return g, true
}
