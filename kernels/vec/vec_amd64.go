//go:build !purego

package vec

import "golang.org/x/sys/cpu"

// useAVX2 selects the assembly loop; the tests turn it off to compare.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func nonFiniteAVX2(x *float32, n int) int

// nonFiniteVec returns how many leading elements of x the assembly loop
// found finite: all of the longest multiple of 8, or up to the block
// holding the first NaN or ±Inf.
func nonFiniteVec(x []float32) int {
	n := len(x) &^ 7
	if !useAVX2 || n == 0 {
		return 0
	}
	return nonFiniteAVX2(&x[0], n)
}
