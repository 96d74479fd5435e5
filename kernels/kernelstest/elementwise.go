package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// vectorLengths are the lengths the element-wise ops are checked on: empty,
// tiny, odd, and long enough for a GPU grid of many blocks (100003 is
// prime, so no block size divides it).
var vectorLengths = []int{0, 1, 2, 17, 1000, 4099, 100003}

// withZeros returns n normals where every fifth element is 0 or −0, so that
// ops that branch on the sign meet the boundary.
func withZeros(seed uint64, n int) []float32 {
	x := normals(newRand(seed), n, 1)
	for i := 0; i < n; i += 5 {
		x[i] = 0
		if i%10 == 5 {
			x[i] = float32(math.Copysign(0, -1))
		}
	}
	return x
}

// testRelu checks Relu exactly against max(x, 0), into a separate y (x left
// alone) and in place (y aliasing x, which the interface allows).
func testRelu(t *testing.T, be kernels.Backend) {
	for _, n := range vectorLengths {
		x := withZeros(4, n)
		want := make([]float32, n)
		for i, v := range x {
			want[i] = float32(math.Max(float64(v), 0))
		}
		name := fmt.Sprintf("n=%d", n)
		xb, yb := loadGuarded(t, be, x), loadGuarded(t, be, filled(n, 7))
		ok(t, name, be.Relu(yb.buf, xb.buf))
		checkExact(t, name+": y", yb.read(t, name), want)
		checkExact(t, name+": x after", xb.read(t, name), x)

		ok(t, name+" in place", be.Relu(xb.buf, xb.buf))
		checkExact(t, name+" in place: y", xb.read(t, name+" in place"), want)
	}
}

// testReluGrad checks ReluGrad exactly against dy where y > 0 else 0, with y
// a Relu output (so it has exact zeros), into a separate dx and in place
// (dx aliasing dy).
func testReluGrad(t *testing.T, be kernels.Backend) {
	for _, n := range vectorLengths {
		x := withZeros(5, n)
		y := make([]float32, n)
		for i, v := range x {
			y[i] = float32(math.Max(float64(v), 0))
		}
		dy := normals(newRand(6), n, 1)
		want := make([]float32, n)
		for i := range want {
			if y[i] > 0 {
				want[i] = dy[i]
			}
		}
		name := fmt.Sprintf("n=%d", n)
		yb, dyb, dxb := load(t, be, y), loadGuarded(t, be, dy), loadGuarded(t, be, filled(n, 7))
		ok(t, name, be.ReluGrad(dxb.buf, dyb.buf, yb))
		checkExact(t, name+": dx", dxb.read(t, name), want)
		checkExact(t, name+": dy after", dyb.read(t, name), dy)
		checkExact(t, name+": y after", read(t, be, yb), y)

		ok(t, name+" in place", be.ReluGrad(dyb.buf, dyb.buf, yb))
		checkExact(t, name+" in place: dx", dyb.read(t, name+" in place"), want)
	}
}

// testAxpy compares Axpy with y + alpha·x within axpyBound.
func testAxpy(t *testing.T, be kernels.Backend) {
	r := newRand(7)
	for _, n := range vectorLengths {
		for _, alpha := range []float32{0, 1, -2.5} {
			name := fmt.Sprintf("n=%d,alpha=%v", n, alpha)
			x, y := normals(r, n, 1), normals(r, n, 1)
			want, bound := make([]float64, n), make([]float64, n)
			for i := range n {
				ax := float64(alpha) * float64(x[i])
				want[i] = float64(y[i]) + ax
				bound[i] = axpyBound(float64(y[i]), ax)
			}
			xb, yb := load(t, be, x), loadGuarded(t, be, y)
			ok(t, name, be.Axpy(alpha, xb, yb.buf))
			checkWithin(t, name+": y", yb.read(t, name), want, bound)
			checkExact(t, name+": x after", read(t, be, xb), x)
		}
	}
}

// testScale compares Scale with alpha·x within scaleBound.
func testScale(t *testing.T, be kernels.Backend) {
	r := newRand(8)
	for _, n := range vectorLengths {
		for _, alpha := range []float32{0, 1, -0.5, 3} {
			name := fmt.Sprintf("n=%d,alpha=%v", n, alpha)
			x := normals(r, n, 1)
			want, bound := make([]float64, n), make([]float64, n)
			for i, v := range x {
				want[i] = float64(alpha) * float64(v)
				bound[i] = scaleBound(want[i])
			}
			xb := loadGuarded(t, be, x)
			ok(t, name, be.Scale(alpha, xb.buf))
			checkWithin(t, name+": x", xb.read(t, name), want, bound)
		}
	}
}

