package cpu

import (
	"math"
	"unsafe"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.NormOps = (*Backend)(nil)

// BatchNormTrain: see kernels.NormOps. Sums in float64, over four
// accumulators per channel (added up in a fixed order, so the result is
// the same on every run): one chain of float64 adds is latency bound.
func (be *Backend) BatchNormTrain(y, mean, invstd, runMean, runVar, x, gamma, beta kernels.Buffer, n, c, hw int, eps, momentum float32) error {
	return be.batchNormTrain("BatchNormTrain", false, y, mean, invstd, runMean, runVar, x, gamma, beta, n, c, hw, eps, momentum)
}

// NormRelu: see kernels.NormReluOps: where the library fuses the two.
func (be *Backend) NormRelu() bool {
	_, ok := be.lib.(NormReluLib)
	return ok
}

// BatchNormReluTrain: see kernels.NormReluOps. Without a library that
// fuses them, BatchNormTrain and then Relu's max(y, 0) in place, the
// same bits as the two ops.
func (be *Backend) BatchNormReluTrain(y, mean, invstd, runMean, runVar, x, gamma, beta kernels.Buffer, n, c, hw int, eps, momentum float32) error {
	return be.batchNormTrain("BatchNormReluTrain", true, y, mean, invstd, runMean, runVar, x, gamma, beta, n, c, hw, eps, momentum)
}

// batchNormTrain is BatchNormTrain, with the ReLU on its output where
// fuse says.
func (be *Backend) batchNormTrain(op string, fuse bool, y, mean, invstd, runMean, runVar, x, gamma, beta kernels.Buffer, n, c, hw int, eps, momentum float32) error {
	yd, md, id, rm, rv, xd, g, b := be.raw(y), be.data(mean), be.data(invstd), be.data(runMean), be.data(runVar), be.raw(x), be.data(gamma), be.data(beta)
	if err := firstError(
		kernels.CheckNorm("cpu."+op, len(xd), n, c, hw, len(md), len(id), len(rm), len(rv), len(g), len(b)),
		checkLen(op, "y", len(yd), len(xd)),
	); err != nil {
		return err
	}
	if be.lib != nil && n > 0 && hw > 0 && (!fuse || be.NormRelu()) {
		return be.libNormTrain(fuse, yd, md, id, rm, rv, xd, g, b, n, c, hw, eps, momentum)
	}
	if fuse {
		defer relu(yd, yd)
	}
	be.plain(xd)
	be.output(yd)
	cnt := float64(n * hw)
	for ch := range c {
		var s [4]float64
		for i := range n {
			sum4(&s, xd[(i*c+ch)*hw:(i*c+ch+1)*hw])
		}
		mu := ((s[0] + s[1]) + (s[2] + s[3])) / math.Max(cnt, 1)
		s = [4]float64{}
		for i := range n {
			sqDev4(&s, xd[(i*c+ch)*hw:(i*c+ch+1)*hw], mu)
		}
		ss := (s[0] + s[1]) + (s[2] + s[3])
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
			affine(yd[(i*c+ch)*hw:(i*c+ch+1)*hw], xd[(i*c+ch)*hw:(i*c+ch+1)*hw], scale, shift)
		}
	}
	return nil
}

// sum4 adds x into the four accumulators s: x[4j+r] into s[r].
func sum4(s *[4]float64, x []float32) {
	s0, s1, s2, s3 := s[0], s[1], s[2], s[3]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		q := x[i : i+4 : i+4]
		s0 += float64(q[0])
		s1 += float64(q[1])
		s2 += float64(q[2])
		s3 += float64(q[3])
	}
	for ; i < len(x); i++ {
		s0 += float64(x[i])
	}
	s[0], s[1], s[2], s[3] = s0, s1, s2, s3
}

// sqDev4 adds the squares of x − mu into the four accumulators s.
func sqDev4(s *[4]float64, x []float32, mu float64) {
	s0, s1, s2, s3 := s[0], s[1], s[2], s[3]
	i := 0
	for ; i+4 <= len(x); i += 4 {
		q := x[i : i+4 : i+4]
		d0, d1, d2, d3 := float64(q[0])-mu, float64(q[1])-mu, float64(q[2])-mu, float64(q[3])-mu
		s0 += d0 * d0
		s1 += d1 * d1
		s2 += d2 * d2
		s3 += d3 * d3
	}
	for ; i < len(x); i++ {
		d := float64(x[i]) - mu
		s0 += d * d
	}
	s[0], s[1], s[2], s[3] = s0, s1, s2, s3
}

// affine sets y = scale·x + shift, in float64, rounded once.
func affine(y, x []float32, scale, shift float64) {
	y = y[:len(x)]
	for k, v := range x {
		y[k] = float32(scale*float64(v) + shift)
	}
}

