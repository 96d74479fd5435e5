package collectives

import (
	"fmt"
	"math"
)

// AllgatherUint64 gathers every rank's words (the same count on every
// rank) and returns them rank-major: all[r*len(mine)+i] is rank r's
// mine[i]. A word travels as two float32 bit patterns, only copied, never
// computed with, so every pattern arrives as sent: integers, hashes and
// fingerprints need no packing by hand.
func AllgatherUint64(c PointToPoint, mine []uint64) ([]uint64, error) {
	recv := make([]float32, 2*len(mine)*c.Size())
	if err := Allgather(c, packWords(mine), recv); err != nil {
		return nil, err
	}
	all := make([]uint64, len(mine)*c.Size())
	unpackWords(all, recv)
	return all, nil
}

// BroadcastUint64 copies root's words into every rank's words (the same
// count on every rank), bit for bit as AllgatherUint64 carries them.
func BroadcastUint64(c PointToPoint, words []uint64, root int) error {
	buf := packWords(words)
	if err := Broadcast(c, buf, root); err != nil {
		return err
	}
	unpackWords(words, buf)
	return nil
}

// packWords spells each word as two float32 bit patterns (high, low).
func packWords(w []uint64) []float32 {
	f := make([]float32, 2*len(w))
	for i, v := range w {
		f[2*i], f[2*i+1] = math.Float32frombits(uint32(v>>32)), math.Float32frombits(uint32(v))
	}
	return f
}

// unpackWords reads packWords' patterns back into w.
func unpackWords(w []uint64, f []float32) {
	for i := range w {
		w[i] = uint64(math.Float32bits(f[2*i]))<<32 | uint64(math.Float32bits(f[2*i+1]))
	}
}

// Agree all-gathers one value per rank (a configuration hash, a data
// fingerprint) and returns the ranks whose value differs from rank 0's, in
// ascending order, and every rank's value. Every rank gets the same
// answer.
func Agree(c PointToPoint, v uint64) (differ []int, all []uint64, err error) {
	all, err = AllgatherUint64(c, []uint64{v})
	if err != nil {
		return nil, nil, fmt.Errorf("agreeing: %w", err)
	}
	for r := 1; r < len(all); r++ {
		if all[r] != all[0] {
			differ = append(differ, r)
		}
	}
	return differ, all, nil
}
