package ps

import "golang.org/x/sys/cpu"

//go:noescape
func nonFiniteAVX2(p *float32, n int) int

// vectorScan says whether firstNonFinite scans with AVX2 (a variable so that
// the tests compare both ways).
var vectorScan = cpu.X86.HasAVX2

// scanVec returns where the portable scan must start: the first block of
// 32 that holds a non-finite value, else the first float after the blocks
// (0 without AVX2). BenchmarkFirstNonFinite, 235,146 floats in cache on the
// 2-core AMD EPYC guest: 12.7–13.8 µs, against 76.8–86.4 µs portable.
func scanVec(vs []float32) int {
	if !vectorScan || len(vs) < 32 {
		return 0
	}
	return nonFiniteAVX2(&vs[0], len(vs))
}
