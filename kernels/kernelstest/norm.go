package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// normShapes are batch-norm cases: one sample, one value per channel,
// ResNet-20's first layer at a small batch, odd sizes.
var normShapes = []struct{ n, c, hw int }{{1, 1, 1}, {2, 3, 5}, {4, 16, 64}, {3, 7, 1}, {1, 2, 9}}

// testBatchNorm checks BatchNormTrain (outputs, statistics, the running
// update), BatchNormInfer and BatchNormGrad against float64 formulas.
func testBatchNorm(t *testing.T, be kernels.Backend) {
	nb, has := kernels.NormOf(be)
	if !has {
		t.Skipf("backend %s has no NormOps: batch norm does not run on it", be.Name())
	}
	const eps, mom = 1e-5, 0.1
	for k, s := range normShapes {
		name := fmt.Sprintf("%+v", s)
		r := newRand(uint64(800 + k))
		x := normals(r, s.n*s.c*s.hw, 2)
		for i := range x {
			x[i] += float32(i%s.c) - 1 // a mean per channel
		}
		g, b := normals(r, s.c, 1), normals(r, s.c, 1)
		rm, rv := normals(r, s.c, 1), filled(s.c, 1.5)
		dy := normals(r, len(x), 1)
		cnt := float64(s.n * s.hw)
		ref := refBatchNorm(s, x, g, b, dy, eps)
		wantY, wantDx, wantDg, wantDb, boundY, boundDx := ref.y, ref.dx, ref.dg, ref.db, ref.boundY, ref.boundDx
		at := func(i, ch, j int) int { return (i*s.c+ch)*s.hw + j }
		wantInfer := make([]float64, len(x))
		wantRm, wantRv := make([]float64, s.c), make([]float64, s.c)
		for ch := range s.c {
			unb := ref.v[ch]
			if cnt > 1 {
				unb = ref.v[ch] * cnt / (cnt - 1)
			}
			wantRm[ch] = (1-mom)*float64(rm[ch]) + mom*ref.mu[ch]
			wantRv[ch] = (1-mom)*float64(rv[ch]) + mom*unb
			for i := range s.n {
				for j := range s.hw {
					p := at(i, ch, j)
					wantInfer[p] = float64(g[ch])*(float64(x[p])-float64(rm[ch]))/math.Sqrt(float64(rv[ch])+eps) + float64(b[ch])
					boundY[p] = 1e-5 * (1 + math.Abs(wantY[p]) + math.Abs(wantInfer[p]))
				}
			}
		}
		xb, gb, bb := load(t, be, x), load(t, be, g), load(t, be, b)
		rmb, rvb := loadGuarded(t, be, rm), loadGuarded(t, be, rv)
		yb, mb, ib := loadGuarded(t, be, filled(len(x), 7)), loadGuarded(t, be, filled(s.c, 7)), loadGuarded(t, be, filled(s.c, 7))
		ok(t, name, nb.BatchNormTrain(yb.buf, mb.buf, ib.buf, rmb.buf, rvb.buf, xb, gb, bb, s.n, s.c, s.hw, eps, mom))
		checkWithin(t, name+": y", yb.read(t, name), wantY, boundY)
		checkWithin(t, name+": running mean", rmb.read(t, name), wantRm, perC(wantRm, 1e-6))
		checkWithin(t, name+": running var", rvb.read(t, name), wantRv, perC(wantRv, 1e-6))
		rm0, rv0 := load(t, be, rm), load(t, be, rv)
		yi := loadGuarded(t, be, filled(len(x), 7))
		ok(t, name, nb.BatchNormInfer(yi.buf, xb, rm0, rv0, gb, bb, s.n, s.c, s.hw, eps))
		checkWithin(t, name+": y (inference)", yi.read(t, name), wantInfer, boundY)
		dyb := load(t, be, dy)
		dxb, dgb, dbb := loadGuarded(t, be, filled(len(x), 7)), loadGuarded(t, be, filled(s.c, 7)), loadGuarded(t, be, filled(s.c, 7))
		ok(t, name, nb.BatchNormGrad(dxb.buf, dgb.buf, dbb.buf, dyb, xb, mb.buf, ib.buf, gb, s.n, s.c, s.hw))
		checkWithin(t, name+": dx", dxb.read(t, name), wantDx, boundDx)
		checkWithin(t, name+": dgamma", dgb.read(t, name), wantDg, perC(wantDg, 1e-4*cnt))
		checkWithin(t, name+": dbeta", dbb.read(t, name), wantDb, perC(wantDb, 1e-5*cnt))
	}
	// Shapes that do not fit: ErrShape, outputs untouched.
	x := load(t, be, filled(12, 1))
	c3, y := loadGuarded(t, be, filled(3, 5)), loadGuarded(t, be, filled(12, 5))
	wantShapeErrs(t,
		nb.BatchNormTrain(y.buf, c3.buf, c3.buf, c3.buf, c3.buf, x, c3.buf, c3.buf, 2, 3, 3, eps, mom), // 18 ≠ 12
		nb.BatchNormInfer(y.buf, x, c3.buf, c3.buf, c3.buf, c3.buf, 2, 2, 3, eps),                      // per-channel 3 ≠ 2
		nb.BatchNormGrad(y.buf, c3.buf, c3.buf, y.buf, x, c3.buf, c3.buf, c3.buf, 1, 3, 5),             // 15 ≠ 12
	)
	checkExact(t, "y after bad shapes", y.read(t, "bad"), filled(12, 5))
	checkExact(t, "per-channel after bad shapes", c3.read(t, "bad"), filled(3, 5))
}

