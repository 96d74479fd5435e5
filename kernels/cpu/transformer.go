package cpu

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.TransformerOps = (*Backend)(nil)

// The tanh form's constants, √(2/π) and 0.044715 (the erf form's are
// gelu.go's).
const (
	sqrt2OverPi = 0.79788456080286535588
	geluCubic   = 0.044715
)

// Gelu: see kernels.TransformerOps. The erf form in float32 (gelu.go: erf
// within 1.5e-7, as PyTorch's vectorised CPU GELU; AVX2 where the CPU has
// it), the tanh form per value in float64, rounded once.
func (be *Backend) Gelu(y, x kernels.Buffer, tanh bool) error {
	yd, xd := be.raw(y), be.data(x)
	if err := checkLen("Gelu", "y", len(yd), len(xd)); err != nil {
		return err
	}
	be.output(yd)
	if !tanh {
		geluFast(yd, xd)
		return nil
	}
	for i, v := range xd {
		yd[i] = float32(geluTanh(float64(v)))
	}
	return nil
}

// GeluGrad: see kernels.TransformerOps.
func (be *Backend) GeluGrad(dx, dy, x kernels.Buffer, tanh bool) error {
	dxd, dyd, xd := be.raw(dx), be.data(dy), be.data(x)
	if err := firstError(
		checkLen("GeluGrad", "dy", len(dyd), len(xd)),
		checkLen("GeluGrad", "dx", len(dxd), len(xd)),
	); err != nil {
		return err
	}
	be.output(dxd)
	if !tanh {
		geluGradFast(dxd, dyd, xd)
		return nil
	}
	for i, v := range xd {
		dxd[i] = float32(float64(dyd[i]) * geluTanhGrad(float64(v)))
	}
	return nil
}

func geluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(sqrt2OverPi*(x+geluCubic*x*x*x)))
}

func geluTanhGrad(x float64) float64 {
	t := math.Tanh(sqrt2OverPi * (x + geluCubic*x*x*x))
	return 0.5*(1+t) + 0.5*x*(1-t*t)*sqrt2OverPi*(1+3*geluCubic*x*x)
}

// LayerNorm: see kernels.TransformerOps. Each row's mean and variance in
// float64 (two passes: the mean, then the squared deviations), each sum in
// column order. Rows are taken lnRows at a time with one chain of
// additions each, so that the chains overlap instead of each waiting on
// the adder's latency; a row's results are the same, bit for bit, as one
// row at a time.
func (be *Backend) LayerNorm(y, mean, invstd, x, gamma, beta kernels.Buffer, rows, cols int, eps float32) error {
	yd, md, id, xd, g, b := be.raw(y), be.data(mean), be.data(invstd), be.data(x), be.data(gamma), be.data(beta)
	if err := firstError(
		kernels.CheckLayerNorm("cpu.LayerNorm", len(xd), rows, cols, []int{len(md), len(id)}, []int{len(g), len(b)}),
		checkLen("LayerNorm", "y", len(yd), len(xd)),
	); err != nil {
		return err
	}
	be.output(yd)
	for r := 0; r < rows; {
		n := min(lnRows, rows-r)
		var mu, inv [lnRows]float64
		if n == lnRows {
			mu, inv = layerNormStats4(xd[r*cols:(r+lnRows)*cols], cols, eps)
		} else {
			for k := range n {
				mu[k], inv[k] = layerNormStats(xd[(r+k)*cols:(r+k+1)*cols], eps)
			}
		}
		for k := range n {
			xs, ys := xd[(r+k)*cols:(r+k+1)*cols], yd[(r+k)*cols:(r+k+1)*cols]
			md[r+k], id[r+k] = float32(mu[k]), float32(inv[k])
			m, v := mu[k], inv[k]
			ys, g, b := ys[:len(xs)], g[:len(xs)], b[:len(xs)]
			for j, x := range xs {
				ys[j] = float32((float64(x)-m)*v*float64(g[j]) + float64(b[j]))
			}
		}
		r += n
	}
	return nil
}

