package kernels

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// ErrUnknownBackend reports a backend name this binary was not built with.
var ErrUnknownBackend = errors.New("kernels: unknown backend")

// ErrUnavailable reports a backend this binary has but this machine cannot
// run: a shared library it loads at run time (OpenBLAS for "blas") is
// missing. Backends return it wrapped in an *UnavailableError.
var ErrUnavailable = errors.New("kernels: backend unavailable")

// AutoBackend is the name Open takes to mean "the fastest CPU backend this
// machine can run": "blas" when OpenBLAS loads, else "cpu" (see Open).
const AutoBackend = "auto"

// autoOrder is what AutoBackend tries, best first; the last is the
// fallback, which must not be unavailable.
var autoOrder = []string{"blas", "cpu"}

// UnavailableError says why a backend cannot run here and how to fix it.
// It wraps ErrUnavailable.
type UnavailableError struct {
	// Backend is the backend's name ("blas").
	Backend string
	// Reason says what is missing, with the loader's own message, e.g.
	// "OpenBLAS not found (libopenblas.so.0: cannot open shared object
	// file: No such file or directory)".
	Reason string
	// Fix says how to make it available, e.g. "apt-get install
	// libopenblas0-pthread, or make deps".
	Fix string
	// Lib is set when the backend itself could run but a library
	// --kernels names did not load (--backend auto then stops with this
	// error instead of trying the next backend, which could not serve the
	// library either).
	Lib string
	// Else, when set, is what a run can do without it ("or leave onednn
	// out of --kernels"): a command that needs the library (dml bench ops)
	// leaves it out of its message.
	Else string
}

// Advice is Fix, then Else where there is one.
func (e *UnavailableError) Advice() string {
	if e.Else == "" {
		return e.Fix
	}
	return e.Fix + ", " + e.Else
}

// Error reads "backend blas: <Reason>; to use it: <Fix>[, <Else>]".
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("backend %s: %s; to use it: %s", e.Backend, e.Reason, e.Advice())
}

// Unwrap returns ErrUnavailable.
func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

// Options are what a backend is opened with.
type Options struct {
	// LocalRank is this process's index among the ranks on its node
	// (mpi.LocalRank); a device backend picks device LocalRank mod count.
	LocalRank int
	// Precision is the arithmetic of the matrix products (Gemm and the
	// convolutions).
	Precision Precision
	// Threads is the number of threads a CPU backend's BLAS may use for
	// one Gemm; 0 means 1, so that ranks sharing a machine do not fight
	// over its cores. OPENBLAS_NUM_THREADS in the environment, when set,
	// wins over it. The pure-Go backend ignores it.
	Threads int
	// Kernels is --kernels: which libraries may serve ops (the zero
	// value: every one the backend can load). A backend that cannot use
	// a library named there does not open (UnavailableError).
	Kernels KernelChoice
	// Notice, when not nil, is told one line (starting "dml: ", no
	// newline) when Open(AutoBackend) falls back to a slower backend, and
	// why. Nil discards it.
	Notice func(string)
}

// Factory opens a backend.
type Factory func(Options) (Backend, error)

var registry = struct {
	sync.Mutex
	m map[string]Factory
}{m: map[string]Factory{}}

// Register makes a backend available under name; backend packages call it
// from init. Registering a name twice is a programmer error (panic).
func Register(name string, f Factory) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[name]; dup {
		panic("kernels: backend " + name + " registered twice")
	}
	registry.m[name] = f
}