// perC is a per-channel bound: scale·(1 + |w|) each.
func perC(w []float64, scale float64) []float64 {
	out := make([]float64, len(w))
	for i, x := range w {
		out[i] = scale * (1 + math.Abs(x))
	}
	return out
}

// normRef is a training batch norm in float64: the statistics, y, and
// the gradients given dy, with the bounds the checks allow.
type normRef struct {
	mu, v, y, dx, dg, db []float64
	boundY, boundDx      []float64
}

// refBatchNorm computes normRef for x (s.n × s.c × s.hw) with gamma g,
// beta b and the output gradient dy.
func refBatchNorm(s struct{ n, c, hw int }, x, g, b, dy []float32, eps float64) normRef {
	cnt := float64(s.n * s.hw)
	r := normRef{mu: make([]float64, s.c), v: make([]float64, s.c), y: make([]float64, len(x)), dx: make([]float64, len(x)),
		dg: make([]float64, s.c), db: make([]float64, s.c), boundY: make([]float64, len(x)), boundDx: make([]float64, len(x))}
	at := func(i, ch, j int) int { return (i*s.c+ch)*s.hw + j }
	for ch := range s.c {
		for i := range s.n {
			for j := range s.hw {
				r.mu[ch] += float64(x[at(i, ch, j)]) / cnt
			}
		}
		for i := range s.n {
			for j := range s.hw {
				d := float64(x[at(i, ch, j)]) - r.mu[ch]
				r.v[ch] += d * d / cnt
			}
		}
		inv := 1 / math.Sqrt(r.v[ch]+eps)
		var sdy, sdyx float64
		for i := range s.n {
			for j := range s.hw {
				p := at(i, ch, j)
				xh := (float64(x[p]) - r.mu[ch]) * inv
				r.y[p] = float64(g[ch])*xh + float64(b[ch])
				r.boundY[p] = 1e-5 * (1 + math.Abs(r.y[p]))
				sdy += float64(dy[p])
				sdyx += float64(dy[p]) * xh
			}
		}
		r.dg[ch], r.db[ch] = sdyx, sdy
		for i := range s.n {
			for j := range s.hw {
				p := at(i, ch, j)
				xh := (float64(x[p]) - r.mu[ch]) * inv
				r.dx[p] = float64(g[ch]) * inv * (float64(dy[p]) - sdy/cnt - xh*sdyx/cnt)
				r.boundDx[p] = 1e-4 * (1 + math.Abs(float64(g[ch])*inv)*(math.Abs(float64(dy[p]))+math.Abs(sdy)/cnt+math.Abs(xh*sdyx)/cnt))
			}
		}
	}
	return r
}