// testSum compares Sum over 0 to 5 sources with their float64 sum, within
// sumBound; dst starts full of garbage, which must not count, and the
// sources must be left alone. It also accumulates into the first source.
func testSum(t *testing.T, be kernels.Backend) {
	r := newRand(9)
	for _, n := range []int{0, 1, 33, 100003} {
		for _, count := range []int{0, 1, 2, 3, 5} {
			name := fmt.Sprintf("n=%d,srcs=%d", n, count)
			srcs, hosts := make([]kernels.Buffer, count), make([][]float32, count)
			want, abs := make([]float64, n), make([]float64, n)
			for s := range srcs {
				hosts[s] = normals(r, n, float64(s+1))
				srcs[s] = load(t, be, hosts[s])
				for i, v := range hosts[s] {
					want[i] += float64(v)
					abs[i] += math.Abs(float64(v))
				}
			}
			bound := make([]float64, n)
			for i := range bound {
				bound[i] = sumBound(count, abs[i])
			}
			dst := loadGuarded(t, be, filled(n, 1e6))
			ok(t, name, be.Sum(dst.buf, srcs...))
			checkWithin(t, name+": dst", dst.read(t, name), want, bound)
			for s := range srcs {
				checkExact(t, fmt.Sprintf("%s: srcs[%d] after", name, s), read(t, be, srcs[s]), hosts[s])
			}
			if count >= 2 {
				// Sum(acc, acc, …) accumulates: the result is the same sum.
				ok(t, name+" into srcs[0]", be.Sum(srcs[0], srcs...))
				checkWithin(t, name+" into srcs[0]: dst", read(t, be, srcs[0]), want, bound)
			}
		}
	}
}

// testDot compares Dot with the float64 sum of products within dotBound.
func testDot(t *testing.T, be kernels.Backend) {
	r := newRand(10)
	for _, n := range []int{0, 1, 17, 1000, 4097, 100003} {
		x, y := normals(r, n, 1), normals(r, n, 1)
		var want, abs float64
		for i := range n {
			p := float64(x[i]) * float64(y[i])
			want += p
			abs += math.Abs(p)
		}
		got, err := be.Dot(load(t, be, x), load(t, be, y))
		ok(t, fmt.Sprintf("Dot n=%d", n), err)
		checkScalar(t, fmt.Sprintf("Dot n=%d", n), got, want, dotBound(n, abs))
	}
	// A NaN anywhere, the last element included, makes the dot NaN.
	const n = 100003
	x, y := normals(r, n, 1), normals(r, n, 1)
	x[n-1] = float32(math.NaN())
	got, err := be.Dot(load(t, be, x), load(t, be, y))
	ok(t, "Dot with NaN last", err)
	if !math.IsNaN(got) {
		t.Errorf("Dot with a NaN as element %d of %d = %v, want NaN", n-1, n, got)
	}
}

// testNonFinite checks that NonFinite finds the first NaN or ±Inf and
// nothing in finite data, extreme finite values included, in short and
// long vectors.
func testNonFinite(t *testing.T, be kernels.Backend) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, n := range []int{100, 100003} {
		finite := normals(newRand(11), n, 1)
		finite[3], finite[4], finite[5] = math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32
		with := func(at map[int]float32) []float32 {
			x := clone(finite)
			for i, v := range at {
				x[i] = v
			}
			return x
		}
		for _, c := range []struct {
			name string
			x    []float32
			want int
		}{
			{"finite", finite, -1},
			{"NaN", with(map[int]float32{40: nan}), 40},
			{"+Inf first", with(map[int]float32{0: inf}), 0},
			{"-Inf last", with(map[int]float32{n - 1: -inf}), n - 1},
			{"NaN last", with(map[int]float32{n - 1: nan}), n - 1},
			{"first of several", with(map[int]float32{70: nan, 20: -inf, 50: inf, n - 2: nan}), 20},
			{"first of several far apart", with(map[int]float32{n - 2: nan, n / 2: inf, n - 1: -inf}), n / 2},
		} {
			got, err := be.NonFinite(load(t, be, c.x))
			ok(t, "NonFinite", err)
			if got != c.want {
				t.Errorf("NonFinite(%s, n=%d) = %d, want %d", c.name, n, got, c.want)
			}
		}
	}
	got, err := be.NonFinite(alloc(t, be, 0))
	if err != nil || got != -1 {
		t.Errorf("NonFinite(empty) = %d, %v; want -1", got, err)
	}
}
