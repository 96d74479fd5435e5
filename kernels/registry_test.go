package kernels

import (
	"errors"
	"strings"
	"testing"
)

// fakeBackend is a Backend that is only a name (the registry never calls
// its ops).
type fakeBackend struct {
	Backend
	name string
}

func (f fakeBackend) Name() string { return f.name }
func (f fakeBackend) Close() error { return nil }

// TestOpenAuto registers stand-ins for "cpu" and "blas" (this test binary
// has neither real one) and checks what AutoBackend opens and notices.
func TestOpenAuto(t *testing.T) {
	Register("cpu", func(Options) (Backend, error) { return fakeBackend{name: "cpu"}, nil })
	open := func() (string, []string, error) {
		var notices []string
		be, err := Open(AutoBackend, Options{Notice: func(s string) { notices = append(notices, s) }})
		if err != nil {
			return "", notices, err
		}
		return be.Name(), notices, nil
	}

	// No blas in the binary: cpu, with a notice saying so.
	name, notices, err := open()
	if err != nil || name != "cpu" || len(notices) != 1 || !strings.Contains(notices[0], "no blas backend") {
		t.Errorf("without blas: %q, %q, %v; want cpu and one notice naming the missing blas backend", name, notices, err)
	}

	var blasErr error
	Register("blas", func(Options) (Backend, error) {
		if blasErr != nil {
			return nil, blasErr
		}
		return fakeBackend{name: "blas"}, nil
	})
	name, notices, err = open()
	if err != nil || name != "blas" || len(notices) != 0 {
		t.Errorf("with blas: %q, %q, %v; want blas and no notice", name, notices, err)
	}

	blasErr = &UnavailableError{Backend: "blas", Reason: "OpenBLAS not found (x.so: gone)", Fix: "install it"}
	name, notices, err = open()
	want := "dml: OpenBLAS not found (x.so: gone); for the faster blas backend: install it; using the pure-Go cpu backend (slower)"
	if err != nil || name != "cpu" || len(notices) != 1 || notices[0] != want {
		t.Errorf("blas unavailable: %q, %q, %v; want cpu and the notice %q", name, notices, err, want)
	}
	if _, err := Open("blas", Options{}); !errors.Is(err, ErrUnavailable) ||
		err.Error() != "backend blas: OpenBLAS not found (x.so: gone); to use it: install it" {
		t.Errorf("Open(blas) = %v", err)
	}
	if _, err := Open(AutoBackend, Options{}); err != nil {
		t.Errorf("nil Notice: %v", err)
	}

	// Any other failure of blas is not hidden behind the fallback.
	blasErr = errors.New("blas: bad thread count")
	if _, _, err := open(); err != blasErr {
		t.Errorf("blas failing otherwise: %v, want %v", err, blasErr)
	}

	if names := strings.Join(Names(), ","); names != "blas,cpu" {
		t.Errorf("Names() = %s, want blas,cpu (auto is not a registered backend)", names)
	}

	// A forced library names the backend it serves: auto never opens
	// cuda (and this binary has none), and cpu serves no library.
	blasErr = nil
	for _, c := range []struct {
		backend, libs string
		want          []string
	}{
		{AutoBackend, "cudnn", []string{"backend auto: --kernels cudnn: cudnn serves the cuda backend, which auto never opens (it opens blas, else cpu)", "--backend cuda (cudnn serves it), in the binary `make build-cuda` builds"}},
		{AutoBackend, "cublas,cudnn", []string{"cublas serves the cuda backend"}},
		{"cpu", "onednn", []string{"backend cpu: --kernels onednn: no op of this backend is onednn's; to use it: --backend blas (onednn serves it), or --kernels auto or dml with this one"}},
	} {
		k, err := ParseKernels(c.libs)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Open(c.backend, Options{Kernels: k})
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("--backend %s --kernels %s: %v, want ErrUnavailable", c.backend, c.libs, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("--backend %s --kernels %s: %q, want it to say %q", c.backend, c.libs, err, w)
			}
		}
	}
	// Forced onednn under auto opens blas, and blas's own failure is the
	// one reported (not cpu's, which serves no library).
	blasErr = &UnavailableError{Backend: "blas", Reason: "OpenBLAS not found (x.so: gone)", Fix: "install it"}
	if _, err := Open(AutoBackend, Options{Kernels: KernelChoice{Libs: []string{LibOneDNN}}}); !errors.Is(err, ErrUnavailable) ||
		err.Error() != "backend auto: backend blas: OpenBLAS not found (x.so: gone); to use it: install it" {
		t.Errorf("auto with onednn forced, blas unavailable: %v", err)
	}
	// Libraries of two backends in one list are refused as the flag is read.
	for _, s := range []string{"onednn,cudnn", "cublas,onednn"} {
		if _, err := ParseKernels(s); err == nil || !strings.Contains(err.Error(), "a run uses one backend") {
			t.Errorf("ParseKernels(%q) = %v, want a refusal naming each library's backend", s, err)
		}
	}
	if k, err := ParseKernels("cudnn,cublas"); err != nil || k.String() != "cudnn,cublas" {
		t.Errorf("ParseKernels(cudnn,cublas) = %v, %v", k, err)
	}
	// A library of another backend is refused before the backend opens:
	// a cuda build without a GPU said it had no device first.
	Register("cuda", func(Options) (Backend, error) { return nil, errors.New("no CUDA device") })
	_, err = Open("cuda", Options{Kernels: KernelChoice{Libs: []string{LibOneDNN}}})
	if err == nil || !strings.Contains(err.Error(), "backend cuda: --kernels onednn: no op of this backend is onednn's; to use it: --backend blas (onednn serves it)") {
		t.Errorf("--backend cuda --kernels onednn: %v", err)
	}
}