// BatchNormInfer: see kernels.NormOps.
func (be *Backend) BatchNormInfer(y, x, runMean, runVar, gamma, beta kernels.Buffer, n, c, hw int, eps float32) error {
	yd, xd, rm, rv, g, b := be.raw(y), be.raw(x), be.data(runMean), be.data(runVar), be.data(gamma), be.data(beta)
	if err := firstError(
		kernels.CheckNorm("cpu.BatchNormInfer", len(xd), n, c, hw, len(rm), len(rv), len(g), len(b)),
		checkLen("BatchNormInfer", "y", len(yd), len(xd)),
	); err != nil {
		return err
	}
	if be.lib != nil && n > 0 && hw > 0 {
		xl := be.layoutOf(xd)
		be.output(yd)
		yl, err := be.lib.NormInfer(yd, xd, rm, rv, g, b, xl, n, c, hw, eps)
		be.setLayout(yd, yl)
		return err
	}
	be.plain(xd)
	be.output(yd)
	for ch := range c {
		inv := 1 / math.Sqrt(float64(rv[ch])+float64(eps))
		scale, shift := float64(g[ch])*inv, float64(b[ch])-float64(g[ch])*inv*float64(rm[ch])
		for i := range n {
			affine(yd[(i*c+ch)*hw:(i*c+ch+1)*hw], xd[(i*c+ch)*hw:(i*c+ch+1)*hw], scale, shift)
		}
	}
	return nil
}

// BatchNormGrad: see kernels.NormOps. Sums in float64, over four
// accumulators each (as BatchNormTrain); Σ dy·x̂ is summed as Σ dy·(x − μ)
// and scaled by invstd once.
func (be *Backend) BatchNormGrad(dx, dgamma, dbeta, dy, x, mean, invstd, gamma kernels.Buffer, n, c, hw int) error {
	return be.batchNormGrad("BatchNormGrad", nil, dx, dgamma, dbeta, dy, x, mean, invstd, gamma, n, c, hw)
}

// BatchNormReluGrad: see kernels.NormReluOps. Without a library that
// fuses them, dx = dy where y > 0, else 0 (ReluGrad), then
// BatchNormGrad from dx in place.
func (be *Backend) BatchNormReluGrad(dx, dgamma, dbeta, dy, y, x, mean, invstd, gamma kernels.Buffer, n, c, hw int) error {
	if err := checkLen("BatchNormReluGrad", "y", y.Len(), x.Len()); err != nil {
		return err
	}
	return be.batchNormGrad("BatchNormReluGrad", y, dx, dgamma, dbeta, dy, x, mean, invstd, gamma, n, c, hw)
}

// batchNormGrad is BatchNormGrad, through the ReLU whose output is y
// where y is not nil.
func (be *Backend) batchNormGrad(op string, y, dx, dgamma, dbeta, dy, x, mean, invstd, gamma kernels.Buffer, n, c, hw int) error {
	dxd, dg, db, dyd, xd, md, id, g := be.raw(dx), be.data(dgamma), be.data(dbeta), be.raw(dy), be.raw(x), be.data(mean), be.data(invstd), be.data(gamma)
	if err := firstError(
		kernels.CheckNorm("cpu."+op, len(xd), n, c, hw, len(dg), len(db), len(md), len(id), len(g)),
		checkLen(op, "dy", len(dyd), len(xd)),
		checkLen(op, "dx", len(dxd), len(xd)),
	); err != nil {
		return err
	}
	fuse := y != nil
	if be.lib != nil && n > 0 && hw > 0 && (!fuse || be.NormRelu()) {
		return be.libNormGrad(fuse, dxd, dg, db, dyd, xd, md, id, g, n, c, hw)
	}
	if fuse {
		if err := be.ReluGrad(dx, dy, y); err != nil {
			return err
		}
		dyd = dxd
	}
	be.plain(dyd)
	be.plain(xd)
	be.output(dxd)
	cnt := math.Max(float64(n*hw), 1)
	for ch := range c {
		mu, inv := float64(md[ch]), float64(id[ch])
		var sdy, sdyx [4]float64
		for i := range n {
			lo, hi := (i*c+ch)*hw, (i*c+ch+1)*hw
			gradSums4(&sdy, &sdyx, dyd[lo:hi], xd[lo:hi], mu)
		}
		sumDy := (sdy[0] + sdy[1]) + (sdy[2] + sdy[3])
		sumDyx := ((sdyx[0] + sdyx[1]) + (sdyx[2] + sdyx[3])) * inv
		dg[ch], db[ch] = float32(sumDyx), float32(sumDy)
		// dx = k1·(dy − Σdy/N − (x − μ)·invstd·Σdy·x̂/N).
		k1, a, bx := float64(g[ch])*inv, sumDy/cnt, inv*sumDyx/cnt
		for i := range n {
			lo, hi := (i*c+ch)*hw, (i*c+ch+1)*hw
			out, ds, xs := dxd[lo:hi], dyd[lo:hi], xd[lo:hi]
			ds, xs = ds[:len(out)], xs[:len(out)]
			for k := range out {
				out[k] = float32(k1 * (float64(ds[k]) - a - (float64(xs[k])-mu)*bx))
			}
		}
	}
	return nil
}

