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
// float64 (two passes: the mean, then the squared deviations).
func (be *Backend) LayerNorm(y, mean, invstd, x, gamma, beta kernels.Buffer, rows, cols int, eps float32) error {
	yd, md, id, xd, g, b := be.raw(y), be.data(mean), be.data(invstd), be.data(x), be.data(gamma), be.data(beta)
	if err := firstError(
		kernels.CheckLayerNorm("cpu.LayerNorm", len(xd), rows, cols, []int{len(md), len(id)}, []int{len(g), len(b)}),
		checkLen("LayerNorm", "y", len(yd), len(xd)),
	); err != nil {
		return err
	}
	be.output(yd)
	for r := range rows {
		xs, ys := xd[r*cols:(r+1)*cols], yd[r*cols:(r+1)*cols]
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
		inv := 1 / math.Sqrt(s/float64(cols)+float64(eps))
		md[r], id[r] = float32(mu), float32(inv)
		for j, v := range xs {
			ys[j] = float32((float64(v)-mu)*inv*float64(g[j]) + float64(b[j]))
		}
	}
	return nil
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
	for r := range rows {
		xs, dys, dxs := xd[r*cols:(r+1)*cols], dyd[r*cols:(r+1)*cols], dxd[r*cols:(r+1)*cols]
		mu, inv := float64(md[r]), float64(id[r])
		var mg, mgx float64
		for j, v := range xs {
			xh := (float64(v) - mu) * inv
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
			xh := (float64(v) - mu) * inv
			dxs[j] = float32(inv * (float64(g[j])*float64(dys[j]) - mg - xh*mgx))
		}
	}
	for j := range cols {
		dg[j], db[j] = float32(sg[j]), float32(sb[j])
	}
	return nil
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
