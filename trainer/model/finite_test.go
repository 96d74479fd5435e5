package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// allFiniteRef is the plain check AllFinite replaced.
func allFiniteRef(v []float32) bool {
	for _, x := range v {
		if x-x != 0 {
			return false
		}
	}
	return true
}

// TestAllFinite agrees with the plain check for every special value at
// every position of short vectors at every alignment, and on large vectors
// (the parallel path) with one bad element anywhere.
func TestAllFinite(t *testing.T) {
	specials := []uint32{
		0x7f800000, 0xff800000, // ±Inf
		0x7fc00000, 0xffc00000, 0x7f800001, 0xffffffff, // NaNs, quiet and signalling
		0x7f7fffff, 0xff7fffff, // ±max finite
		0x00000001, 0x80000000, 0x00800000, 0x3f800000, 0x7f000000, // denormal, -0, min normal, 1, 2^127
	}
	base := make([]float32, 48)
	for i := range base {
		base[i] = float32(i) - 20.5
	}
	for off := 0; off < 3; off++ {
		for n := 0; off+n <= len(base); n++ {
			for pos := 0; pos < n; pos++ {
				for _, s := range specials {
					v := append([]float32(nil), base...)
					v[off+pos] = math.Float32frombits(s)
					w := v[off : off+n]
					if got, want := AllFinite(w), allFiniteRef(w); got != want {
						t.Fatalf("off %d n %d: %#08x at %d: AllFinite %v, want %v", off, n, s, pos, got, want)
					}
				}
			}
			if !AllFinite(base[off : off+n]) {
				t.Fatalf("off %d n %d: clean vector reported non-finite", off, n)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]float32, 1860000+3)
	for i := range big {
		big[i] = float32(rng.NormFloat64() * 1e30)
	}
	if !AllFinite(big) || !AllFinite(big[1:]) {
		t.Fatal("clean large vector reported non-finite")
	}
	for _, pos := range []int{0, 1, 262143, 262144, 1000000, len(big) - 2, len(big) - 1} {
		for _, s := range specials[:6] {
			old := big[pos]
			big[pos] = math.Float32frombits(s)
			if AllFinite(big) || (pos > 0 && AllFinite(big[1:])) {
				t.Fatalf("%#08x at %d of %d not found", s, pos, len(big))
			}
			big[pos] = old
		}
	}
}

// BenchmarkCheckFinite: the per-step check of an MLP 784-1024-1024-10's
// gradient (1.86 M floats), the plain loop against AllFinite.
func BenchmarkCheckFinite(b *testing.B) {
	arch, err := NewArch(784, []int{1024, 1024}, 10, SoftmaxCE)
	if err != nil {
		b.Fatal(err)
	}
	g := arch.InitParams(1)
	b.Run("plain", func(b *testing.B) {
		b.SetBytes(int64(4 * len(g)))
		for range b.N {
			if !allFiniteRef(g) {
				b.Fatal("non-finite")
			}
		}
	})
	b.Run("bits", func(b *testing.B) {
		b.SetBytes(int64(4 * len(g)))
		for range b.N {
			if !finiteBits(g) {
				b.Fatal("non-finite")
			}
		}
	})
	b.Run("CheckFinite", func(b *testing.B) {
		b.SetBytes(int64(4 * len(g)))
		for range b.N {
			if err := arch.CheckFinite(g, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