// lnRows is how many rows layer norm's forward and gradient interleave.
const lnRows = 4

// layerNormStats returns a row's mean and 1/√(variance + eps) in float64.
func layerNormStats(xs []float32, eps float32) (mean, invstd float64) {
	var s float64
	for _, v := range xs {
		s += float64(v)
	}
	mu := s / float64(len(xs))
	s = 0
	for _, v := range xs {
		d := float64(v) - mu
		s += d * d
	}
	return mu, 1 / math.Sqrt(s/float64(len(xs))+float64(eps))
}

// layerNormStats4 is layerNormStats for four consecutive rows of x: the
// same sums in the same order, four chains at once.
func layerNormStats4(x []float32, cols int, eps float32) (mu, inv [lnRows]float64) {
	x0 := x[:cols]
	x1, x2, x3 := x[cols : 2*cols][:len(x0)], x[2*cols : 3*cols][:len(x0)], x[3*cols : 4*cols][:len(x0)]
	var s0, s1, s2, s3 float64
	for j, v := range x0 {
		s0 += float64(v)
		s1 += float64(x1[j])
		s2 += float64(x2[j])
		s3 += float64(x3[j])
	}
	n := float64(cols)
	m0, m1, m2, m3 := s0/n, s1/n, s2/n, s3/n
	s0, s1, s2, s3 = 0, 0, 0, 0
	for j, v := range x0 {
		d0 := float64(v) - m0
		d1 := float64(x1[j]) - m1
		d2 := float64(x2[j]) - m2
		d3 := float64(x3[j]) - m3
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	e := float64(eps)
	mu = [lnRows]float64{m0, m1, m2, m3}
	inv = [lnRows]float64{1 / math.Sqrt(s0/n+e), 1 / math.Sqrt(s1/n+e), 1 / math.Sqrt(s2/n+e), 1 / math.Sqrt(s3/n+e)}
	return mu, inv
}

// LayerNormGrad: see kernels.TransformerOps. The column sums (dγ, dβ)
// and each row's two means in float64, in a fixed order.
func (be *Backend) LayerNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma kernels.Buffer, rows, cols int) error {
	dxd, dg, db, dyd, xd, md, id, g := be.raw(dx), be.raw(dgamma), be.raw(dbeta), be.data(dy), be.data(x), be.data(mean), be.data(invstd), be.data(gamma)
	if err := firstError(
		kernels.CheckLayerNorm("cpu.LayerNormGrad", len(xd), rows, cols, []int{len(md), len(id)}, []int{len(g), len(dg), len(db)}),
		checkLen("LayerNormGrad", "dy", len(dyd), len(xd)),
		checkLen("LayerNormGrad", "dx", len(dxd), len(xd)),
	); err != nil {
		return err
	}
	be.output(dxd)
	be.output(dg)
	be.output(db)
	sg, sb := make([]float64, cols), make([]float64, cols)
	for r := 0; r < rows; {
		n := min(lnRows, rows-r)
		var mu, inv, mg, mgx [lnRows]float64
		for k := range n {
			mu[k], inv[k] = float64(md[r+k]), float64(id[r+k])
		}
		if n == lnRows {
			mg, mgx = layerNormGradSums4(sg, sb, xd[r*cols:(r+n)*cols], dyd[r*cols:(r+n)*cols], g, mu, inv)
		} else {
			for k := range n {
				mg[k], mgx[k] = layerNormGradSums(sg, sb, xd[(r+k)*cols:(r+k+1)*cols], dyd[(r+k)*cols:(r+k+1)*cols], g, mu[k], inv[k])
			}
		}
		for k := range n {
			xs, dys, dxs := xd[(r+k)*cols:(r+k+1)*cols], dyd[(r+k)*cols:(r+k+1)*cols], dxd[(r+k)*cols:(r+k+1)*cols]
			m, v, a, c := mu[k], inv[k], mg[k]/float64(cols), mgx[k]/float64(cols)
			dys, dxs, g := dys[:len(xs)], dxs[:len(xs)], g[:len(xs)]
			for j, x := range xs {
				xh := (float64(x) - m) * v
				dxs[j] = float32(v * (float64(g[j])*float64(dys[j]) - a - xh*c))
			}
		}
		r += n
	}
	for j := range cols {
		dg[j], db[j] = float32(sg[j]), float32(sb[j])
	}
	return nil
}

