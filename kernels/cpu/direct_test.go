package cpu

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
)

// TestConv3x3 checks the direct convolution against the float64 sum of
// its definition, within the rounding of a c·9-term float32 sum, on both
// micro-kernels' tiles (4×16 and 8×8) and several tiles per row and
// channel block; and that a shape it does not run is refused untouched.
func TestConv3x3(t *testing.T) {
	be := New()
	if !be.Conv3x3Supports(16, 32, 32, 16) {
		t.Skip("no direct convolution on this CPU (it needs AVX2 and FMA3)")
	}
	wrap := func(v []float32) kernels.Buffer {
		b, err := be.Alloc(len(v))
		if err != nil {
			t.Fatal(err)
		}
		be.Upload(b, v)
		return b
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range []struct{ n, c, h, w, o int }{
		{2, 3, 8, 8, 8}, {1, 16, 32, 32, 16}, {2, 5, 16, 16, 4}, {1, 64, 8, 8, 64}, {1, 4, 16, 48, 12}, {3, 1, 5, 16, 8}, {1, 2, 3, 24, 16},
	} {
		x := make([]float32, s.n*s.c*s.h*s.w)
		wt := make([]float32, s.c*9*s.o)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for i := range wt {
			wt[i] = float32(r.NormFloat64())
		}
		y := make([]float32, s.n*s.o*s.h*s.w)
		for i := range y {
			y[i] = float32(math.NaN())
		}
		yb := wrap(y)
		if err := be.Conv3x3(yb, wrap(x), wrap(wt), s.n, s.c, s.h, s.w, s.o); err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		be.Download(y, yb)
		for n := range s.n {
			for oc := range s.o {
				for i := range s.h {
					for j := range s.w {
						var want, mag float64
						for ci := range s.c {
							for ki := range 3 {
								for kj := range 3 {
									yy, xx := i+ki-1, j+kj-1
									if yy < 0 || yy >= s.h || xx < 0 || xx >= s.w {
										continue
									}
									p := float64(wt[(ci*9+ki*3+kj)*s.o+oc]) * float64(x[((n*s.c+ci)*s.h+yy)*s.w+xx])
									want += p
									mag += math.Abs(p)
								}
							}
						}
						got := float64(y[((n*s.o+oc)*s.h+i)*s.w+j])
						if !(math.Abs(got-want) <= float64(s.c*9+1)*0x1p-24*mag+1e-30) {
							t.Fatalf("%+v: y[%d][%d][%d][%d] = %g, want %g", s, n, oc, i, j, got, want)
						}
					}
				}
			}
		}
	}
	y := make([]float32, 4*6*6)
	err := be.Conv3x3Filter(wrap(make([]float32, 4*2*9)), wrap(make([]float32, 2*6*6)), wrap(y), 1, 2, 6, 6, 4)
	if !errors.Is(err, kernels.ErrShape) {
		t.Errorf("filter of 6×6 rows: %v, want a refusal (ErrShape)", err)
	}
	err = be.Conv3x3(wrap(y), wrap(make([]float32, 2*6*6)), wrap(make([]float32, 2*9*4)), 1, 2, 6, 6, 4)
	if !errors.Is(err, kernels.ErrShape) || be.Conv3x3Supports(2, 6, 6, 4) {
		t.Errorf("6×6 rows: %v, want a refusal (ErrShape)", err)
	}
	if err := be.Conv3x3(wrap(y), wrap(make([]float32, 3)), wrap(make([]float32, 2*9*4)), 1, 2, 6, 6, 4); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("short x: %v, want ErrShape", err)
	}
}

// TestConv3x3Filter checks the weight gradient against the float64 sum of
// its definition, within the rounding of its float32 sums (8 lanes over
// the plane, then a tree, then the samples).
func TestConv3x3Filter(t *testing.T) {
	be := New()
	if !be.Conv3x3Supports(16, 32, 32, 16) {
		t.Skip("no direct convolution on this CPU (it needs AVX2 and FMA3)")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range []struct{ n, c, h, w, o int }{
		{2, 3, 8, 8, 8}, {1, 16, 32, 32, 16}, {3, 5, 16, 16, 4}, {2, 4, 8, 8, 64}, {1, 2, 3, 24, 16}, {17, 1, 32, 32, 4},
	} {
		x := make([]float32, s.n*s.c*s.h*s.w)
		dy := make([]float32, s.n*s.o*s.h*s.w)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for i := range dy {
			dy[i] = float32(r.NormFloat64())
		}
		xb, yb, wb := be.mustLoad(t, x), be.mustLoad(t, dy), be.mustLoad(t, make([]float32, s.o*s.c*9))
		if err := be.Conv3x3Filter(wb, xb, yb, s.n, s.c, s.h, s.w, s.o); err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		got := wb.(*Buffer).Data()
		for oc := range s.o {
			for ci := range s.c {
				for k := range 9 {
					var want, mag float64
					for n := range s.n {
						for i := range s.h {
							for j := range s.w {
								yy, xx := i+k/3-1, j+k%3-1
								if yy < 0 || yy >= s.h || xx < 0 || xx >= s.w {
									continue
								}
								p := float64(dy[((n*s.o+oc)*s.h+i)*s.w+j]) * float64(x[((n*s.c+ci)*s.h+yy)*s.w+xx])
								want += p
								mag += math.Abs(p)
							}
						}
					}
					g := float64(got[(oc*s.c+ci)*9+k])
					if !(math.Abs(g-want) <= float64(s.n*s.h*s.w/8+8+s.n)*0x1p-24*mag+1e-30) {
						t.Fatalf("%+v: dw[%d][%d][%d] = %g, want %g", s, oc, ci, k, g, want)
					}
				}
			}
		}
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

// BenchmarkConv3x3 is the direct convolution (and its weight gradient) at ResNet-20's 3×3 stride-1
// shapes, batch 64, in GFLOP/s (2·o·c·9·h·w per sample); BenchmarkConvLayer
// in trainer/model has the Im2col + GEMM figures for the same layers.
func BenchmarkConv3x3(b *testing.B) {
	be := New()
	for _, s := range []struct {
		name       string
		c, h, w, o int
	}{{"16x32x32", 16, 32, 32, 16}, {"32x16x16", 32, 16, 16, 32}, {"64x8x8", 64, 8, 8, 64}} {
		for _, op := range []string{"forward", "filter"} {
			b.Run(s.name+"/"+op, func(b *testing.B) {
				if !be.Conv3x3Supports(s.c, s.h, s.w, s.o) {
					b.Skip("no direct convolution on this CPU")
				}
				const n = 64
				x, _ := be.Alloc(n * s.c * s.h * s.w)
				y, _ := be.Alloc(n * s.o * s.h * s.w)
				wt, _ := be.Alloc(s.c * 9 * s.o)
				be.Fill(x, 0.5)
				be.Fill(wt, 0.25)
				b.ResetTimer()
				for range b.N {
					var err error
					if op == "forward" {
						err = be.Conv3x3(y, x, wt, n, s.c, s.h, s.w, s.o)
					} else {
						err = be.Conv3x3Filter(wt, x, y, n, s.c, s.h, s.w, s.o)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(2*float64(s.o*s.c*9*s.h*s.w)*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
