package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
)

// BenchmarkConvOps times the convolution and batch-norm ops at the
// presets' shapes (one sample's columns, as the model calls Im2col and
// Col2im; a batch of 64 for pooling and batch norm), reporting the bytes
// they move (b.SetBytes: input and output once each).
func BenchmarkConvOps(b *testing.B) {
	be := cpu.New()
	r := rand.New(rand.NewPCG(3, 4))
	buf := func(n int) kernels.Buffer {
		x, _ := be.Alloc(n)
		_ = be.Upload(x, randFloats(r, n))
		return x
	}
	for _, s := range []struct {
		name                    string
		c, h, w, k, stride, pad int
	}{
		{"lenet5.conv1", 1, 28, 28, 5, 1, 2},
		{"lenet5.conv2", 6, 14, 14, 5, 1, 0},
		{"resnet20.layer1", 16, 32, 32, 3, 1, 1},
		{"resnet20.layer2.0.conv1", 16, 32, 32, 3, 2, 1},
		{"resnet20.layer3", 64, 8, 8, 3, 1, 1},
	} {
		oh, ow := kernels.ConvOut(s.h, s.w, s.k, s.stride, s.pad)
		x, cols := buf(s.c*s.h*s.w), buf(s.c*s.k*s.k*oh*ow)
		bytes := int64(4 * (s.c*s.h*s.w + s.c*s.k*s.k*oh*ow))
		b.Run("Im2col/"+s.name, func(b *testing.B) {
			b.SetBytes(bytes)
			for range b.N {
				if err := be.Im2col(cols, x, 1, s.c, s.h, s.w, s.k, s.stride, s.pad); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Col2im/"+s.name, func(b *testing.B) {
			b.SetBytes(bytes)
			for range b.N {
				if err := be.Col2im(x, cols, 1, s.c, s.h, s.w, s.k, s.stride, s.pad); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	const n = 64
	for _, p := range []struct {
		name     string
		c, h, w  int
		k, strid int
	}{{"lenet5.pool1", 6, 28, 28, 2, 2}, {"lenet5.pool2", 16, 10, 10, 2, 2}, {"resnet20.gap", 64, 8, 8, 8, 8}} {
		oh, ow := kernels.ConvOut(p.h, p.w, p.k, p.strid, 0)
		x, y, dx := buf(n*p.c*p.h*p.w), buf(n*p.c*oh*ow), buf(n*p.c*p.h*p.w)
		bytes := int64(4 * n * p.c * (p.h*p.w + oh*ow))
		b.Run("MaxPool/"+p.name, func(b *testing.B) {
			b.SetBytes(bytes)
			for range b.N {
				_ = be.MaxPool(y, x, n*p.c, p.h, p.w, p.k, p.strid)
			}
		})
		b.Run("MaxPoolGrad/"+p.name, func(b *testing.B) {
			b.SetBytes(bytes)
			for range b.N {
				_ = be.MaxPoolGrad(dx, y, x, n*p.c, p.h, p.w, p.k, p.strid)
			}
		})
		b.Run("AvgPool/"+p.name, func(b *testing.B) {
			b.SetBytes(bytes)
			for range b.N {
				_ = be.AvgPool(y, x, n*p.c, p.h, p.w, p.k, p.strid)
			}
		})
	}
	for _, s := range []struct {
		name  string
		c, hw int
	}{{"resnet20.layer1", 16, 1024}, {"resnet20.layer3", 64, 64}} {
		x, y, dx, dy := buf(n*s.c*s.hw), buf(n*s.c*s.hw), buf(n*s.c*s.hw), buf(n*s.c*s.hw)
		g, bt, m, inv, rm, rv := buf(s.c), buf(s.c), buf(s.c), buf(s.c), buf(s.c), buf(s.c)
		bytes := int64(4 * 2 * n * s.c * s.hw)
		b.Run(fmt.Sprintf("BatchNormTrain/%s", s.name), func(b *testing.B) {
			b.SetBytes(bytes)
			for range b.N {
				_ = be.BatchNormTrain(y, m, inv, rm, rv, x, g, bt, n, s.c, s.hw, 1e-5, 0.1)
			}
		})
		b.Run(fmt.Sprintf("BatchNormGrad/%s", s.name), func(b *testing.B) {
			b.SetBytes(bytes)
			for range b.N {
				_ = be.BatchNormGrad(dx, g, bt, dy, x, m, inv, g, n, s.c, s.hw)
			}
		})
	}
}
