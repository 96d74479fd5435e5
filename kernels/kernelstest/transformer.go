package kernelstest

import (
	"fmt"
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// testGelu checks Gelu and GeluGrad, both forms, against float64
// formulas, over normals, wide values and the tails (where erf saturates
// and the tanh form's cube grows), and in place (y = x, dx = dy).
func testGelu(t *testing.T, be kernels.Backend) {
	tb, has := kernels.TransformerOf(be)
	if !has {
		t.Skipf("backend %s has no TransformerOps: GELU does not run on it", be.Name())
	}
	r := newRand(900)
	x := append(normals(r, 300, 1), normals(r, 200, 6)...)
	x = append(x, 0, -0.5, 0.5, 3, -3, 10, -10, 40, -40, 1e4, -1e4)
	dy := normals(r, len(x), 1)
	for _, tanh := range []bool{false, true} {
		name := "erf"
		f, df := refGelu, refGeluGrad
		if tanh {
			name, f, df = "tanh", refGeluTanh, refGeluTanhGrad
		}
		wantY, wantDx := make([]float64, len(x)), make([]float64, len(x))
		boundY, boundDx := make([]float64, len(x)), make([]float64, len(x))
		for i, v := range x {
			wantY[i], wantDx[i] = f(float64(v)), float64(dy[i])*df(float64(v))
			boundY[i] = 2e-6 * (1 + math.Abs(wantY[i]))
			boundDx[i] = 2e-6 * (1 + math.Abs(float64(dy[i]))*(1+math.Abs(float64(v))))
		}
		xb, dyb := load(t, be, x), load(t, be, dy)
		y := loadGuarded(t, be, filled(len(x), 7))
		ok(t, name, tb.Gelu(y.buf, xb, tanh))
		checkWithin(t, name+": y", y.read(t, name), wantY, boundY)
		dx := loadGuarded(t, be, filled(len(x), 7))
		ok(t, name, tb.GeluGrad(dx.buf, dyb, xb, tanh))
		checkWithin(t, name+": dx", dx.read(t, name), wantDx, boundDx)
		// In place.
		in := loadGuarded(t, be, x)
		ok(t, name+" in place", tb.Gelu(in.buf, in.buf, tanh))
		checkWithin(t, name+": y in place", in.read(t, name), wantY, boundY)
		din := loadGuarded(t, be, dy)
		ok(t, name+" in place", tb.GeluGrad(din.buf, din.buf, xb, tanh))
		checkWithin(t, name+": dx in place", din.read(t, name), wantDx, boundDx)
	}
	// Lengths that differ: ErrShape, the output untouched.
	x3, y4 := load(t, be, filled(3, 1)), loadGuarded(t, be, filled(4, 5))
	wantShapeErrs(t, tb.Gelu(y4.buf, x3, false), tb.GeluGrad(y4.buf, y4.buf, x3, true))
	checkExact(t, "after bad shapes", y4.read(t, "bad"), filled(4, 5))
}

func refGelu(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

func refGeluGrad(x float64) float64 {
	return 0.5*(1+math.Erf(x/math.Sqrt2)) + x*math.Exp(-x*x/2)/math.Sqrt(2*math.Pi)
}

func refGeluTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

func refGeluTanhGrad(x float64) float64 {
	c := math.Sqrt(2 / math.Pi)
	t := math.Tanh(c * (x + 0.044715*x*x*x))
	return 0.5*(1+t) + 0.5*x*(1-t*t)*c*(1+3*0.044715*x*x)
}

// layerNormShapes: one value per row, a row, odd sizes, a transformer's
// width.
var layerNormShapes = []struct{ rows, cols int }{{1, 1}, {1, 7}, {5, 3}, {4, 33}, {6, 128}}

// testLayerNorm checks LayerNorm and LayerNormGrad against float64
// formulas; one row lies far from 0 (mean 1e4, deviation 1), where a
// one-pass variance in float32 would lose every digit.
func testLayerNorm(t *testing.T, be kernels.Backend) {
	tb, has := kernels.TransformerOf(be)
	if !has {
		t.Skipf("backend %s has no TransformerOps: layer norm does not run on it", be.Name())
	}
	const eps = 1e-5
	for k, s := range layerNormShapes {
		name := fmt.Sprintf("%+v", s)
		r := newRand(uint64(950 + k))
		x := normals(r, s.rows*s.cols, 2)
		for i := range x {
			x[i] += float32(i / s.cols) // a mean per row
		}
		if s.rows > 1 {
			for j := range s.cols {
				x[s.cols+j] = 1e4 + float32(j%3) - 1
			}
		}
		g, b, dy := normals(r, s.cols, 1), normals(r, s.cols, 1), normals(r, len(x), 1)
		ref := refLayerNorm(s.rows, s.cols, x, g, b, dy, eps)
		xb, gb, bb, dyb := load(t, be, x), load(t, be, g), load(t, be, b), load(t, be, dy)
		y, m, inv := loadGuarded(t, be, filled(len(x), 7)), loadGuarded(t, be, filled(s.rows, 7)), loadGuarded(t, be, filled(s.rows, 7))
		ok(t, name, tb.LayerNorm(y.buf, m.buf, inv.buf, xb, gb, bb, s.rows, s.cols, eps))
		checkWithin(t, name+": y", y.read(t, name), ref.y, ref.boundY)
		checkWithin(t, name+": mean", m.read(t, name), ref.mu, perC(ref.mu, 1e-7))
		checkWithin(t, name+": invstd", inv.read(t, name), ref.inv, perC(ref.inv, 1e-5))
		dx, dg, db := loadGuarded(t, be, filled(len(x), 7)), loadGuarded(t, be, filled(s.cols, 7)), loadGuarded(t, be, filled(s.cols, 7))
		ok(t, name, tb.LayerNormGrad(dx.buf, dg.buf, db.buf, dyb, xb, m.buf, inv.buf, gb, s.rows, s.cols))
		checkWithin(t, name+": dx", dx.read(t, name), ref.dx, ref.boundDx)
		checkWithin(t, name+": dgamma", dg.read(t, name), ref.dg, perC(ref.dg, 1e-4*float64(s.rows)))
		checkWithin(t, name+": dbeta", db.read(t, name), ref.db, perC(ref.db, 1e-5*float64(s.rows)))
	}
	// Shapes that do not fit: ErrShape, outputs untouched.
	x := load(t, be, filled(12, 1))
	c3, y := loadGuarded(t, be, filled(3, 5)), loadGuarded(t, be, filled(12, 5))
	c4 := loadGuarded(t, be, filled(4, 5))
	wantShapeErrs(t,
		tb.LayerNorm(y.buf, c3.buf, c3.buf, x, c3.buf, c3.buf, 3, 3, eps),               // 9 ≠ 12
		tb.LayerNorm(y.buf, c3.buf, c3.buf, x, c3.buf, c4.buf, 3, 4, eps),               // per-row 3, β 4: γ 3 ≠ 4
		tb.LayerNormGrad(y.buf, c4.buf, c4.buf, y.buf, x, c4.buf, c3.buf, c4.buf, 3, 4), // per-row 4 ≠ 3
	)
	checkExact(t, "y after bad shapes", y.read(t, "bad"), filled(12, 5))
	checkExact(t, "per-row after bad shapes", c3.read(t, "bad"), filled(3, 5))
	checkExact(t, "per-column after bad shapes", c4.read(t, "bad"), filled(4, 5))
}

// layerNormRef is a layer norm in float64: the statistics, y, and the
// gradients given dy, with the bounds the checks allow.
type layerNormRef struct {
	mu, inv, y, dx, dg, db []float64
	boundY, boundDx        []float64
}

func refLayerNorm(rows, cols int, x, g, b, dy []float32, eps float64) layerNormRef {
	ref := layerNormRef{mu: make([]float64, rows), inv: make([]float64, rows), y: make([]float64, len(x)), dx: make([]float64, len(x)),
		dg: make([]float64, cols), db: make([]float64, cols), boundY: make([]float64, len(x)), boundDx: make([]float64, len(x))}
	for r := range rows {
		xs := widen(x[r*cols : (r+1)*cols])
		mu, v := 0.0, 0.0
		for _, xv := range xs {
			mu += xv
		}
		mu /= float64(cols)
		for _, xv := range xs {
			v += (xv - mu) * (xv - mu)
		}
		inv := 1 / math.Sqrt(v/float64(cols)+eps)
		ref.mu[r], ref.inv[r] = mu, inv
		var mg, mgx, mag float64
		for j, xv := range xs {
			xh := (xv - mu) * inv
			p := r*cols + j
			ref.y[p] = float64(g[j])*xh + float64(b[j])
			ref.boundY[p] = 1e-5 * (1 + math.Abs(float64(g[j]))*(1+math.Abs(xh)) + math.Abs(float64(b[j])))
			d := float64(dy[p])
			ref.dg[j] += d * xh
			ref.db[j] += d
			gd := float64(g[j]) * d
			mg += gd
			mgx += gd * xh
			mag += math.Abs(gd)
		}
		mg /= float64(cols)
		mgx /= float64(cols)
		for j, xv := range xs {
			xh := (xv - mu) * inv
			p := r*cols + j
			ref.dx[p] = inv * (float64(g[j])*float64(dy[p]) - mg - xh*mgx)
			ref.boundDx[p] = 1e-5 * inv * (1 + math.Abs(float64(g[j])*float64(dy[p])) + mag/float64(cols)*(1+math.Abs(xh)))
		}
	}
	return ref
}

// testDropout checks Dropout against kernels.DropoutKeep exactly (x·scale
// in float32 where kept, 0 elsewhere), in place, for several rates, and
// that the share dropped is p (within five standard deviations over
// 64k elements) and differs between salts.
func testDropout(t *testing.T, be kernels.Backend) {
	tb, has := kernels.TransformerOf(be)
	if !has {
		t.Skipf("backend %s has no TransformerOps: dropout does not run on it", be.Name())
	}
	r := newRand(990)
	const rows, cols = 64, 1024
	x := normals(r, rows*cols, 1)
	keys := make([]float32, rows)
	for i := range keys {
		keys[i] = math.Float32frombits(r.Uint32())
	}
	kb, xb := load(t, be, keys), load(t, be, x)
	for _, c := range []struct {
		p    float64
		salt uint32
	}{{0.1, 3}, {0.5, 3}, {0.5, 4}, {0.9, 7}, {0, 1}} {
		name := fmt.Sprintf("p %v salt %d", c.p, c.salt)
		th := kernels.DropoutThreshold(c.p)
		scale := float32(1 / (1 - c.p))
		want := make([]float32, len(x))
		dropped := 0
		for i := range rows {
			key := math.Float32bits(keys[i])
			for j := range cols {
				if kernels.DropoutKeep(key, c.salt, uint32(j), th) {
					want[i*cols+j] = x[i*cols+j] * scale
				} else {
					dropped++
				}
			}
		}
		n := float64(rows * cols)
		if sd := math.Sqrt(n * c.p * (1 - c.p)); math.Abs(float64(dropped)-c.p*n) > 5*sd+0.5 {
			t.Errorf("%s: the mask drops %d of %v", name, dropped, n)
		}
		y := loadGuarded(t, be, filled(len(x), 7))
		ok(t, name, tb.Dropout(y.buf, xb, kb, rows, cols, c.salt, th, scale))
		checkExact(t, name+": y", y.read(t, name), want)
		in := loadGuarded(t, be, x)
		ok(t, name+" in place", tb.Dropout(in.buf, in.buf, kb, rows, cols, c.salt, th, scale))
		checkExact(t, name+": y in place", in.read(t, name), want)
	}
	// Two salts (layers) draw different masks.
	same := 0
	for j := range cols {
		if kernels.DropoutKeep(1, 3, uint32(j), kernels.DropoutThreshold(0.5)) == kernels.DropoutKeep(1, 4, uint32(j), kernels.DropoutThreshold(0.5)) {
			same++
		}
	}
	if same > cols*3/4 {
		t.Errorf("salts 3 and 4 agree on %d of %d elements", same, cols)
	}
	// Shapes that do not fit: ErrShape, the output untouched.
	k3, y := load(t, be, filled(3, 0)), loadGuarded(t, be, filled(8, 5))
	x8 := load(t, be, filled(8, 1))
	wantShapeErrs(t,
		tb.Dropout(y.buf, x8, k3, 2, 4, 1, 0, 1), // 3 keys ≠ 2 rows
		tb.Dropout(y.buf, x8, k3, 3, 3, 1, 0, 1), // 9 ≠ 8
	)
	checkExact(t, "after bad shapes", y.read(t, "bad"), filled(8, 5))
}

// testMaxPoolPad checks MaxPoolPad and MaxPoolPadGrad against a reference
// that pads with −∞: windows of negative values at the edges (where a zero
// padding would win), ResNet's 3×3 stride-2 pad-1 pool, odd sizes, and
// pixels that are the maximum of several windows (their gradients add).
func testMaxPoolPad(t *testing.T, be kernels.Backend) {
	pp, has := kernels.PadPoolOf(be)
	if !has {
		t.Skipf("backend %s has no PadPoolOps: padded max pooling does not run on it", be.Name())
	}
	for k, s := range []struct{ planes, h, w, k, stride, pad int }{{2, 8, 8, 3, 2, 1}, {3, 7, 5, 3, 2, 1}, {1, 6, 6, 2, 2, 1}, {2, 5, 5, 5, 1, 2}, {1, 4, 4, 3, 1, 1}} {
		name := fmt.Sprintf("%+v", s)
		r := newRand(uint64(970 + k))
		x := normals(r, s.planes*s.h*s.w, 1)
		for i := range x {
			x[i] -= 3 // mostly negative: a zero padding would be the maximum
		}
		oh, ow := kernels.ConvOut(s.h, s.w, s.k, s.stride, s.pad)
		dy := normals(r, s.planes*oh*ow, 1)
		wantY, wantDx := make([]float32, len(dy)), make([]float32, len(x))
		acc := make([]float64, len(x))
		for p := range s.planes {
			for oy := range oh {
				for ox := range ow {
					best, bv := -1, math.Inf(-1)
					for i := oy*s.stride - s.pad; i < oy*s.stride-s.pad+s.k; i++ {
						for j := ox*s.stride - s.pad; j < ox*s.stride-s.pad+s.k; j++ {
							if i < 0 || j < 0 || i >= s.h || j >= s.w {
								continue
							}
							if v := float64(x[(p*s.h+i)*s.w+j]); v > bv {
								best, bv = (p*s.h+i)*s.w+j, v
							}
						}
					}
					o := (p*oh+oy)*ow + ox
					wantY[o] = x[best]
					acc[best] += float64(dy[o])
				}
			}
		}
		for i, v := range acc {
			wantDx[i] = float32(v)
		}
		xb, dyb := load(t, be, x), load(t, be, dy)
		y := loadGuarded(t, be, filled(len(dy), 7))
		ok(t, name, pp.MaxPoolPad(y.buf, xb, s.planes, s.h, s.w, s.k, s.stride, s.pad))
		checkExact(t, name+": y", y.read(t, name), wantY)
		dx := loadGuarded(t, be, filled(len(x), 7))
		ok(t, name, pp.MaxPoolPadGrad(dx.buf, dyb, xb, s.planes, s.h, s.w, s.k, s.stride, s.pad))
		bound := make([]float64, len(x))
		want64 := make([]float64, len(x))
		for i := range bound {
			bound[i], want64[i] = 1e-6*(1+math.Abs(acc[i])), acc[i]
		}
		checkWithin(t, name+": dx", dx.read(t, name), want64, bound)
	}
	// A pad past half the window, and shapes that do not fit: ErrShape,
	// the output untouched.
	x := load(t, be, filled(16, 1))
	y := loadGuarded(t, be, filled(4, 5))
	wantShapeErrs(t,
		pp.MaxPoolPad(y.buf, x, 1, 4, 4, 2, 2, 2),            // pad 2 > 2/2
		pp.MaxPoolPad(y.buf, x, 1, 4, 4, 3, 1, 1),            // 16 outputs ≠ 4
		pp.MaxPoolPadGrad(y.buf, y.buf, x, 1, 4, 4, 3, 2, 1), // dx 4 ≠ 16
	)
	checkExact(t, "after bad shapes", y.read(t, "bad"), filled(4, 5))
}

// testLRN checks LRN and LRNGrad against float64 formulas from PyTorch's
// definition (windows clipped at the first and last channels; an even
// size's window reaches one channel further down than up), AlexNet's
// settings and others.
func testLRN(t *testing.T, be kernels.Backend) {
	lb, has := kernels.LRNOf(be)
	if !has {
		t.Skipf("backend %s has no LRNOps: local response normalisation does not run on it", be.Name())
	}
	for k, s := range []struct {
		n, c, hw, size  int
		alpha, beta, kk float32
	}{{2, 7, 5, 5, 1e-4, 0.75, 2}, {3, 6, 4, 4, 0.3, 0.5, 1}, {1, 3, 9, 5, 1, 0.75, 1}, {2, 8, 1, 1, 0.5, 1, 0.5}} {
		name := fmt.Sprintf("%+v", s)
		r := newRand(uint64(980 + k))
		x, dy := normals(r, s.n*s.c*s.hw, 3), normals(r, s.n*s.c*s.hw, 1)
		wantY, wantS, wantDx := make([]float64, len(x)), make([]float64, len(x)), make([]float64, len(x))
		at := func(i, ch, p int) int { return (i*s.c+ch)*s.hw + p }
		a, b := float64(s.alpha)/float64(s.size), float64(s.beta)
		for i := range s.n {
			for p := range s.hw {
				for ch := range s.c {
					sum := 0.0
					for q := ch - s.size/2; q <= ch+(s.size-1)/2; q++ {
						if q >= 0 && q < s.c {
							v := float64(x[at(i, q, p)])
							sum += v * v
						}
					}
					wantS[at(i, ch, p)] = float64(s.kk) + a*sum
					wantY[at(i, ch, p)] = float64(x[at(i, ch, p)]) * math.Pow(wantS[at(i, ch, p)], -b)
				}
				for j := range s.c {
					sum := 0.0
					for ch := range s.c {
						if j >= ch-s.size/2 && j <= ch+(s.size-1)/2 {
							sum += float64(dy[at(i, ch, p)]) * float64(x[at(i, ch, p)]) * math.Pow(wantS[at(i, ch, p)], -b-1)
						}
					}
					wantDx[at(i, j, p)] = float64(dy[at(i, j, p)])*math.Pow(wantS[at(i, j, p)], -b) - 2*a*b*float64(x[at(i, j, p)])*sum
				}
			}
		}
		bound := func(w []float64) []float64 { return perC(w, 1e-5) }
		xb, dyb := load(t, be, x), load(t, be, dy)
		y, sc := loadGuarded(t, be, filled(len(x), 7)), loadGuarded(t, be, filled(len(x), 7))
		ok(t, name, lb.LRN(y.buf, sc.buf, xb, s.n, s.c, s.hw, s.size, s.alpha, s.beta, s.kk))
		checkWithin(t, name+": y", y.read(t, name), wantY, bound(wantY))
		checkWithin(t, name+": s", sc.read(t, name), wantS, bound(wantS))
		dx := loadGuarded(t, be, filled(len(x), 7))
		ok(t, name, lb.LRNGrad(dx.buf, dyb, xb, sc.buf, s.n, s.c, s.hw, s.size, s.alpha, s.beta, s.kk))
		checkWithin(t, name+": dx", dx.read(t, name), wantDx, bound(wantDx))
	}
	// Shapes that do not fit: ErrShape, the output untouched.
	x, y := load(t, be, filled(12, 1)), loadGuarded(t, be, filled(12, 5))
	s8 := loadGuarded(t, be, filled(8, 5))
	wantShapeErrs(t,
		lb.LRN(y.buf, s8.buf, x, 2, 3, 2, 3, 1e-4, 0.75, 1),           // s 8 ≠ 12
		lb.LRN(y.buf, y.buf, x, 2, 3, 3, 3, 1e-4, 0.75, 1),            // 18 ≠ 12
		lb.LRNGrad(y.buf, y.buf, x, y.buf, 2, 3, 2, 0, 1e-4, 0.75, 1), // size 0
	)
	checkExact(t, "after bad shapes", y.read(t, "bad"), filled(12, 5))
}
