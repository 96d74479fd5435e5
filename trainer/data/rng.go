package data

import (
	"math/bits"
	"math/rand/v2"
)

// Every random draw in this package comes from a PCG generator (PCG-DXSM,
// math/rand/v2) built from the caller's seed and a stream number, so that
// independent uses of one seed (the rows and the labels of a generator, the
// order of each epoch) get unrelated sequences. Permutations use the
// generator's raw 64-bit outputs through uniformN and permute below, whose
// algorithms are fixed here, so an epoch order depends only on (seed, epoch)
// and not on the Go release.

// Streams of one seed.
const (
	streamEpoch         = 0x0e70c4 << 32 // + epoch
	streamDenseMeans    = 1
	streamDenseLabels   = 2
	streamDenseNoise    = 3
	streamSparseRows    = 4
	streamSparseTruth   = 5
	streamSparseLabels  = 6
	streamImagePatterns = 7
	streamImageLabels   = 8
	streamImageNoise    = 9
	streamAugment       = 1 << 40 // + the sample's index
)

// newPCG returns the generator for (seed, stream).
func newPCG(seed, stream uint64) *rand.PCG {
	return rand.NewPCG(splitmix64(seed), splitmix64(seed^splitmix64(stream)))
}

// splitmix64 is the SplitMix64 finaliser, a bijective 64-bit mixer.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// uniformN returns a uniform integer in [0, n), n > 0, by Lemire's
// multiply-and-reject method.
func uniformN(src rand.Source, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}

// permute shuffles p uniformly (Fisher–Yates, from the end).
func permute[T any](src rand.Source, p []T) {
	for i := len(p) - 1; i > 0; i-- {
		j := uniformN(src, uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
}