// testBatchNormRelu checks NormReluOps, where they run, against float64
// formulas: y = max(batch norm, 0), and the gradient through the ReLU
// whose mask is the y the op wrote (y > 0), so that a value the op
// rounded to either side of zero is judged by its own choice.
func testBatchNormRelu(t *testing.T, be kernels.Backend) {
	nr, has := kernels.NormReluOf(be)
	if !has {
		t.Skipf("backend %s fuses no batch norm with a ReLU (NormReluOps)", be.Name())
	}
	const eps, mom = 1e-5, 0.1
	for k, s := range normShapes {
		name := fmt.Sprintf("%+v", s)
		r := newRand(uint64(850 + k))
		x := normals(r, s.n*s.c*s.hw, 2)
		g, b := normals(r, s.c, 1), normals(r, s.c, 1)
		dy := normals(r, len(x), 1)
		ref := refBatchNorm(s, x, g, b, dy, eps)
		wantY := make([]float64, len(x))
		for i, v := range ref.y {
			wantY[i] = max(v, 0)
		}
		xb, gb, bb := load(t, be, x), load(t, be, g), load(t, be, b)
		rmb, rvb := load(t, be, filled(s.c, 0)), load(t, be, filled(s.c, 1))
		yb, mb, ib := loadGuarded(t, be, filled(len(x), 7)), loadGuarded(t, be, filled(s.c, 7)), loadGuarded(t, be, filled(s.c, 7))
		ok(t, name, nr.BatchNormReluTrain(yb.buf, mb.buf, ib.buf, rmb, rvb, xb, gb, bb, s.n, s.c, s.hw, eps, mom))
		y := yb.read(t, name)
		checkWithin(t, name+": y", y, wantY, ref.boundY)
		masked := make([]float32, len(dy))
		for i := range dy {
			if y[i] > 0 {
				masked[i] = dy[i]
			}
		}
		mref := refBatchNorm(s, x, g, b, masked, eps)
		dyb := load(t, be, dy)
		dxb, dgb, dbb := loadGuarded(t, be, filled(len(x), 7)), loadGuarded(t, be, filled(s.c, 7)), loadGuarded(t, be, filled(s.c, 7))
		ok(t, name, nr.BatchNormReluGrad(dxb.buf, dgb.buf, dbb.buf, dyb, yb.buf, xb, mb.buf, ib.buf, gb, s.n, s.c, s.hw))
		cnt := float64(s.n * s.hw)
		checkWithin(t, name+": dx", dxb.read(t, name), mref.dx, mref.boundDx)
		checkWithin(t, name+": dgamma", dgb.read(t, name), mref.dg, perC(mref.dg, 1e-4*cnt))
		checkWithin(t, name+": dbeta", dbb.read(t, name), mref.db, perC(mref.db, 1e-5*cnt))
	}
}

