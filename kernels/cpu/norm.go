package cpu

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.NormOps = (*Backend)(nil)

// BatchNormTrain: see kernels.NormOps. Sums in float64.
func (be *Backend) BatchNormTrain(y, mean, invstd, runMean, runVar, x, gamma, beta kernels.Buffer, n, c, hw int, eps, momentum float32) error {
	yd, md, id, rm, rv, xd, g, b := be.data(y), be.data(mean), be.data(invstd), be.data(runMean), be.data(runVar), be.data(x), be.data(gamma), be.data(beta)
	if err := firstError(
		kernels.CheckNorm("cpu.BatchNormTrain", len(xd), n, c, hw, len(md), len(id), len(rm), len(rv), len(g), len(b)),
		checkLen("BatchNormTrain", "y", len(yd), len(xd)),
	); err != nil {
		return err
	}
	cnt := float64(n * hw)
	for ch := range c {
		var s, ss float64
		for i := range n {
			for _, v := range xd[(i*c+ch)*hw : (i*c+ch+1)*hw] {
				s += float64(v)
			}
		}
		mu := s / math.Max(cnt, 1)
		for i := range n {
			for _, v := range xd[(i*c+ch)*hw : (i*c+ch+1)*hw] {
				d := float64(v) - mu
				ss += d * d
			}
		}
		v := ss / math.Max(cnt, 1)
		inv := 1 / math.Sqrt(v+float64(eps))
		md[ch], id[ch] = float32(mu), float32(inv)
		unbiased := v
		if cnt > 1 {
			unbiased = ss / (cnt - 1)
		}
		m := float64(momentum)
		rm[ch] = float32((1-m)*float64(rm[ch]) + m*mu)
		rv[ch] = float32((1-m)*float64(rv[ch]) + m*unbiased)
		scale, shift := float64(g[ch])*inv, float64(b[ch])-float64(g[ch])*inv*mu
		for i := range n {
			xs, ys := xd[(i*c+ch)*hw:(i*c+ch+1)*hw], yd[(i*c+ch)*hw:(i*c+ch+1)*hw]
			for k, v := range xs {
				ys[k] = float32(scale*float64(v) + shift)
			}
		}
	}
	return nil
}

// BatchNormInfer: see kernels.NormOps.
func (be *Backend) BatchNormInfer(y, x, runMean, runVar, gamma, beta kernels.Buffer, n, c, hw int, eps float32) error {
	yd, xd, rm, rv, g, b := be.data(y), be.data(x), be.data(runMean), be.data(runVar), be.data(gamma), be.data(beta)
	if err := firstError(
		kernels.CheckNorm("cpu.BatchNormInfer", len(xd), n, c, hw, len(rm), len(rv), len(g), len(b)),
		checkLen("BatchNormInfer", "y", len(yd), len(xd)),
	); err != nil {
		return err
	}
	for ch := range c {
		inv := 1 / math.Sqrt(float64(rv[ch])+float64(eps))
		scale, shift := float64(g[ch])*inv, float64(b[ch])-float64(g[ch])*inv*float64(rm[ch])
		for i := range n {
			xs, ys := xd[(i*c+ch)*hw:(i*c+ch+1)*hw], yd[(i*c+ch)*hw:(i*c+ch+1)*hw]
			for k, v := range xs {
				ys[k] = float32(scale*float64(v) + shift)
			}
		}
	}
	return nil
}

// BatchNormGrad: see kernels.NormOps. Sums in float64.
func (be *Backend) BatchNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma kernels.Buffer, n, c, hw int) error {
	dxd, dg, db, dyd, xd, md, id, g := be.data(dx), be.data(dgamma), be.data(dbeta), be.data(dy), be.data(x), be.data(mean), be.data(invstd), be.data(gamma)
	if err := firstError(
		kernels.CheckNorm("cpu.BatchNormGrad", len(xd), n, c, hw, len(dg), len(db), len(md), len(id), len(g)),
		checkLen("BatchNormGrad", "dy", len(dyd), len(xd)),
		checkLen("BatchNormGrad", "dx", len(dxd), len(xd)),
	); err != nil {
		return err
	}
	cnt := math.Max(float64(n*hw), 1)
	for ch := range c {
		mu, inv := float64(md[ch]), float64(id[ch])
		var sdy, sdyx float64
		for i := range n {
			xs, ds := xd[(i*c+ch)*hw:(i*c+ch+1)*hw], dyd[(i*c+ch)*hw:(i*c+ch+1)*hw]
			for k, v := range xs {
				sdy += float64(ds[k])
				sdyx += float64(ds[k]) * (float64(v) - mu) * inv
			}
		}
		dg[ch], db[ch] = float32(sdyx), float32(sdy)
		k1 := float64(g[ch]) * inv
		for i := range n {
			xs, ds, out := xd[(i*c+ch)*hw:(i*c+ch+1)*hw], dyd[(i*c+ch)*hw:(i*c+ch+1)*hw], dxd[(i*c+ch)*hw:(i*c+ch+1)*hw]
			for k, v := range xs {
				xh := (float64(v) - mu) * inv
				out[k] = float32(k1 * (float64(ds[k]) - sdy/cnt - xh*sdyx/cnt))
			}
		}
	}
	return nil
}
