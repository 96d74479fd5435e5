package kernelstest

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// ramp returns n distinct values off, off+1, …, as float32.
func ramp(n int, off float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = off + float32(i)
	}
	return x
}

// testAlloc checks that Alloc returns zeroed buffers of the length asked
// for, that two buffers do not share memory, and that a negative length is
// an error wrapping kernels.ErrShape (not a panic).
func testAlloc(t *testing.T, be kernels.Backend) {
	for _, n := range []int{0, 1, 7, 1000, 100003} {
		b := alloc(t, be, n)
		checkBits(t, fmt.Sprintf("Alloc(%d)", n), read(t, be, b), make([]float32, n))
	}
	a, b := alloc(t, be, 8), alloc(t, be, 8)
	ok(t, "Fill", be.Fill(a, 3))
	checkBits(t, "second buffer after filling the first", read(t, be, b), make([]float32, 8))

	for _, n := range []int{-1, math.MinInt} {
		var buf kernels.Buffer
		err := catch(func() (err error) { buf, err = be.Alloc(n); return err })
		if !errors.Is(err, kernels.ErrShape) {
			t.Errorf("Alloc(%d) = %v, %v; want an error wrapping kernels.ErrShape", n, lenOf(buf), err)
		}
	}
}

// testFree checks that Free(nil) does nothing, that freed memory comes back
// zeroed from a later Alloc (a pool must clear what it reuses), and that
// allocating and freeing far more than stays live works (freed memory is
// given back or reused).
func testFree(t *testing.T, be kernels.Backend) {
	ok(t, "Free(nil)", be.Free(nil))
	for _, n := range []int{0, 1, 1000} {
		b := alloc(t, be, n)
		ok(t, fmt.Sprintf("Fill(Alloc(%d))", n), be.Fill(b, 7))
		ok(t, fmt.Sprintf("Free(Alloc(%d))", n), be.Free(b))
		again := alloc(t, be, n)
		checkBits(t, fmt.Sprintf("Alloc(%d) after freeing a filled one", n), read(t, be, again), make([]float32, n))
		ok(t, "Free", be.Free(again))
	}
	// 64 rounds of 4 MiB: 256 MiB allocated, 4 MiB live.
	const n = 1 << 20
	for i := range 64 {
		b := alloc(t, be, n)
		if i%16 == 0 {
			ok(t, "Fill", be.Fill(b, float32(i)))
		}
		ok(t, fmt.Sprintf("Free in round %d", i), be.Free(b))
	}
	// A buffer freed while others live leaves them alone.
	keep := load(t, be, ramp(100, 1))
	gone := load(t, be, ramp(100, 2))
	ok(t, "Free", be.Free(gone))
	checkExact(t, "a live buffer after another was freed", read(t, be, keep), ramp(100, 1))
}

// testSync checks that Sync returns nil on a healthy backend, with nothing
// queued and after a chain of ops whose result it then reads.
func testSync(t *testing.T, be kernels.Backend) {
	ok(t, "Sync with nothing queued", be.Sync())
	const n = 4099
	x := load(t, be, ramp(n, 0))
	y := alloc(t, be, n)
	for range 10 {
		ok(t, "Axpy", be.Axpy(1, x, y))
	}
	ok(t, "Sync after 10 Axpy", be.Sync())
	ok(t, "Sync twice", be.Sync())
	want := make([]float32, n)
	for i := range want {
		want[i] = 10 * float32(i) // exact: every partial sum is an integer below 2²⁴
	}
	checkExact(t, "y after 10 Axpy and Sync", read(t, be, y), want)
}

