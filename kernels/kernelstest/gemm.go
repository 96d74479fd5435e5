package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// gemmSizes are the sizes m, n and k are drawn from: 1, odd sizes, and
// sizes on either side of the tile widths a GPU kernel uses (32, 64, 128).
var gemmSizes = []int{1, 7, 31, 32, 33, 63, 64, 65, 127, 129, 200}

// gemmEdgeShapes are the (m, n, k) checked besides the drawn ones: empty in
// every dimension, vectors, and one larger product.
var gemmEdgeShapes = [][3]int{
	{0, 0, 0}, {0, 3, 4}, {3, 0, 4}, {3, 4, 0}, {0, 0, 5},
	{1, 1, 1}, {1, 7, 3}, {7, 1, 5}, {5, 6, 1}, {1, 200, 1}, {200, 1, 129},
	{300, 257, 190},
}

// gemmDrawn is how many (m, n, k) are drawn from gemmSizes.
const gemmDrawn = 20

// gemmScalars are the (alpha, beta) pairs: plain product, both scalars
// awkward, accumulate, alpha == 0, and beta == 0 with C poisoned by NaN
// (the last flag), which must not show through.
var gemmScalars = []struct {
	alpha, beta float32
	nanC        bool
}{{1, 0, false}, {0.5, -1.5, false}, {-2, 1, false}, {0, 0.5, false}, {1, 0, true}, {-0.25, 0, true}, {0, 0, true}}

// testGemm compares Gemm with refGemm within gemmBound on every shape, all
// four transpose combinations and the (alpha, beta) pairs (all of them on
// the small edge shapes, one per transpose combination, in turn, on the
// drawn and large ones); checks that A and B are
// left alone and nothing is written around C; and checks Gemm on disjoint
// views of one buffer.
func testGemm(t *testing.T, be kernels.Backend, o Options) {
	r := newRand(1)
	shapes := append([][3]int(nil), gemmEdgeShapes...)
	for range gemmDrawn {
		shapes = append(shapes, [3]int{gemmSizes[r.IntN(len(gemmSizes))], gemmSizes[r.IntN(len(gemmSizes))], gemmSizes[r.IntN(len(gemmSizes))]})
	}
	turn, failed := 0, 0
	for si, s := range shapes {
		m, n, k := s[0], s[1], s[2]
		big := m*n*k > 1<<20
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			scalars := gemmScalars
			if si >= len(gemmEdgeShapes) || big {
				scalars = gemmScalars[turn%len(gemmScalars) : turn%len(gemmScalars)+1]
				turn++
			}
			for _, ab := range scalars {
				name := fmt.Sprintf("m=%d,n=%d,k=%d,transA=%v,transB=%v,alpha=%v,beta=%v", m, n, k, tr[0], tr[1], ab.alpha, ab.beta)
				a, b, c := normals(r, m*k, 1), normals(r, k*n, 1), normals(r, m*n, 1)
				if ab.nanC {
					name += ",C=NaN"
					c = filled(m*n, float32(math.NaN()))
				}
				if !checkGemm(t, be, o, name, tr[0], tr[1], m, n, k, ab.alpha, a, b, ab.beta, c) {
					failed++
					if failed == gemmFailuresShown {
						t.Fatalf("%d Gemm cases failed; the rest are skipped", failed)
					}
				}
			}
		}
	}

	// Disjoint views of one allocation: a gap, A, B, C, a gap.
	const m, n, k = 5, 7, 3
	const offA, offB, offC, end = 1, 1 + m*k, 1 + m*k + k*n, 1 + m*k + k*n + m*n
	host := normals(r, end+1, 1)
	all := load(t, be, host)
	a, b, c := be.View(all, offA, m*k), be.View(all, offB, k*n), be.View(all, offC, m*n)
	ok(t, "Gemm on views", be.Gemm(false, false, m, n, k, 1, a, b, 1, c))
	got := read(t, be, all)
	want, mag := refGemm(false, false, m, n, k, 1, widen(o.rounded(host[offA:offB])), widen(o.rounded(host[offB:offC])), 1, widen(host[offC:end]))
	checkWithin(t, "views: C", got[offC:end], want, gemmBound(k, mag, o.exact()))
	checkExact(t, "views: before C", got[:offC], host[:offC])
	checkExact(t, "views: after C", got[end:], host[end:])
}

// gemmFailuresShown is how many failing Gemm cases are reported before the
// check gives up on the rest.
const gemmFailuresShown = 8

// checkGemm runs one Gemm, C being a guarded view, compares it with
// refGemm, and reports whether the case passed.
func checkGemm(t *testing.T, be kernels.Backend, o Options, name string, transA, transB bool, m, n, k int, alpha float32, a, b []float32, beta float32, c []float32) bool {
	t.Helper()
	ab, bb, cb := load(t, be, a), load(t, be, b), loadGuarded(t, be, c)
	ok(t, name, be.Gemm(transA, transB, m, n, k, alpha, ab, bb, beta, cb.buf))
	want, mag := refGemm(transA, transB, m, n, k, float64(alpha), widen(o.rounded(a)), widen(o.rounded(b)), float64(beta), widen(c))
	got, bad := cb.readCount(t, name)
	bad += checkWithin(t, name+": C", got, want, gemmBound(k, mag, o.exact())) +
		checkExact(t, name+": A after", read(t, be, ab), a) +
		checkExact(t, name+": B after", read(t, be, bb), b)
	return bad == 0
}

// scaled returns f·x.
func scaled(x []float64, f float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = f * v
	}
	return y
}
