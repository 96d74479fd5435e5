package cpu

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.SyncNormOps = (*Backend)(nil)

// BatchNormSums: see kernels.SyncNormOps.
func (be *Backend) BatchNormSums(sums, x kernels.Buffer, n, c, hw int) error {
	sd, xd := be.raw(sums), be.data(x)
	if err := firstError(kernels.CheckNorm("cpu.BatchNormSums", len(xd), n, c, hw), checkLen("BatchNormSums", "sums", len(sd), 2*c)); err != nil {
		return err
	}
	be.output(sd)
	for ch := range c {
		var s, q float64
		for i := range n {
			for _, v := range xd[(i*c+ch)*hw : (i*c+ch+1)*hw] {
				s += float64(v)
				q += float64(v) * float64(v)
			}
		}
		sd[ch], sd[c+ch] = float32(s), float32(q)
	}
	return nil
}

// BatchNormTrainSums: see kernels.SyncNormOps.
func (be *Backend) BatchNormTrainSums(y, mean, invstd, runMean, runVar, x, gamma, beta, sums kernels.Buffer, count, n, c, hw int, eps, momentum float32) error {
	yd, md, id, rm, rv, xd, g, b, sd := be.raw(y), be.data(mean), be.data(invstd), be.data(runMean), be.data(runVar), be.data(x), be.data(gamma), be.data(beta), be.data(sums)
	if err := firstError(
		kernels.CheckNorm("cpu.BatchNormTrainSums", len(xd), n, c, hw, len(md), len(id), len(rm), len(rv), len(g), len(b)),
		checkLen("BatchNormTrainSums", "y", len(yd), len(xd)),
		checkLen("BatchNormTrainSums", "sums", len(sd), 2*c),
	); err != nil {
		return err
	}
	be.output(yd)
	cnt := math.Max(float64(count), 1)
	m := float64(momentum)
	for ch := range c {
		mu := float64(sd[ch]) / cnt
		v := math.Max(float64(sd[c+ch])/cnt-mu*mu, 0)
		inv := 1 / math.Sqrt(v+float64(eps))
		md[ch], id[ch] = float32(mu), float32(inv)
		unb := v
		if count > 1 {
			unb = v * cnt / (cnt - 1)
		}
		rm[ch] = float32((1-m)*float64(rm[ch]) + m*mu)
		rv[ch] = float32((1-m)*float64(rv[ch]) + m*unb)
		scale := float64(g[ch]) * inv
		shift := float64(b[ch]) - scale*mu
		for i := range n {
			at := (i*c + ch) * hw
			for p, xv := range xd[at : at+hw] {
				yd[at+p] = float32(scale*float64(xv) + shift)
			}
		}
	}
	return nil
}

// BatchNormGradSums: see kernels.SyncNormOps.
func (be *Backend) BatchNormGradSums(sums, dy, x, mean, invstd kernels.Buffer, n, c, hw int) error {
	sd, dyd, xd, md, id := be.raw(sums), be.data(dy), be.data(x), be.data(mean), be.data(invstd)
	if err := firstError(
		kernels.CheckNorm("cpu.BatchNormGradSums", len(xd), n, c, hw, len(md), len(id)),
		checkLen("BatchNormGradSums", "dy", len(dyd), len(xd)),
		checkLen("BatchNormGradSums", "sums", len(sd), 2*c),
	); err != nil {
		return err
	}
	be.output(sd)
	for ch := range c {
		mu, inv := float64(md[ch]), float64(id[ch])
		var a, q float64
		for i := range n {
			at := (i*c + ch) * hw
			for p, xv := range xd[at : at+hw] {
				d := float64(dyd[at+p])
				a += d
				q += d * (float64(xv) - mu) * inv
			}
		}
		sd[ch], sd[c+ch] = float32(a), float32(q)
	}
	return nil
}

// BatchNormGradInput: see kernels.SyncNormOps.
func (be *Backend) BatchNormGradInput(dx, dy, x, mean, invstd, gamma, sums kernels.Buffer, count, n, c, hw int) error {
	dxd, dyd, xd, md, id, g, sd := be.raw(dx), be.data(dy), be.data(x), be.data(mean), be.data(invstd), be.data(gamma), be.data(sums)
	if err := firstError(
		kernels.CheckNorm("cpu.BatchNormGradInput", len(xd), n, c, hw, len(md), len(id), len(g)),
		checkLen("BatchNormGradInput", "dy", len(dyd), len(xd)),
		checkLen("BatchNormGradInput", "dx", len(dxd), len(xd)),
		checkLen("BatchNormGradInput", "sums", len(sd), 2*c),
	); err != nil {
		return err
	}
	be.output(dxd)
	cnt := math.Max(float64(count), 1)
	for ch := range c {
		mu, inv := float64(md[ch]), float64(id[ch])
		k1, sdy, sdyx := float64(g[ch])*inv, float64(sd[ch])/cnt, float64(sd[c+ch])/cnt
		for i := range n {
			at := (i*c + ch) * hw
			for p, xv := range xd[at : at+hw] {
				xh := (float64(xv) - mu) * inv
				dxd[at+p] = float32(k1 * (float64(dyd[at+p]) - sdy - xh*sdyx))
			}
		}
	}
	return nil
}
