package kernelstest

import (
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
// for, and that two buffers do not share memory.
func testAlloc(t *testing.T, be kernels.Backend) {
	for _, n := range []int{0, 1, 7, 1000} {
		b := be.Alloc(n)
		if b.Len() != n {
			t.Errorf("Alloc(%d).Len() = %d", n, b.Len())
		}
		checkBits(t, fmt.Sprintf("Alloc(%d)", n), read(t, be, b), make([]float32, n))
	}
	a, b := be.Alloc(8), be.Alloc(8)
	be.Fill(a, 3)
	checkBits(t, "second buffer after filling the first", read(t, be, b), make([]float32, 8))
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

	be.Fill(v, -1)
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
// payloads, −0, subnormals, infinities) and copy rather than share memory.
func testUploadDownload(t *testing.T, be kernels.Backend) {
	host := normals(newRand(19), 64, 1)
	special := []float32{
		float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.Float32frombits(0x7fc00001), math.Float32frombits(0xffa00000),
		math.SmallestNonzeroFloat32, math.MaxFloat32,
	}
	copy(host[10:], special)
	b := load(t, be, host)
	sent := clone(host)
	host[0] = 1234 // the buffer must not see this
	got := read(t, be, b)
	checkBits(t, "Download(Upload(x))", got, sent)
	got[1] = 5678 // nor this
	checkBits(t, "buffer after changing a downloaded copy", read(t, be, b), sent)

	ok(t, "Upload of nothing", be.Upload(be.Alloc(0), nil))
	ok(t, "Download of nothing", be.Download(nil, be.Alloc(0)))
}

// testCopy checks that Copy copies every bit, leaves src alone and works
// between disjoint views of one buffer.
func testCopy(t *testing.T, be kernels.Backend) {
	src := normals(newRand(20), 33, 1)
	src[3] = math.Float32frombits(0x7fc00001)
	sb, db := load(t, be, src), be.Alloc(33)
	ok(t, "Copy", be.Copy(db, sb))
	checkBits(t, "dst", read(t, be, db), src)
	checkBits(t, "src after", read(t, be, sb), src)

	all := load(t, be, ramp(10, 0))
	ok(t, "Copy between views", be.Copy(be.View(all, 6, 4), be.View(all, 1, 4)))
	checkExact(t, "buffer after copying [1:5] to [6:10]", read(t, be, all), []float32{0, 1, 2, 3, 4, 5, 1, 2, 3, 4})

	ok(t, "Copy of nothing", be.Copy(be.Alloc(0), be.Alloc(0)))
}

// testFill checks Fill on a whole buffer and on a view, which must not
// spill outside it.
func testFill(t *testing.T, be kernels.Backend) {
	b := load(t, be, ramp(9, 1))
	be.Fill(b, 2.5)
	checkExact(t, "Fill(b, 2.5)", read(t, be, b), filled(9, 2.5))
	be.Fill(be.View(b, 2, 3), float32(math.Inf(-1)))
	want := filled(9, 2.5)
	copy(want[2:5], filled(3, float32(math.Inf(-1))))
	checkExact(t, "Fill of View(b, 2, 3)", read(t, be, b), want)
	be.Fill(be.Alloc(0), 1)
}
