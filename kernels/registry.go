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

// Precision is the arithmetic a backend's matrix products may use.
type Precision int

const (
	// FP32 is plain float32 arithmetic everywhere (the default).
	FP32 Precision = iota
	// TF32 lets Gemm round its inputs to TF32 (10-bit mantissa) on tensor
	// cores; accumulation stays float32. Backends without such units
	// compute FP32.
	TF32
)

// String returns the name the command line uses.
func (p Precision) String() string {
	switch p {
	case FP32:
		return "fp32"
	case TF32:
		return "tf32"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision reads "fp32" or "tf32".
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "fp32":
		return FP32, nil
	case "tf32":
		return TF32, nil
	}
	return 0, fmt.Errorf("unknown precision %q (want fp32 or tf32)", s)
}

// Options are what a backend is opened with.
type Options struct {
	// LocalRank is this process's index among the ranks on its node
	// (mpi.LocalRank); a device backend picks device LocalRank mod count.
	LocalRank int
	// Precision is the arithmetic Gemm may use.
	Precision Precision
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
// wrapping ErrUnknownBackend that lists the backends this binary has.
func Open(name string, o Options) (Backend, error) {
	registry.Lock()
	f, ok := registry.m[name]
	registry.Unlock()
	if !ok {
		return nil, fmt.Errorf("backend %q is not in this binary (it has: %s): %w",
			name, strings.Join(Names(), ", "), ErrUnknownBackend)
	}
	return f(o)
}