// Names lists the registered backends, sorted.
func Names() []string {
	registry.Lock()
	defer registry.Unlock()
	var ns []string
	for n := range registry.m {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

// Open opens the backend registered as name. An unknown name is an error
// wrapping ErrUnknownBackend that lists the backends this binary has; a
// backend this machine cannot run returns an error wrapping ErrUnavailable
// that says how to install what it lacks.
//
// Open(AutoBackend, o) opens "blas" when it can, else "cpu", and then tells
// o.Notice why (one line). Only ErrUnavailable and ErrUnknownBackend from
// "blas" lead to the fallback; any other error is returned. With libraries
// forced (o.Kernels.Libs, all of one backend: ParseKernels) it opens the
// backend they serve, or refuses where that is not one auto opens (cuda).
func Open(name string, o Options) (Backend, error) {
	if name == AutoBackend {
		return openAuto(o)
	}
	return open(name, o)
}

// openAuto opens the first backend of autoOrder that is available (with
// libraries forced: theirs, so that its own failure is the one reported).
func openAuto(o Options) (Backend, error) {
	if libs := o.Kernels.Libs; len(libs) > 0 {
		b := libBackend[libs[0]]
		if !slices.Contains(autoOrder, b) {
			return nil, &UnavailableError{Backend: AutoBackend,
				Reason: fmt.Sprintf("--kernels %s: %s serves the %s backend, which auto never opens (it opens %s)", o.Kernels, libs[0], b, strings.Join(autoOrder, ", else ")),
				Fix:    useLib(libs[0])}
		}
		be, err := open(b, o)
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", AutoBackend, err)
		}
		return be, nil
	}
	var why []string
	for i, name := range autoOrder {
		be, err := open(name, o)
		if err == nil {
			if len(why) > 0 && o.Notice != nil {
				o.Notice(fmt.Sprintf("dml: %s; using the pure-Go %s backend (slower)", strings.Join(why, "; "), name))
			}
			return be, nil
		}
		last := i == len(autoOrder)-1
		var ue *UnavailableError
		switch {
		case last:
			return nil, fmt.Errorf("backend %s: %w", AutoBackend, err)
		case errors.As(err, &ue) && ue.Lib != "":
			return nil, fmt.Errorf("backend %s: %w", AutoBackend, err)
		case errors.As(err, &ue):
			why = append(why, ue.Reason+"; for the faster "+ue.Backend+" backend: "+ue.Fix)
		case errors.Is(err, ErrUnknownBackend):
			why = append(why, "this binary has no "+name+" backend")
		case errors.Is(err, ErrUnavailable):
			why = append(why, err.Error())
		default:
			return nil, err
		}
	}
	panic("unreachable")
}

// open opens the backend registered as name.
func open(name string, o Options) (Backend, error) {
	registry.Lock()
	f, ok := registry.m[name]
	registry.Unlock()
	if !ok {
		return nil, fmt.Errorf("backend %q is not in this binary (it has: %s): %w",
			name, strings.Join(Names(), ", "), ErrUnknownBackend)
	}
	// A library of another backend is refused before this one opens (the
	// cuda backend would otherwise say first that it has no device).
	for _, lib := range o.Kernels.Libs {
		if libBackend[lib] != name {
			return nil, notServed(name, o.Kernels, lib)
		}
	}
	be, err := f(o)
	if err != nil {
		// A constructor that returned a typed nil with its error must not
		// hand callers a non-nil interface (conventions, 22).
		return nil, err
	}
	if err := servesForced(name, be, o.Kernels); err != nil {
		_ = be.Close()
		return nil, err
	}
	return be, nil
}

// servesForced checks that every library --kernels forced serves some op
// of be. A library of another backend (onednn on cpu) is refused before
// be opens (open), and a backend that loads libraries fails itself when a
// forced one is missing: this catches one that opened without serving it
// all the same.
func servesForced(name string, be Backend, k KernelChoice) error {
	if len(k.Libs) == 0 {
		return nil
	}
	var served []Provided
	if r, ok := Innermost(be).(ProviderReporter); ok {
		served = r.Providers()
	}
	for _, lib := range k.Libs {
		found := false
		for _, p := range served {
			found = found || strings.HasPrefix(p.Provider, lib)
		}
		if !found {
			return notServed(name, k, lib)
		}
	}
	return nil
}

// notServed is backend name's refusal of --kernels k, whose library lib
// serves none of its ops.
func notServed(name string, k KernelChoice, lib string) error {
	return &UnavailableError{Backend: name,
		Reason: fmt.Sprintf("--kernels %s: no op of this backend is %s's", k, lib),
		Fix:    useLib(lib), Else: "or --kernels auto or dml with this one"}
}
