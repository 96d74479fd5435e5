package kernelstest

import (
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// newRand returns a generator seeded with seed; every check uses its own
// seed, so a failure reproduces on its own.
func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x6b65726e656c73))
}

// normals returns n samples of N(0, sigma²).
func normals(r *rand.Rand, n int, sigma float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(sigma * r.NormFloat64())
	}
	return v
}

// randLabels returns n labels drawn uniformly from [0, classes).
func randLabels(r *rand.Rand, n, classes int) []int32 {
	l := make([]int32, n)
	for i := range l {
		l[i] = int32(r.IntN(classes))
	}
	return l
}

// load allocates a buffer holding a copy of host.
func load(t *testing.T, be kernels.Backend, host []float32) kernels.Buffer {
	t.Helper()
	b := be.Alloc(len(host))
	if err := be.Upload(b, host); err != nil {
		t.Fatalf("Upload of %d elements: %v", len(host), err)
	}
	return b
}

// read returns a host copy of b.
func read(t *testing.T, be kernels.Backend, b kernels.Buffer) []float32 {
	t.Helper()
	host := make([]float32, b.Len())
	if err := be.Download(host, b); err != nil {
		t.Fatalf("Download of %d elements: %v", b.Len(), err)
	}
	return host
}

// widen converts x to float64, exactly.
func widen(x []float32) []float64 {
	w := make([]float64, len(x))
	for i, v := range x {
		w[i] = float64(v)
	}
	return w
}

// clone returns a copy of x.
func clone(x []float32) []float32 { return append([]float32(nil), x...) }

// filled returns n copies of v.
func filled(n int, v float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = v
	}
	return x
}

// ok fails the test now if err is not nil.
func ok(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: unexpected error: %v", what, err)
	}
}