// testSyncBatchNorm checks SyncNormOps: a batch split in two halves,
// each half's sums added (as the ranks' AllReduce does), normalises each
// half as BatchNormTrain normalises the whole batch (the float64
// reference), with the whole batch's running statistics; the halves'
// gradient sums, added, give each half the whole batch's input gradient,
// and each half's own sums are its part of dγ and dβ.
func testSyncBatchNorm(t *testing.T, be kernels.Backend) {
	sb, has := kernels.SyncNormOf(be)
	if !has {
		t.Skipf("backend %s has no SyncNormOps: SyncBatchNorm does not run on it", be.Name())
	}
	const eps, mom = 1e-5, 0.1
	for k, s := range []struct{ n, c, hw int }{{4, 3, 5}, {2, 16, 64}, {6, 2, 1}} {
		name := fmt.Sprintf("%+v", s)
		r := newRand(uint64(860 + k))
		x := normals(r, s.n*s.c*s.hw, 2)
		for i := range x {
			x[i] += float32((i/s.hw)%s.c) - 1
		}
		g, b := normals(r, s.c, 1), normals(r, s.c, 1)
		dy := normals(r, len(x), 1)
		ref := refBatchNorm(s, x, g, b, dy, eps)
		cnt := s.n * s.hw
		half := s.n / 2
		per := s.c * s.hw
		parts := [][2]int{{0, half}, {half, s.n}}
		sums := make([]float32, 2*s.c)
		for _, p := range parts {
			xs := load(t, be, x[p[0]*per:p[1]*per])
			sb1 := loadGuarded(t, be, filled(2*s.c, 7))
			ok(t, name, sb.BatchNormSums(sb1.buf, xs, p[1]-p[0], s.c, s.hw))
			for i, v := range sb1.read(t, name) {
				sums[i] += v
			}
		}
		sumsB := load(t, be, sums)
		gb, bb := load(t, be, g), load(t, be, b)
		gradSums := make([]float32, 2*s.c)
		type halfState struct{ mean, inv kernels.Buffer }
		states := make([]halfState, 2)
		for h, p := range parts {
			xs := load(t, be, x[p[0]*per:p[1]*per])
			y, m, iv := loadGuarded(t, be, filled((p[1]-p[0])*per, 7)), loadGuarded(t, be, filled(s.c, 7)), loadGuarded(t, be, filled(s.c, 7))
			rm, rv := load(t, be, filled(s.c, 0)), load(t, be, filled(s.c, 1))
			ok(t, name, sb.BatchNormTrainSums(y.buf, m.buf, iv.buf, rm, rv, xs, gb, bb, sumsB, cnt, p[1]-p[0], s.c, s.hw, eps, mom))
			checkWithin(t, name+": y", y.read(t, name), ref.y[p[0]*per:p[1]*per], ref.boundY[p[0]*per:p[1]*per])
			wantRv := make([]float64, s.c)
			for ch := range s.c {
				unb := ref.v[ch] * float64(cnt) / float64(cnt-1)
				wantRv[ch] = (1 - mom) + mom*unb
			}
			checkWithin(t, name+": running var", read(t, be, rv), wantRv, perC(wantRv, 1e-5))
			states[h] = halfState{m.buf, iv.buf}
			gs := loadGuarded(t, be, filled(2*s.c, 7))
			ok(t, name, sb.BatchNormGradSums(gs.buf, load(t, be, dy[p[0]*per:p[1]*per]), xs, m.buf, iv.buf, p[1]-p[0], s.c, s.hw))
			for i, v := range gs.read(t, name) {
				gradSums[i] += v
			}
		}
		dbWant, dgWant := ref.db, ref.dg
		checkWithin(t, name+": summed dbeta", gradSums[:s.c], dbWant, perC(dbWant, 1e-4*float64(cnt)))
		checkWithin(t, name+": summed dgamma", gradSums[s.c:], dgWant, perC(dgWant, 1e-4*float64(cnt)))
		gsB := load(t, be, gradSums)
		for h, p := range parts {
			xs, dys := load(t, be, x[p[0]*per:p[1]*per]), load(t, be, dy[p[0]*per:p[1]*per])
			dx := loadGuarded(t, be, filled((p[1]-p[0])*per, 7))
			ok(t, name, sb.BatchNormGradInput(dx.buf, dys, xs, states[h].mean, states[h].inv, gb, gsB, cnt, p[1]-p[0], s.c, s.hw))
			checkWithin(t, name+": dx", dx.read(t, name), ref.dx[p[0]*per:p[1]*per], ref.boundDx[p[0]*per:p[1]*per])
		}
	}
}
