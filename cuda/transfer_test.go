//go:build cuda

package cuda

import "testing"

// TestParallelCopy checks the split copy at sizes around its threshold
// (runs without a GPU).
func TestParallelCopy(t *testing.T) {
	for _, n := range []int{0, 1, 1000, 256 << 10, 1<<20 + 7, 3<<20 + 1} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(i) + 0.5
		}
		dst := make([]float32, n)
		parallelCopy(dst, src)
		for i := range dst {
			if dst[i] != src[i] {
				t.Fatalf("n=%d: dst[%d] = %v, want %v", n, i, dst[i], src[i])
			}
		}
	}
}

func BenchmarkParallelCopy(b *testing.B) {
	src, dst := make([]float32, 1860000), make([]float32, 1860000)
	b.SetBytes(4 * 1860000)
	for range b.N {
		parallelCopy(dst, src)
	}
}
