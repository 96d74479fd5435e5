package kernelstest

import (
	"math"
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

// randLabels returns n labels drawn uniformly from [0, classes), as the
// float32 class indices the loss ops take.
func randLabels(r *rand.Rand, n, classes int) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = float32(r.IntN(classes))
	}
	return l
}

// alloc returns a buffer of n elements, failing the test now if Alloc does.
func alloc(t *testing.T, be kernels.Backend, n int) kernels.Buffer {
	t.Helper()
	b, err := be.Alloc(n)
	if err != nil {
		t.Fatalf("Alloc(%d): %v", n, err)
	}
	if b == nil || b.Len() != n {
		t.Fatalf("Alloc(%d) returned a buffer of %v elements", n, lenOf(b))
	}
	return b
}

// lenOf is b.Len(), or "no buffer" for nil.
func lenOf(b kernels.Buffer) any {
	if b == nil {
		return "no buffer (nil)"
	}
	return b.Len()
}

// load allocates a buffer holding a copy of host.
func load(t *testing.T, be kernels.Backend, host []float32) kernels.Buffer {
	t.Helper()
	b := alloc(t, be, len(host))
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

// guardLen is the number of guard elements on each side of an output.
const guardLen = 17

// guardValue is what guard element i holds: a NaN with a payload no op
// computes, so that any write shows.
func guardValue(i int) float32 { return math.Float32frombits(0x7fa00000 | uint32(i+1)) }

// guarded is an output buffer with guard elements around it: buf is a View
// of guardLen..guardLen+n of a larger allocation whose other elements hold
// guardValue. An op that writes past either end of its output changes a
// guard, which check reports.
type guarded struct {
	be  kernels.Backend
	all kernels.Buffer
	buf kernels.Buffer
	n   int
}

// loadGuarded allocates a guarded buffer holding a copy of host.
func loadGuarded(t *testing.T, be kernels.Backend, host []float32) *guarded {
	t.Helper()
	n := len(host)
	h := make([]float32, n+2*guardLen)
	for i := range guardLen {
		h[i] = guardValue(i)
		h[guardLen+n+i] = guardValue(guardLen + i)
	}
	copy(h[guardLen:], host)
	all := load(t, be, h)
	return &guarded{be: be, all: all, buf: be.View(all, guardLen, n), n: n}
}

// read checks the guards and returns a host copy of the buffer itself.
func (g *guarded) read(t *testing.T, what string) []float32 {
	t.Helper()
	h, _ := g.readCount(t, what)
	return h
}

// readCount is read that also returns the number of guards written.
func (g *guarded) readCount(t *testing.T, what string) ([]float32, int) {
	t.Helper()
	h := read(t, g.be, g.all)
	bad := 0
	for i := range guardLen {
		for _, at := range []int{i, guardLen + g.n + i} {
			want := guardValue(at)
			if at >= guardLen {
				want = guardValue(at - g.n)
			}
			if math.Float32bits(h[at]) != math.Float32bits(want) {
				side, off := "before", guardLen-i
				if at >= guardLen {
					side, off = "after", i+1
				}
				t.Errorf("%s: the element %d %s the output (of %d) was written: %v", what, off, side, g.n, h[at])
				bad++
			}
		}
	}
	return h[guardLen : guardLen+g.n], bad
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

// wantShapeErrs fails t for each err (an op called with shapes that do not
// fit) that does not wrap kernels.ErrShape.
func wantShapeErrs(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if !isShape(err) {
			t.Errorf("bad shapes: %v, want ErrShape", err)
		}
	}
}