// gradSums4 adds dy into sdy and dy·(x − mu) into sdyx, four accumulators
// each.
func gradSums4(sdy, sdyx *[4]float64, dy, x []float32, mu float64) {
	a0, a1, a2, a3 := sdy[0], sdy[1], sdy[2], sdy[3]
	b0, b1, b2, b3 := sdyx[0], sdyx[1], sdyx[2], sdyx[3]
	x = x[:len(dy)]
	i := 0
	for ; i+4 <= len(dy); i += 4 {
		d, v := dy[i:i+4:i+4], x[i:i+4:i+4]
		d0, d1, d2, d3 := float64(d[0]), float64(d[1]), float64(d[2]), float64(d[3])
		a0 += d0
		a1 += d1
		a2 += d2
		a3 += d3
		b0 += d0 * (float64(v[0]) - mu)
		b1 += d1 * (float64(v[1]) - mu)
		b2 += d2 * (float64(v[2]) - mu)
		b3 += d3 * (float64(v[3]) - mu)
	}
	for ; i < len(dy); i++ {
		d := float64(dy[i])
		a0 += d
		b0 += d * (float64(x[i]) - mu)
	}
	sdy[0], sdy[1], sdy[2], sdy[3] = a0, a1, a2, a3
	sdyx[0], sdyx[1], sdyx[2], sdyx[3] = b0, b1, b2, b3
}

// normSaved is what a library's batch norm keeps from the forward pass
// for the backward one: the biased variance it computed (invstd is
// rounded from it) and eps.
type normSaved struct {
	variance []float32
	eps      float32
	ws       []float32 // a fused ReLU's mask (NormReluLib); nil without
}

// libNormTrain is BatchNormTrain on the library: y in x's layout; the
// statistics and the running update here, in float64 as ours, from the
// library's mean and variance. The variance is kept, by the mean's
// buffer, for BatchNormGrad.
func (be *Backend) libNormTrain(fuse bool, yd, md, id, rm, rv, xd, g, b []float32, n, c, hw int, eps, momentum float32) error {
	key := unsafe.SliceData(md)
	sv := be.normVar[key]
	if len(sv.variance) != c {
		sv.variance = make([]float32, c)
	}
	sv.eps = eps
	if be.normVar == nil {
		be.normVar = map[*float32]normSaved{}
	}
	be.normVar[key] = sv
	xl := be.layoutOf(xd)
	var yl Layout
	var err error
	if fuse {
		fused := be.lib.(NormReluLib)
		var size int
		if size, err = fused.NormReluWorkspace(xl, n, c, hw, eps); err != nil {
			return err
		}
		if len(sv.ws) != size {
			sv.ws = make([]float32, size)
			be.normVar[key] = sv
		}
		be.output(yd)
		yl, err = fused.NormReluTrain(yd, md, sv.variance, sv.ws, xd, g, b, xl, n, c, hw, eps)
	} else {
		be.output(yd)
		yl, err = be.lib.NormTrain(yd, md, sv.variance, xd, g, b, xl, n, c, hw, eps)
	}
	be.setLayout(yd, yl)
	if err != nil {
		return err
	}
	cnt := float64(n * hw)
	m := float64(momentum)
	for ch := range c {
		v := float64(sv.variance[ch])
		id[ch] = float32(1 / math.Sqrt(v+float64(eps)))
		unbiased := v
		if cnt > 1 {
			unbiased = v * cnt / (cnt - 1)
		}
		rm[ch] = float32((1-m)*float64(rm[ch]) + m*float64(md[ch]))
		rv[ch] = float32((1-m)*float64(rv[ch]) + m*unbiased)
	}
	return nil
}

// libNormGrad is BatchNormGrad on the library, with the variance
// libNormTrain kept for this mean (or, for statistics it did not compute,
// the variance 1/invstd² with eps 0).
func (be *Backend) libNormGrad(fuse bool, dxd, dg, db, dyd, xd, md, id, g []float32, n, c, hw int) error {
	sv, ok := be.normVar[unsafe.SliceData(md)]
	if fuse && (!ok || sv.ws == nil) {
		return shapeError("BatchNormReluGrad", "no BatchNormReluTrain of this batch norm (its mean buffer) came before: the fused ReLU's mask is missing")
	}
	if !ok || len(sv.variance) != c {
		sv = normSaved{variance: make([]float32, c)}
		for ch, inv := range id {
			sv.variance[ch] = float32(1 / (float64(inv) * float64(inv)))
		}
	}
	dyl, xl := be.layoutOf(dyd), be.layoutOf(xd)
	be.output(dxd)
	var dxl Layout
	var err error
	if fuse {
		dxl, err = be.lib.(NormReluLib).NormReluGrad(dxd, dg, db, dyd, xd, md, sv.variance, g, sv.ws, dyl, xl, n, c, hw, sv.eps)
	} else {
		dxl, err = be.lib.NormGrad(dxd, dg, db, dyd, xd, md, sv.variance, g, dyl, xl, n, c, hw, sv.eps)
	}
	be.setLayout(dxd, dxl)
	return err
}
