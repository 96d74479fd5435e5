package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSoftmaxCausalRows: the four-rows-at-a-time softmax gives the bits
// of the one-row one on every row, for every sequence length (the rows
// left over after the fours included), with scores of ±1e4 and ties.
func TestSoftmaxCausalRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, seq := range []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 64, 129} {
		p := make([]float32, seq*seq)
		for k := range p {
			switch r.IntN(20) {
			case 0:
				p[k] = 1e4
			case 1:
				p[k] = -1e4
			case 2:
				p[k] = 0.5
			default:
				p[k] = float32(r.NormFloat64() * 4)
			}
		}
		want := slices.Clone(p)
		for i := range seq {
			softmaxCausal(want[i*seq:(i+1)*seq], i)
		}
		softmaxCausalRows(p, seq)
		for k := range p {
			if math.Float32bits(p[k]) != math.Float32bits(want[k]) {
				t.Fatalf("seq %d: element %d (row %d): %v, the one-row softmax gives %v", seq, k, k/seq, p[k], want[k])
			}
		}
	}
}

func BenchmarkSoftmaxCausal(b *testing.B) {
	const seq = 128
	r := rand.New(rand.NewPCG(5, 6))
	src := make([]float32, seq*seq)
	for k := range src {
		src[k] = float32(r.NormFloat64())
	}
	p := make([]float32, len(src))
	b.Run("rows=one", func(b *testing.B) {
		for b.Loop() {
			copy(p, src)
			for i := range seq {
				softmaxCausal(p[i*seq:(i+1)*seq], i)
			}
		}
	})
	b.Run("rows=four", func(b *testing.B) {
		for b.Loop() {
			copy(p, src)
			softmaxCausalRows(p, seq)
		}
	})
}
