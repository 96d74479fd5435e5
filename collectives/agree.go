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
	send := make([]float32, 2*len(mine))
	for i, v := range mine {
		send[2*i], send[2*i+1] = math.Float32frombits(uint32(v>>32)), math.Float32frombits(uint32(v))
	}
	recv := make([]float32, len(send)*c.Size())
	if err := Allgather(c, send, recv); err != nil {
		return nil, err
	}
	all := make([]uint64, len(mine)*c.Size())
	for i := range all {
		all[i] = uint64(math.Float32bits(recv[2*i]))<<32 | uint64(math.Float32bits(recv[2*i+1]))
	}
	return all, nil
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
