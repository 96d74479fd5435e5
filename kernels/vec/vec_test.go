package vec

import (
	"math"
	"testing"
)

func TestFirstNonFinite(t *testing.T) {
	// Both scans where the CPU has AVX2: the vector one and the portable.
	defer func(v bool) { useAVX2 = v }(useAVX2)
	for _, vec := range []bool{useAVX2, false} {
		useAVX2 = vec
		vs := make([]float32, 200)
		if i := FirstNonFinite(vs); i != -1 {
			t.Fatalf("vector %v: all zero: %d", vec, i)
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.Float32frombits(0x7f800001), math.Float32frombits(0xffffffff)} {
			for _, n := range []int{1, 31, 32, 33, 200, 4099} {
				for _, at := range []int{0, 31, 32, 63, 64, 130, 199, 4098} {
					if at >= n {
						continue
					}
					vs := make([]float32, n)
					for i := range vs {
						vs[i] = math.MaxFloat32 // finite, largest exponent below 0xff
						if i%3 == 0 {
							vs[i] = -math.SmallestNonzeroFloat32
						}
					}
					vs[at] = bad
					if at+5 < n {
						vs[at+5] = bad // a later one is not the first
					}
					if i := FirstNonFinite(vs); i != at {
						t.Errorf("vector %v: %v at %d of %d: found at %d", vec, bad, at, n, i)
					}
				}
			}
		}
	}
}

// BenchmarkFirstNonFinite is the NaN/Inf check a parameter-server push
// passes twice (worker and server), at the MLP's 235,146 floats.
func BenchmarkFirstNonFinite(b *testing.B) {
	vs := make([]float32, 235146)
	b.SetBytes(4 * int64(len(vs)))
	for b.Loop() {
		if FirstNonFinite(vs) != -1 {
			b.Fatal("finite values reported")
		}
	}
}

// BenchmarkFirstNonFinitePortable is BenchmarkFirstNonFinite without AVX2.
func BenchmarkFirstNonFinitePortable(b *testing.B) {
	defer func(v bool) { useAVX2 = v }(useAVX2)
	useAVX2 = false
	BenchmarkFirstNonFinite(b)
}
