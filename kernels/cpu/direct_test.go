package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// directShape is a direct convolution's shape: n samples of c×h×w into o
// channels, k×k kernels at padding pad, with or without a bias.
type directShape struct {
	n, c, h, w, o, k, pad int
	bias                  bool
}

// directShapes cover both 3×3 micro-kernels' tiles (4×16 and 8×8, several
// tiles per row and channel block), and on the k×k ones: LeNet-5's 5×5
// layers (6 output channels, padded to 8), their input gradients (padding
// 4), 1×1 and 7×7 kernels, a 3×3 on rows the 3×3 tiles do not run, odd
// channel counts (blocks of 8 output channels with every remainder
// under AVX-512), rows narrower than a tile, and biases.
var directShapes = []directShape{
	{2, 3, 8, 8, 8, 3, 1, false}, {1, 16, 32, 32, 16, 3, 1, false}, {2, 5, 16, 16, 4, 3, 1, true},
	{1, 64, 8, 8, 64, 3, 1, false}, {1, 4, 16, 48, 12, 3, 1, false}, {3, 1, 5, 16, 8, 3, 1, false},
	{1, 2, 3, 24, 16, 3, 1, false}, {17, 1, 32, 32, 4, 3, 1, false},
	{3, 1, 28, 28, 6, 5, 2, true}, {2, 6, 14, 14, 16, 5, 0, true}, {2, 16, 10, 10, 6, 5, 4, false},
	{2, 3, 9, 7, 5, 1, 0, true}, {1, 2, 11, 13, 3, 7, 3, false}, {2, 3, 6, 6, 4, 3, 1, false},
	{2, 2, 5, 9, 7, 3, 0, true}, {20, 1, 28, 28, 6, 5, 2, false}, {1, 1, 1, 1, 1, 1, 0, true},
	{3, 2, 12, 12, 13, 5, 2, true}, {2, 3, 7, 30, 9, 5, 1, false}, {2, 2, 9, 9, 12, 5, 2, true},
}

// directBackend is a cpu backend for the direct ops' tests, or skips t
// where the CPU lacks them.
func directBackend(t *testing.T) *Backend {
	t.Helper()
	be := New()
	if !be.ConvSupports(16, 32, 32, 16, 3, 1) {
		t.Skip("no direct convolution on this CPU (it needs AVX2 and FMA3)")
	}
	return be
}

