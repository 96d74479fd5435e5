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

// TestSoftmaxGradCausalRows: the four-rows-at-a-time gradient of the
// causal softmax gives the bits of one row at a time on every row, for
// every sequence length, with products of both signs and far apart in
// magnitude, so that a sum in another order differs.
func TestSoftmaxGradCausalRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, seq := range []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 64, 129} {
		p, ds := make([]float32, seq*seq), make([]float32, seq*seq)
		for k := range p {
			p[k] = r.Float32()
			ds[k] = float32(math.Ldexp(r.NormFloat64(), r.IntN(80)-40))
			switch r.IntN(6) {
			case 0:
				ds[k] = 1e12
			case 1:
				ds[k] = -1e12
			}
		}
		want := slices.Clone(ds)
		for i := range seq {
			pr, dr := p[i*seq:i*seq+i+1], want[i*seq:(i+1)*seq]
			var dot float64
			for j, v := range pr {
				dot += float64(v) * float64(dr[j])
			}
			if i4 := i &^ 3; i4+4 <= seq { // the float64 sums themselves
				if got := causalDots4(ds, p, seq, i4)[i-i4]; math.Float64bits(got) != math.Float64bits(dot) {
					t.Fatalf("seq %d: row %d's sum is %v, one row at a time gives %v", seq, i, got, dot)
				}
			}
			for j, v := range pr {
				dr[j] = float32(float64(v) * (float64(dr[j]) - dot))
			}
			clear(dr[i+1:])
		}
		softmaxGradCausalRows(ds, p, seq)
		for k := range ds {
			if math.Float32bits(ds[k]) != math.Float32bits(want[k]) {
				t.Fatalf("seq %d: element %d (row %d): %v, one row at a time gives %v", seq, k, k/seq, ds[k], want[k])
			}
		}
	}
}

// BenchmarkSoftmaxGradCausal: the causal softmax's gradient at the gpt
// model's shape (128 positions), one row at a time against four.
func BenchmarkSoftmaxGradCausal(b *testing.B) {
	const seq = 128
	r := rand.New(rand.NewPCG(5, 6))
	p, src := make([]float32, seq*seq), make([]float32, seq*seq)
	for k := range p {
		p[k], src[k] = r.Float32(), float32(r.NormFloat64())
	}
	ds := make([]float32, len(src))
	b.Run("rows=one", func(b *testing.B) {
		for b.Loop() {
			copy(ds, src)
			for i := range seq {
				pr, dr := p[i*seq:i*seq+i+1], ds[i*seq:(i+1)*seq]
				var dot float64
				for j, v := range pr {
					dot += float64(v) * float64(dr[j])
				}
				softmaxGradRow(dr, pr, dot)
			}
		}
	})
	b.Run("rows=four", func(b *testing.B) {
		for b.Loop() {
			copy(ds, src)
			softmaxGradCausalRows(ds, p, seq)
		}
	})
}
