package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// gemmShapes are the (m, n, k) Gemm is checked on: empty in every dimension,
// vectors, odd sizes, and sizes past a blocking boundary.
var gemmShapes = [][3]int{
	{0, 0, 0}, {0, 3, 4}, {3, 0, 4}, {3, 4, 0},
	{1, 1, 1}, {1, 7, 3}, {7, 1, 5}, {5, 6, 1},
	{16, 16, 16}, {17, 33, 9}, {33, 17, 65}, {64, 10, 130},
}

// gemmScalars are the (alpha, beta) pairs: plain product, both scalars
// awkward, accumulate, and alpha == 0.
var gemmScalars = [][2]float32{{1, 0}, {0.5, -1.5}, {-2, 1}, {0, 0.5}}

// testGemm compares Gemm with refGemm for every shape, all four transpose
// combinations and every (alpha, beta), within gamma(k+3)·magnitude per
// element. It also checks that A and B are left alone, that beta == 0
// overwrites a C full of NaN (the BLAS convention: C is then not read), and
// that Gemm works on disjoint views of one buffer.
func testGemm(t *testing.T, be kernels.Backend) {
	r := newRand(1)
	for _, s := range gemmShapes {
		m, n, k := s[0], s[1], s[2]
		for _, tr := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			for _, ab := range gemmScalars {
				name := fmt.Sprintf("m=%d,n=%d,k=%d,transA=%v,transB=%v,alpha=%v,beta=%v", m, n, k, tr[0], tr[1], ab[0], ab[1])
				a, b, c := normals(r, m*k, 1), normals(r, k*n, 1), normals(r, m*n, 1)
				checkGemm(t, be, name, tr[0], tr[1], m, n, k, ab[0], a, b, ab[1], c)
			}
		}
	}

	// beta == 0: C's old contents, even NaN, must not show through.
	for _, s := range [][3]int{{3, 4, 5}, {3, 4, 0}} {
		m, n, k := s[0], s[1], s[2]
		nan := filled(m*n, float32(math.NaN()))
		checkGemm(t, be, fmt.Sprintf("m=%d,n=%d,k=%d,beta=0,C=NaN", m, n, k), false, false, m, n, k, 1, normals(r, m*k, 1), normals(r, k*n, 1), 0, nan)
		checkGemm(t, be, fmt.Sprintf("m=%d,n=%d,k=%d,alpha=0,beta=0,C=NaN", m, n, k), false, true, m, n, k, 0, normals(r, m*k, 1), normals(r, k*n, 1), 0, nan)
	}

	// Disjoint views of one allocation: a gap, A, B, C, a gap.
	const m, n, k = 5, 7, 3
	const offA, offB, offC, end = 1, 1 + m*k, 1 + m*k + k*n, 1 + m*k + k*n + m*n
	host := normals(r, end+1, 1)
	all := load(t, be, host)
	a, b, c := be.View(all, offA, m*k), be.View(all, offB, k*n), be.View(all, offC, m*n)
	ok(t, "Gemm on views", be.Gemm(false, false, m, n, k, 1, a, b, 1, c))
	got := read(t, be, all)
	want, mag := refGemm(false, false, m, n, k, 1, widen(host[offA:offB]), widen(host[offB:offC]), 1, widen(host[offC:end]))
	checkWithin(t, "views: C", got[offC:end], want, scaled(mag, gamma(k+3)))
	checkExact(t, "views: before C", got[:offC], host[:offC])
	checkExact(t, "views: after C", got[end:], host[end:])
}

// checkGemm runs one Gemm on fresh buffers and compares it with refGemm.
func checkGemm(t *testing.T, be kernels.Backend, name string, transA, transB bool, m, n, k int, alpha float32, a, b []float32, beta float32, c []float32) {
	t.Helper()
	ab, bb, cb := load(t, be, a), load(t, be, b), load(t, be, c)
	ok(t, name, be.Gemm(transA, transB, m, n, k, alpha, ab, bb, beta, cb))
	want, mag := refGemm(transA, transB, m, n, k, float64(alpha), widen(a), widen(b), float64(beta), widen(c))
	checkWithin(t, name+": C", read(t, be, cb), want, scaled(mag, gamma(k+3)))
	checkExact(t, name+": A after", read(t, be, ab), a)
	checkExact(t, name+": B after", read(t, be, bb), b)
}

// scaled returns f·x.
func scaled(x []float64, f float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = f * v
	}
	return y
}
