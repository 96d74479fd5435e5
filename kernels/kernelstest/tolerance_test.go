package kernelstest

import (
	"math"
	"testing"
)

// The bounds in tolerance.go must admit what a correct backend computes in
// float32 in another order than the reference (tiles, two-stage reductions,
// fused multiply-adds, TF32 inputs under Options.GemmRelTol), and reject a
// result that lost a term or read a wrong element. These tests play both.

// outside counts the elements of got outside want ± bound.
func outside(got []float32, want, bound []float64) int {
	n := 0
	for i := range got {
		if !(math.Abs(float64(got[i])-want[i]) <= bound[i]) {
			n++
		}
	}
	return n
}

// tf32 rounds x to TF32 (10 explicit mantissa bits), to nearest even.
func tf32(x float32) float32 {
	b := math.Float32bits(x)
	b += 0xfff + (b>>13)&1
	return math.Float32frombits(b &^ 0x1fff)
}

// tiledGemm is C = alpha·A·B + beta·C (no transposes) as a GPU kernel
// might compute it: k in tiles of 32, each tile's products summed with
// float32 fused multiply-adds into its own partial sum, the partials added
// in order; round rounds each input first (identity or tf32). skip, if in
// [0, k), leaves that term out.
func tiledGemm(m, n, k int, alpha float32, a, b []float32, beta float32, c []float32, round func(float32) float32, skip int) []float32 {
	out := make([]float32, m*n)
	for i := range m {
		for j := range n {
			var acc float32
			for l0 := 0; l0 < k; l0 += 32 {
				var part float32
				for l := l0; l < min(l0+32, k); l++ {
					if l == skip {
						continue
					}
					part = float32(math.FMA(float64(round(a[i*k+l])), float64(round(b[l*n+j])), float64(part)))
				}
				acc += part
			}
			v := alpha * acc
			if beta != 0 {
				v = float32(math.FMA(float64(beta), float64(c[i*n+j]), float64(v)))
			}
			out[i*n+j] = v
		}
	}
	return out
}

func TestGemmBoundAdmitsOtherOrdersAndRejectsLostTerms(t *testing.T) {
	r := newRand(100)
	for _, s := range [][3]int{{7, 5, 1}, {8, 9, 17}, {9, 11, 33}, {13, 6, 129}, {5, 4, 300}} {
		m, n, k := s[0], s[1], s[2]
		a, b, c := normals(r, m*k, 1), normals(r, k*n, 1), normals(r, m*n, 1)
		const alpha, beta = -0.75, 0.5
		want, mag := refGemm(false, false, m, n, k, alpha, widen(a), widen(b), beta, widen(c))
		ident := func(x float32) float32 { return x }
		fp32, tf := Options{}, Options{GemmRelTol: TF32GemmRelTol}

		if bad := outside(tiledGemm(m, n, k, alpha, a, b, beta, c, ident, -1), want, gemmBound(k, mag, fp32)); bad != 0 {
			t.Errorf("k=%d: tiled float32 with FMA: %d elements outside the FP32 bound", k, bad)
		}
		if bad := outside(tiledGemm(m, n, k, alpha, a, b, beta, c, tf32, -1), want, gemmBound(k, mag, tf)); bad != 0 {
			t.Errorf("k=%d: TF32 inputs: %d elements outside the TF32 bound", k, bad)
		}
		if bad := outside(tiledGemm(m, n, k, alpha, a, b, beta, c, tf32, -1), want, gemmBound(k, mag, fp32)); bad == 0 && k > 1 {
			t.Errorf("k=%d: TF32 inputs pass the FP32 bound: it cannot tell TF32 from FP32", k)
		}
		// A lost term: every element lacks one product of size ~1. Under
		// the TF32 bound that is only reliably visible for small k (the
		// bound grows with Σ|terms|, a lost term does not).
		for _, o := range []Options{fp32, tf} {
			if o.GemmRelTol > 0 && k >= 32 {
				continue
			}
			lost := tiledGemm(m, n, k, alpha, a, b, beta, c, ident, k/2)
			if bad := outside(lost, want, gemmBound(k, mag, o)); bad < m*n*3/4 {
				t.Errorf("k=%d, GemmRelTol=%v: a lost term is caught in only %d of %d elements", k, o.GemmRelTol, bad, m*n)
			}
		}
		// A wrong element: C[0,0] computed from row 1 of A.
		wrong := tiledGemm(m, n, k, alpha, a, b, beta, c, ident, -1)
		wrong[0] = tiledGemm(m, n, k, alpha, append(clone(a[k:2*k]), a[k:]...), b, beta, c, ident, -1)[0]
		if bad := outside(wrong[:1], want[:1], gemmBound(k, mag, tf)[:1]); bad != 1 {
			t.Errorf("k=%d: an element read from the wrong row passes the TF32 bound", k)
		}
	}
}

func TestSumRowsBoundAdmitsTwoStagesAndRejectsLostRow(t *testing.T) {
	r := newRand(101)
	const rows, cols = 1000, 37
	x := normals(r, rows*cols, 1)
	want, bound := make([]float64, cols), make([]float64, cols)
	twoStage, lost := make([]float32, cols), make([]float32, cols)
	for j := range cols {
		var sum, abs float64
		for i := range rows {
			sum += float64(x[i*cols+j])
			abs += math.Abs(float64(x[i*cols+j]))
		}
		want[j], bound[j] = sum, sumRowsBound(rows, abs)
		// Stage one: blocks of 256 rows, each a float32 tree; stage two:
		// the block sums in order.
		for i0 := 0; i0 < rows; i0 += 256 {
			part := make([]float32, 0, 256)
			for i := i0; i < min(i0+256, rows); i++ {
				part = append(part, x[i*cols+j])
			}
			for len(part) > 1 {
				half := (len(part) + 1) / 2
				for i := 0; i+half < len(part); i++ {
					part[i] += part[i+half]
				}
				part = part[:half]
			}
			twoStage[j] += part[0]
		}
		lost[j] = twoStage[j] - x[(rows-1)*cols+j]
	}
	if bad := outside(twoStage, want, bound); bad != 0 {
		t.Errorf("a two-stage float32 reduction: %d of %d columns outside the bound", bad, cols)
	}
	if bad := outside(lost, want, bound); bad < cols*3/4 {
		t.Errorf("a lost row is caught in only %d of %d columns", bad, cols)
	}
}

func TestDotBoundAdmitsFloat32(t *testing.T) {
	r := newRand(102)
	const n = 100003
	x, y := normals(r, n, 1), normals(r, n, 1)
	var want, abs float64
	var seq float32
	for i := range n {
		p := float64(x[i]) * float64(y[i])
		want += p
		abs += math.Abs(p)
		seq = float32(math.FMA(float64(x[i]), float64(y[i]), float64(seq)))
	}
	if math.Abs(float64(seq)-want) > dotBound(n, abs) {
		t.Errorf("a sequential float32 dot (%v) is outside %v ± %v", seq, want, dotBound(n, abs))
	}
	last := seq - x[n-1]*y[n-1]
	if math.Abs(float64(last)-want) <= dotBound(n, abs) && math.Abs(float64(x[n-1]*y[n-1])) > 2*dotBound(n, abs) {
		t.Errorf("a dot without its last term passes")
	}
}