// layerNormGradSums adds one row's terms to the column sums sg (dγ) and
// sb (dβ) and returns the row's sums of γ·dy and γ·dy·x̂, each in column
// order.
func layerNormGradSums(sg, sb []float64, xs, dys, g []float32, mu, inv float64) (mg, mgx float64) {
	sg, sb, dys, g = sg[:len(xs)], sb[:len(xs)], dys[:len(xs)], g[:len(xs)]
	for j, v := range xs {
		xh := (float64(v) - mu) * inv
		d := float64(dys[j])
		sg[j] += d * xh
		sb[j] += d
		gj := float64(g[j]) * d
		mg += gj
		mgx += gj * xh
	}
	return mg, mgx
}

// layerNormGradSums4 is layerNormGradSums for four consecutive rows (x
// and dy hold them): each column sum takes the rows in order, each row's
// sums the columns in order, as four calls of layerNormGradSums would.
func layerNormGradSums4(sg, sb []float64, x, dy, g []float32, mu, inv [lnRows]float64) (mg, mgx [lnRows]float64) {
	cols := len(g)
	x0 := x[:cols]
	x1, x2, x3 := x[cols : 2*cols][:len(x0)], x[2*cols : 3*cols][:len(x0)], x[3*cols : 4*cols][:len(x0)]
	d0s, d1s, d2s, d3s := dy[:cols][:len(x0)], dy[cols : 2*cols][:len(x0)], dy[2*cols : 3*cols][:len(x0)], dy[3*cols : 4*cols][:len(x0)]
	sg, sb = sg[:len(x0)], sb[:len(x0)]
	var a0, a1, a2, a3, c0, c1, c2, c3 float64
	for j, v := range x0 {
		gj := float64(g[j])
		h0 := (float64(v) - mu[0]) * inv[0]
		h1 := (float64(x1[j]) - mu[1]) * inv[1]
		h2 := (float64(x2[j]) - mu[2]) * inv[2]
		h3 := (float64(x3[j]) - mu[3]) * inv[3]
		d0, d1, d2, d3 := float64(d0s[j]), float64(d1s[j]), float64(d2s[j]), float64(d3s[j])
		sg[j] = sg[j] + d0*h0 + d1*h1 + d2*h2 + d3*h3
		sb[j] = sb[j] + d0 + d1 + d2 + d3
		g0, g1, g2, g3 := gj*d0, gj*d1, gj*d2, gj*d3
		a0 += g0
		a1 += g1
		a2 += g2
		a3 += g3
		c0 += g0 * h0
		c1 += g1 * h1
		c2 += g2 * h2
		c3 += g3 * h3
	}
	return [lnRows]float64{a0, a1, a2, a3}, [lnRows]float64{c0, c1, c2, c3}
}

// Dropout: see kernels.TransformerOps. y = x·scale in float32 where the
// element is kept.
func (be *Backend) Dropout(y, x, keys kernels.Buffer, rows, cols int, salt, threshold uint32, scale float32) error {
	yd, xd, kd := be.raw(y), be.data(x), be.data(keys)
	if err := firstError(
		checkMatrix("Dropout", "x", len(xd), rows, cols),
		checkLen("Dropout", "y", len(yd), len(xd)),
		checkLen("Dropout", "keys", len(kd), rows),
	); err != nil {
		return err
	}
	be.output(yd)
	for r := range rows {
		key := math.Float32bits(kd[r])
		xs, ys := xd[r*cols:(r+1)*cols], yd[r*cols:(r+1)*cols]
		for j, v := range xs {
			if kernels.DropoutKeep(key, salt, uint32(j), threshold) {
				ys[j] = v * scale
			} else {
				ys[j] = 0
			}
		}
	}
	return nil
}
