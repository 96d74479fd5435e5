package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The vectorised loops (simd_amd64.s, optim_amd64.s) must give the plain
// Go loops' results bit for bit: --backend cpu keeps its weights, and the
// updates stay optim's (the parameter server's). These tests compare them
// on random data laced with special values, at every length up to 70 and
// a long one, from unaligned starts. Two NaNs compare equal (the payload
// of NaN+NaN is the hardware's choice either way).

// specials are the values the loops must treat as Go does.
var specials = []float32{
	float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
	0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, math.MaxFloat32, -math.MaxFloat32,
	math.SmallestNonzeroFloat32, 1, -1,
}

// data returns n floats from r, a fifth of them special values.
func data(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		if r.IntN(5) == 0 {
			x[i] = specials[r.IntN(len(specials))]
		} else {
			x[i] = float32(r.NormFloat64())
		}
	}
	return x
}

// sameBits reports whether got and want hold the same bits, NaNs equal.
func sameBits(got, want []float32) (int, bool) {
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			return i, false
		}
	}
	return -1, true
}

// cases calls f with every length 0..70 and 1031, each at offsets 0..3
// into a larger slice (so the loops see unaligned starts).
func cases(t *testing.T, f func(t *testing.T, r *rand.Rand, n, off int)) {
	if !useAVX2 {
		t.Log("no AVX2 here (or not amd64): the Go loops run on both sides")
	}
	r := rand.New(rand.NewPCG(42, uint64(len(t.Name()))))
	lengths := []int{1031}
	for n := range 71 {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for off := range 4 {
			t.Run(fmt.Sprintf("n=%d/off=%d", n, off), func(t *testing.T) { f(t, r, n, off) })
		}
	}
}

func check(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if i, ok := sameBits(got, want); !ok {
		t.Fatalf("%s[%d] = %v (%#08x), plain Go loop gives %v (%#08x)", what, i,
			got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
	}
}

func TestAddToBitIdentical(t *testing.T) {
	cases(t, func(t *testing.T, r *rand.Rand, n, off int) {
		dst, src := data(r, n+off)[off:], data(r, n+off)[off:]
		want := append([]float32(nil), dst...)
		for i, v := range src {
			want[i] += v
		}
		addTo(dst, src)
		check(t, "dst", dst, want)
	})
}

func TestReluBitIdentical(t *testing.T) {
	cases(t, func(t *testing.T, r *rand.Rand, n, off int) {
		x := data(r, n+off)[off:]
		want := make([]float32, n)
		for i, v := range x {
			if v < 0 {
				v = 0
			}
			want[i] = v
		}
		y := data(r, n)
		relu(y, x)
		check(t, "y", y, want)
		relu(x, x) // in place
		check(t, "x (in place)", x, want)
	})
}

func TestReluGradBitIdentical(t *testing.T) {
	cases(t, func(t *testing.T, r *rand.Rand, n, off int) {
		dy, y := data(r, n+off)[off:], data(r, n+off)[off:]
		want := make([]float32, n)
		for i, v := range y {
			g := dy[i]
			if !(v > 0) {
				g = 0
			}
			want[i] = g
		}
		dx := data(r, n)
		reluGrad(dx, dy, y)
		check(t, "dx", dx, want)
		reluGrad(dy, dy, y) // dx aliasing dy
		check(t, "dy (in place)", dy, want)
	})
}

// TestBiasGradBitIdentical checks biasGrad (four planes at a time on the
// assembly loop) against sum8 plane by plane, summed over the samples in
// order, for plane lengths up to 70 and a long one and every channel
// count that leaves 0–3 planes to the Go loop.
func TestBiasGradBitIdentical(t *testing.T) {
	cases(t, func(t *testing.T, r *rand.Rand, p, off int) {
		for _, no := range [][2]int{{1, 1}, {2, 3}, {3, 3}, {4, 2}, {5, 1}, {2, 7}} {
			n, o := no[0], no[1]
			dy := data(r, n*o*p+off)[off:]
			want := make([]float32, o)
			for s := range n {
				for oc := range o {
					want[oc] += sum8(dy[(s*o+oc)*p : (s*o+oc+1)*p])
				}
			}
			got := data(r, o)
			biasGrad(got, dy, n, o, p)
			check(t, fmt.Sprintf("db (n=%d, o=%d)", n, o), got, want)
		}
	})
}

// TestCopyRows checks copyRows against a copy per row, for every width up
// to 70 and a long one, at strides that pad the rows on either side or
// pack them, and that it writes nothing between the rows.
func TestCopyRows(t *testing.T) {
	cases(t, func(t *testing.T, r *rand.Rand, width, off int) {
		for _, rows := range []int{1, 3} {
			for _, strides := range [][2]int{{width, width}, {width + off + 1, width}, {width, width + 5}} {
				ds, ss := strides[0], strides[1]
				src := data(r, rows*ss+off)[off:]
				dst := data(r, rows*ds+off)[off:]
				want := append([]float32(nil), dst...)
				for k := range rows {
					copy(want[k*ds:k*ds+width], src[k*ss:k*ss+width])
				}
				copyRows(dst, ds, src, ss, rows, width)
				check(t, fmt.Sprintf("dst (rows %d, strides %d, %d)", rows, ds, ss), dst, want)
			}
		}
	})
}

func TestNonFinite(t *testing.T) {
	bad := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.Float32frombits(0xffc00001)}
	cases(t, func(t *testing.T, r *rand.Rand, n, off int) {
		x := make([]float32, n+off)[off:]
		for i := range x {
			// Finite extremes around the bad ones.
			x[i] = []float32{math.MaxFloat32, -math.MaxFloat32, 1e-40, 0, 1}[r.IntN(5)]
		}
		if got := nonFinite(x); got != -1 {
			t.Fatalf("all finite: %d, want -1", got)
		}
		for _, pos := range []int{0, n / 3, n - 1, r.IntN(max(n, 1))} {
			if pos < 0 || pos >= n {
				continue
			}
			y := append([]float32(nil), x...)
			y[pos] = bad[r.IntN(len(bad))]
			if pos+1 < n {
				y[n-1] = bad[r.IntN(len(bad))] // a later one must not win
			}
			if got := nonFinite(y); got != pos {
				t.Fatalf("bad value %v at %d: got %d", y[pos], pos, got)
			}
		}
	})
}