// testView checks that views share memory both ways, nest, and may be empty
// at either end.
func testView(t *testing.T, be kernels.Backend) {
	const n = 10
	base := load(t, be, ramp(n, 0.5))
	v := be.View(base, 3, 4)
	if v.Len() != 4 {
		t.Fatalf("View(base, 3, 4).Len() = %d", v.Len())
	}
	checkExact(t, "View(base, 3, 4)", read(t, be, v), ramp(4, 3.5))

	ok(t, "Fill", be.Fill(v, -1))
	want := ramp(n, 0.5)
	copy(want[3:7], filled(4, -1))
	checkExact(t, "base after filling View(3, 4)", read(t, be, base), want)

	inner := be.View(v, 1, 2) // base[4:6]
	ok(t, "Upload into a view of a view", be.Upload(inner, []float32{40, 50}))
	want[4], want[5] = 40, 50
	checkExact(t, "base after Upload into View(View(3, 4), 1, 2)", read(t, be, base), want)

	ok(t, "Upload into base", be.Upload(base, ramp(n, 100)))
	checkExact(t, "view after Upload into base", read(t, be, inner), []float32{104, 105})

	for _, off := range []int{0, 5, n} {
		if e := be.View(base, off, 0); e.Len() != 0 {
			t.Errorf("View(base, %d, 0).Len() = %d", off, e.Len())
		}
	}
	checkExact(t, "View(base, 0, n)", read(t, be, be.View(base, 0, n)), ramp(n, 100))
}

// testUploadDownload checks that Upload and Download copy every bit (NaN
// payloads, −0, subnormals, infinities), copy rather than share memory, and
// stay inside a view.
func testUploadDownload(t *testing.T, be kernels.Backend) {
	for _, n := range []int{17, 64, 100003} {
		host := normals(newRand(19), n, 1)
		special := []float32{
			float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
			math.Float32frombits(0x7fc00001), math.Float32frombits(0xffa00000),
			math.SmallestNonzeroFloat32, math.MaxFloat32,
		}
		copy(host[10:], special)
		g := loadGuarded(t, be, filled(n, 3))
		ok(t, "Upload", be.Upload(g.buf, host))
		sent := clone(host)
		host[0] = 1234 // the buffer must not see this
		got := read(t, be, g.buf)
		checkBits(t, fmt.Sprintf("n=%d: Download(Upload(x))", n), got, sent)
		got[1] = 5678 // nor this
		checkBits(t, fmt.Sprintf("n=%d: buffer after changing a downloaded copy", n), g.read(t, "Upload into a view"), sent)
	}
	ok(t, "Upload of nothing", be.Upload(alloc(t, be, 0), nil))
	ok(t, "Download of nothing", be.Download(nil, alloc(t, be, 0)))
}

// testCopy checks that Copy copies every bit, leaves src alone, stays inside
// dst and works between disjoint views of one buffer.
func testCopy(t *testing.T, be kernels.Backend) {
	for _, n := range []int{1, 33, 100003} {
		src := normals(newRand(20), n, 1)
		src[0] = math.Float32frombits(0x7fc00001)
		sb, db := load(t, be, src), loadGuarded(t, be, filled(n, 9))
		ok(t, "Copy", be.Copy(db.buf, sb))
		checkBits(t, fmt.Sprintf("n=%d: dst", n), db.read(t, "Copy"), src)
		checkBits(t, fmt.Sprintf("n=%d: src after", n), read(t, be, sb), src)
	}

	all := load(t, be, ramp(10, 0))
	ok(t, "Copy between views", be.Copy(be.View(all, 6, 4), be.View(all, 1, 4)))
	checkExact(t, "buffer after copying [1:5] to [6:10]", read(t, be, all), []float32{0, 1, 2, 3, 4, 5, 1, 2, 3, 4})

	ok(t, "Copy of nothing", be.Copy(alloc(t, be, 0), alloc(t, be, 0)))
}

// testFill checks Fill on a whole buffer and on views, which must not spill
// outside them.
func testFill(t *testing.T, be kernels.Backend) {
	b := load(t, be, ramp(9, 1))
	ok(t, "Fill", be.Fill(b, 2.5))
	checkExact(t, "Fill(b, 2.5)", read(t, be, b), filled(9, 2.5))
	ok(t, "Fill of a view", be.Fill(be.View(b, 2, 3), float32(math.Inf(-1))))
	want := filled(9, 2.5)
	copy(want[2:5], filled(3, float32(math.Inf(-1))))
	checkExact(t, "Fill of View(b, 2, 3)", read(t, be, b), want)
	for _, n := range []int{0, 1, 31, 100003} {
		g := loadGuarded(t, be, ramp(n, 0))
		ok(t, "Fill", be.Fill(g.buf, -0.75))
		checkExact(t, fmt.Sprintf("Fill of %d guarded elements", n), g.read(t, "Fill"), filled(n, -0.75))
	}
}