// randn is n normal float32s from r.
func randn(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// TestDirectConv checks Conv against the float64 sum of its definition,
// within the rounding of a c·k·k-term float32 sum and the bias.
func TestDirectConv(t *testing.T) {
	be := directBackend(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range directShapes {
		oh, ow := kernels.DirectOut(s.h, s.w, s.k, s.pad)
		x, wt := randn(r, s.n*s.c*s.h*s.w), randn(r, s.c*s.k*s.k*s.o)
		var bias []float32
		var bb kernels.Buffer
		if s.bias {
			bias = randn(r, s.o)
			bb = be.mustLoad(t, bias)
		}
		y := make([]float32, s.n*s.o*oh*ow)
		for i := range y {
			y[i] = float32(math.NaN())
		}
		yb := be.mustLoad(t, y)
		if err := be.Conv(yb, be.mustLoad(t, x), be.mustLoad(t, wt), bb, s.n, s.c, s.h, s.w, s.o, s.k, s.pad); err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		be.Download(y, yb)
		for n := range s.n {
			for oc := range s.o {
				for i := range oh {
					for j := range ow {
						var want, mag float64
						if s.bias {
							want, mag = float64(bias[oc]), math.Abs(float64(bias[oc]))
						}
						for ci := range s.c {
							for ki := range s.k {
								for kj := range s.k {
									yy, xx := i+ki-s.pad, j+kj-s.pad
									if yy < 0 || yy >= s.h || xx < 0 || xx >= s.w {
										continue
									}
									p := float64(wt[(ci*s.k*s.k+ki*s.k+kj)*s.o+oc]) * float64(x[((n*s.c+ci)*s.h+yy)*s.w+xx])
									want += p
									mag += math.Abs(p)
								}
							}
						}
						got := float64(y[((n*s.o+oc)*oh+i)*ow+j])
						if !(math.Abs(got-want) <= float64(s.c*s.k*s.k+2)*0x1p-24*mag+1e-30) {
							t.Fatalf("%+v: y[%d][%d][%d][%d] = %g, want %g", s, n, oc, i, j, got, want)
						}
					}
				}
			}
		}
	}
}

// TestDirectConvFilter checks the weight and bias gradients against the
// float64 sums of their definitions, within the rounding of their float32
// sums (8 lanes over the wide pixels, then a tree, then the chunks; the
// bias's over a plane, then the samples).
func TestDirectConvFilter(t *testing.T) {
	be := directBackend(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range directShapes {
		oh, ow := kernels.DirectOut(s.h, s.w, s.k, s.pad)
		x, dy := randn(r, s.n*s.c*s.h*s.w), randn(r, s.n*s.o*oh*ow)
		xb, yb, wb := be.mustLoad(t, x), be.mustLoad(t, dy), be.mustLoad(t, randn(r, s.o*s.c*s.k*s.k))
		var db kernels.Buffer
		if s.bias {
			db = be.mustLoad(t, randn(r, s.o))
		}
		if err := be.ConvFilter(wb, db, xb, yb, s.n, s.c, s.h, s.w, s.o, s.k, s.pad); err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		got := wb.(*Buffer).Data()
		terms := float64(s.n*oh*(ow+2*s.pad)/8 + 16 + s.n)
		for oc := range s.o {
			for ci := range s.c {
				for kt := range s.k * s.k {
					var want, mag float64
					for n := range s.n {
						for i := range oh {
							for j := range ow {
								yy, xx := i+kt/s.k-s.pad, j+kt%s.k-s.pad
								if yy < 0 || yy >= s.h || xx < 0 || xx >= s.w {
									continue
								}
								p := float64(dy[((n*s.o+oc)*oh+i)*ow+j]) * float64(x[((n*s.c+ci)*s.h+yy)*s.w+xx])
								want += p
								mag += math.Abs(p)
							}
						}
					}
					g := float64(got[(oc*s.c+ci)*s.k*s.k+kt])
					if !(math.Abs(g-want) <= terms*0x1p-24*mag+1e-30) {
						t.Fatalf("%+v: dw[%d][%d][%d] = %g, want %g", s, oc, ci, kt, g, want)
					}
				}
			}
			if !s.bias {
				continue
			}
			var want, mag float64
			for n := range s.n {
				for _, v := range dy[(n*s.o+oc)*oh*ow : (n*s.o+oc+1)*oh*ow] {
					want += float64(v)
					mag += math.Abs(float64(v))
				}
			}
			if g := float64(db.(*Buffer).Data()[oc]); !(math.Abs(g-want) <= float64(oh*ow+s.n)*0x1p-24*mag+1e-30) {
				t.Fatalf("%+v: db[%d] = %g, want %g", s, oc, g, want)
			}
		}
	}
}

// TestDirectConvRefuses checks that the direct ops refuse, untouched,
// a padding not below the kernel and buffers of the wrong lengths.
func TestDirectConvRefuses(t *testing.T) {
	be := directBackend(t)
	buf := func(n int) kernels.Buffer { return be.mustLoad(t, make([]float32, n)) }
	y := be.mustLoad(t, []float32{7, 7, 7, 7})
	for _, c := range []struct {
		name string
		err  error
	}{
		{"padding 3 of a 3×3 kernel", be.Conv(buf(4*8*8), buf(2*6*6), buf(2*9*4), nil, 1, 2, 6, 6, 4, 3, 3)},
		{"short x", be.Conv(buf(4*6*6), buf(3), buf(2*9*4), nil, 1, 2, 6, 6, 4, 3, 1)},
		{"bias of 3 for 4 channels", be.Conv(buf(4*6*6), buf(2*6*6), buf(2*9*4), buf(3), 1, 2, 6, 6, 4, 3, 1)},
		{"filter of 5×5 kernels as 3×3", be.ConvFilter(buf(4*2*9), nil, buf(2*6*6), buf(4*6*6), 1, 2, 6, 6, 4, 5, 2)},
		{"kernel larger than the image", be.ConvFilter(y, nil, buf(4), buf(1), 1, 1, 2, 2, 1, 3, 0)},
	} {
		if !errors.Is(c.err, kernels.ErrShape) {
			t.Errorf("%s: %v, want a refusal (ErrShape)", c.name, c.err)
		}
	}
	if be.ConvSupports(2, 6, 6, 4, 3, 3) || be.ConvSupports(1, 2, 2, 1, 3, 0) {
		t.Error("ConvSupports accepts a shape Conv refuses")
	}
	if got := y.(*Buffer).Data(); got[0] != 7 || got[3] != 7 {
		t.Errorf("a refused filter wrote its gradient: %v", got)
	}
}

// mustLoad is a buffer of be holding v.
func (be *Backend) mustLoad(t *testing.T, v []float32) kernels.Buffer {
	b, err := be.Alloc(len(v))
	if err != nil {
		t.Fatal(err)
	}
	be.Upload(b, v)
	return b
}

// BenchmarkDirectConv is the direct convolution (and its weight gradient)
// at ResNet-20's 3×3 stride-1 shapes and LeNet-5's 5×5 ones (the second's
// input gradient as the convolution of dY at padding 4), batch 64, in
// GFLOP/s (2·o·c·k·k·oh·ow per sample), on the AVX2 kernels and on the
// AVX-512 ones (the 3×3 tiles have only AVX2); BenchmarkConvLayer in
// trainer/model has the Im2col + GEMM figures for the same layers.
func BenchmarkDirectConv(b *testing.B) {
	be := New()
	for _, s := range []struct {
		name               string
		c, h, w, o, k, pad int
	}{
		{"16x32x32", 16, 32, 32, 16, 3, 1}, {"32x16x16", 32, 16, 16, 32, 3, 1}, {"64x8x8", 64, 8, 8, 64, 3, 1},
		{"lenet5.conv1", 1, 28, 28, 6, 5, 2}, {"lenet5.conv2", 6, 14, 14, 16, 5, 0}, {"lenet5.conv2.dx", 16, 10, 10, 6, 5, 4},
	} {
		for _, op := range []string{"forward", "filter"} {
			for _, isa := range []string{"avx2", "avx512"} {
				b.Run(s.name+"/"+op+"/"+isa, func(b *testing.B) {
					if !be.ConvSupports(s.c, s.h, s.w, s.o, s.k, s.pad) {
						b.Skip("no direct convolution on this CPU")
					}
					if isa == "avx512" && !zCPU {
						b.Skip("no AVX-512 on this CPU")
					}
					defer func(z bool) { useZ = z }(useZ)
					useZ = isa == "avx512"
					const n = 64
					oh, ow := kernels.DirectOut(s.h, s.w, s.k, s.pad)
					x, _ := be.Alloc(n * s.c * s.h * s.w)
					y, _ := be.Alloc(n * s.o * oh * ow)
					wt, _ := be.Alloc(s.c * s.k * s.k * s.o)
					be.Fill(x, 0.5)
					be.Fill(wt, 0.25)
					b.ResetTimer()
					for range b.N {
						var err error
						if op == "forward" {
							err = be.Conv(y, x, wt, nil, n, s.c, s.h, s.w, s.o, s.k, s.pad)
						} else {
							err = be.ConvFilter(wt, nil, x, y, n, s.c, s.h, s.w, s.o, s.k, s.pad)
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(2*float64(s.o*s.c*s.k*s.k*oh*ow)*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}

// TestDirectZ checks that the k×k kernels' AVX-512 forms give the AVX2
// ones' results bit for bit (forward, weight and bias gradients) on every
// shape, as useZ promises: --kernels dml's results do not depend on which
// of the two a CPU runs.
func TestDirectZ(t *testing.T) {
	be := directBackend(t)
	if !zCPU {
		t.Skip("this CPU has no AVX512F, DQ and VL: only the AVX2 kernels run here")
	}
	defer func(z bool) { useZ = z }(useZ)
	r := rand.New(rand.NewPCG(7, 8))
	for _, s := range directShapes {
		oh, ow := kernels.DirectOut(s.h, s.w, s.k, s.pad)
		x, wt, dy := randn(r, s.n*s.c*s.h*s.w), randn(r, s.c*s.k*s.k*s.o), randn(r, s.n*s.o*oh*ow)
		bias := randn(r, s.o)
		run := func(z bool) (y, dw, db []float32) {
			useZ = z
			yb, wb, dbb := be.mustLoad(t, make([]float32, len(dy))), be.mustLoad(t, make([]float32, len(wt))), be.mustLoad(t, make([]float32, s.o))
			if err := be.Conv(yb, be.mustLoad(t, x), be.mustLoad(t, wt), be.mustLoad(t, bias), s.n, s.c, s.h, s.w, s.o, s.k, s.pad); err != nil {
				t.Fatalf("%+v: %v", s, err)
			}
			if err := be.ConvFilter(wb, dbb, be.mustLoad(t, x), be.mustLoad(t, dy), s.n, s.c, s.h, s.w, s.o, s.k, s.pad); err != nil {
				t.Fatalf("%+v: %v", s, err)
			}
			return yb.(*Buffer).Data(), wb.(*Buffer).Data(), dbb.(*Buffer).Data()
		}
		y2, dw2, db2 := run(false)
		y5, dw5, db5 := run(true)
		for _, c := range []struct {
			name       string
			avx2, avx5 []float32
		}{{"y", y2, y5}, {"dw", dw2, dw5}, {"db", db2, db5}} {
			for i := range c.avx2 {
				if math.Float32bits(c.avx2[i]) != math.Float32bits(c.avx5[i]) {
					t.Fatalf("%+v: %s[%d] = %g on AVX-512, %g on AVX2", s, c.name, i, c.avx5[i], c.avx2[i])
				}
			}
		}
	}
}

// TestDirectISA checks that the backend names the instruction set its
// k×k kernels run on, as useZ and useDirect choose.
func TestDirectISA(t *testing.T) {
	defer func(z, d bool) { useZ, useDirect = z, d }(useZ, useDirect)
	be := New()
	for _, c := range []struct {
		z, d bool
		want string
	}{{true, true, "k×k on AVX-512"}, {false, true, "AVX2"}, {false, false, ""}} {
		useZ, useDirect = c.z, c.d
		if got := be.DirectISA(); got != c.want {
			t.Errorf("useZ %v, useDirect %v: DirectISA() = %q, want %q", c.z, c.d, got, c.want)
		}
	}
}
