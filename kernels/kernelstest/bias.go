package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// matrixShapes are the (rows, cols) of the row-wise ops: empty either way,
// 1×1, odd sizes, sizes past a GPU block (257 rows, 129 columns), and many
// rows of few columns, which a GPU reduces in two stages.
var matrixShapes = [][2]int{{0, 0}, {0, 3}, {3, 0}, {1, 1}, {1, 9}, {5, 7}, {64, 10}, {257, 129}, {1000, 37}, {4099, 1}}

// testAddBias compares AddBias with x[i,j] + bias[j] in float64, within
// addBiasBound, and checks that bias is left alone and nothing is written
// around x.
func testAddBias(t *testing.T, be kernels.Backend) {
	r := newRand(2)
	for _, s := range matrixShapes {
		rows, cols := s[0], s[1]
		name := fmt.Sprintf("rows=%d,cols=%d", rows, cols)
		x, bias := normals(r, rows*cols, 1), normals(r, cols, 1)
		xb, bb := loadGuarded(t, be, x), load(t, be, bias)
		ok(t, name, be.AddBias(xb.buf, bb, rows, cols))
		want, bound := make([]float64, rows*cols), make([]float64, rows*cols)
		for i := range rows {
			for j := range cols {
				v, b := float64(x[i*cols+j]), float64(bias[j])
				want[i*cols+j] = v + b
				bound[i*cols+j] = addBiasBound(v, b)
			}
		}
		checkWithin(t, name+": x", xb.read(t, name), want, bound)
		checkExact(t, name+": bias after", read(t, be, bb), bias)
	}
}

// testSumRows compares SumRows with beta·dst[j] + Σ_i x[i,j] in float64,
// within sumRowsBound, for beta 0, 1 and 0.5; beta == 0 must overwrite a
// dst full of NaN. x must be left alone and nothing written around dst.
func testSumRows(t *testing.T, be kernels.Backend) {
	r := newRand(3)
	for _, s := range matrixShapes {
		rows, cols := s[0], s[1]
		for _, beta := range []float32{0, 1, 0.5} {
			name := fmt.Sprintf("rows=%d,cols=%d,beta=%v", rows, cols, beta)
			x, dst := normals(r, rows*cols, 1), normals(r, cols, 1)
			if beta == 0 {
				dst = filled(cols, float32(math.NaN()))
			}
			xb, db := load(t, be, x), loadGuarded(t, be, dst)
			ok(t, name, be.SumRows(db.buf, xb, rows, cols, beta))
			want, bound := make([]float64, cols), make([]float64, cols)
			for j := range cols {
				var sum, abs float64
				if beta != 0 {
					sum = float64(beta) * float64(dst[j])
					abs = math.Abs(sum)
				}
				for i := range rows {
					v := float64(x[i*cols+j])
					sum += v
					abs += math.Abs(v)
				}
				want[j], bound[j] = sum, sumRowsBound(rows, abs)
			}
			checkWithin(t, name+": dst", db.read(t, name), want, bound)
			checkExact(t, name+": x after", read(t, be, xb), x)
		}
	}
}
