package collectives

import (
	"fmt"
	"testing"
)

func TestAddInto(t *testing.T) {
	for _, n := range []int{0, 1, 3, 17, 31, 32, 33, 64, 1000, 1027} {
		dst, src := make([]float32, n), make([]float32, n)
		for i := range dst {
			dst[i], src[i] = float32(i), float32(3*i+1)
		}
		addInto(dst, src)
		for i, v := range dst {
			if v != float32(4*i+1) {
				t.Fatalf("n=%d: dst[%d] = %v, want %v", n, i, v, 4*i+1)
			}
		}
	}
}

// BenchmarkAddInto compares the reduction kernels of the collectives; bytes
// are those of one operand.
func BenchmarkAddInto(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 16, 1 << 21} {
		dst, src := make([]float32, n), make([]float32, n)
		for name, fn := range map[string]func(d, s []float32){"dispatch": addInto, "axpy": addIntoAxpy, "loop": addIntoLoop} {
			b.Run(fmt.Sprintf("kernel=%s/bytes=%d", name, 4*n), func(b *testing.B) {
				b.SetBytes(int64(4 * n))
				for i := 0; i < b.N; i++ {
					fn(dst, src)
				}
			})
		}
	}
}
