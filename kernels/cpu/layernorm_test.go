package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// layerNormRef is layer norm's forward and gradient one row at a time,
// as the backend computed them before it interleaved rows: the
// definition of the bits LayerNorm and LayerNormGrad must give.
func layerNormRef(x, g, b, dy []float32, rows, cols int, eps float32) (y, mean, inv, dx, dg, db []float32) {
	y, mean, inv, dx = make([]float32, len(x)), make([]float32, rows), make([]float32, rows), make([]float32, len(x))
	for r := range rows {
		xs := x[r*cols : (r+1)*cols]
		var s float64
		for _, v := range xs {
			s += float64(v)
		}
		mu := s / float64(cols)
		s = 0
		for _, v := range xs {
			d := float64(v) - mu
			s += d * d
		}
		iv := 1 / math.Sqrt(s/float64(cols)+float64(eps))
		mean[r], inv[r] = float32(mu), float32(iv)
		for j, v := range xs {
			y[r*cols+j] = float32((float64(v)-mu)*iv*float64(g[j]) + float64(b[j]))
		}
	}
	sg, sb := make([]float64, cols), make([]float64, cols)
	for r := range rows {
		xs, dys := x[r*cols:(r+1)*cols], dy[r*cols:(r+1)*cols]
		mu, iv := float64(mean[r]), float64(inv[r])
		var mg, mgx float64
		for j, v := range xs {
			xh := (float64(v) - mu) * iv
			d := float64(dys[j])
			sg[j] += d * xh
			sb[j] += d
			gj := float64(g[j]) * d
			mg += gj
			mgx += gj * xh
		}
		mg /= float64(cols)
		mgx /= float64(cols)
		for j, v := range xs {
			xh := (float64(v) - mu) * iv
			dx[r*cols+j] = float32(iv * (float64(g[j])*float64(dys[j]) - mg - xh*mgx))
		}
	}
	dg, db = make([]float32, cols), make([]float32, cols)
	for j := range cols {
		dg[j], db[j] = float32(sg[j]), float32(sb[j])
	}
	return y, mean, inv, dx, dg, db
}

// TestLayerNormRows: layer norm taken lnRows rows at a time gives the
// bits of one row at a time, forward and gradient, for every row count
// (the rows left over after the groups included) and row widths from 1,
// with large values of both signs and rows whose terms cancel, so that a
// sum in another order differs.
func TestLayerNormRows(t *testing.T) {
	be := New()
	r := rand.New(rand.NewPCG(11, 12))
	for _, cols := range []int{1, 3, 128, 130} {
		for _, rows := range []int{1, 2, 3, 4, 5, 7, 8, 9, 13, 64} {
			x, dy := randn(r, rows*cols), randn(r, rows*cols)
			for k := range x { // large values of both signs, so that the sums' order shows
				x[k] *= 100
				switch r.IntN(4) {
				case 0:
					x[k], dy[k] = 1e20, 1e15
				case 1:
					x[k], dy[k] = -1e20, -1e15
				}
			}
			for row := 2; row < rows; row += 4 { // a row's terms cancel the one before
				copy(x[row*cols:(row+1)*cols], x[(row-1)*cols:row*cols])
				for j := range cols {
					dy[row*cols+j] = -dy[(row-1)*cols+j]
				}
			}
			g, b := randn(r, cols), randn(r, cols)
			want := [][]float32{}
			{
				y, m, i, dx, dg, db := layerNormRef(x, g, b, dy, rows, cols, 1e-5)
				want = append(want, y, m, i, dx, dg, db)
			}
			buf := func(v []float32) kernels.Buffer { return be.mustLoad(t, slices.Clone(v)) }
			xb, gb, bb, dyb := buf(x), buf(g), buf(b), buf(dy)
			yb, mb, ib, dxb := buf(make([]float32, len(x))), buf(make([]float32, rows)), buf(make([]float32, rows)), buf(make([]float32, len(x)))
			dgb, dbb := buf(make([]float32, cols)), buf(make([]float32, cols))
			if err := be.LayerNorm(yb, mb, ib, xb, gb, bb, rows, cols, 1e-5); err != nil {
				t.Fatal(err)
			}
			if err := be.LayerNormGrad(dxb, dgb, dbb, dyb, xb, mb, ib, gb, rows, cols); err != nil {
				t.Fatal(err)
			}
			for k, got := range []kernels.Buffer{yb, mb, ib, dxb, dgb, dbb} {
				name := []string{"y", "mean", "invstd", "dx", "dgamma", "dbeta"}[k]
				for e, v := range be.data(got) {
					if math.Float32bits(v) != math.Float32bits(want[k][e]) {
						t.Fatalf("%d×%d: %s[%d] = %v, one row at a time gives %v", rows, cols, name, e, v, want[k][e])
					}
				}
			}
		}
	}
}
