package model

import (
	"math/rand/v2"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/blas"
	"github.com/dml-project/dml/kernels/cpu"
)

// BenchmarkLeNet5Step is one training step (forward, loss, backward) of
// LeNet-5 on 1×28×28 images at batch 64, on each CPU backend (blas skips
// where OpenBLAS cannot be loaded).
func BenchmarkLeNet5Step(b *testing.B) {
	for _, name := range []string{"cpu", "blas"} {
		b.Run(name, func(b *testing.B) {
			var be kernels.Backend = cpu.New()
			if name == "blas" {
				be = openBLAS(b)
			}
			benchStep(b, Shape{C: 1, H: 28, W: 28}, LeNet5(10), be)
		})
	}
}

// BenchmarkResNet20Step is one training step of ResNet-20 on 3×32×32
// images at batch 64 on the blas backend with one thread (docs/results.md
// compares it with PyTorch's). Skips without OpenBLAS.
func BenchmarkResNet20Step(b *testing.B) {
	benchStep(b, Shape{C: 3, H: 32, W: 32}, ResNet20(10), openBLAS(b))
}

// openBLAS is the blas backend with one thread, or skips b.
func openBLAS(b *testing.B) kernels.Backend {
	be, err := blas.Open(kernels.Options{Threads: 1})
	if err != nil {
		b.Skipf("blas: %v", err)
	}
	return be
}

// benchStep times Model.Step of a 10-class network at batch 64 on be,
// on random images, reporting samples/s and the GFLOP/s of its matrix
// products (Arch.TrainFLOPs).
func benchStep(b *testing.B, in Shape, layers []LayerSpec, be kernels.Backend) {
	arch, err := NewNet(in, layers, 10, SoftmaxCE)
	if err != nil {
		b.Fatal(err)
	}
	const rows = 64
	m, err := New(arch, be, rows)
	if err != nil {
		b.Fatal(err)
	}
	be.Upload(m.Params, arch.InitParams(1))
	n := in.Size()
	r := rand.New(rand.NewPCG(1, 2))
	batch := make([]float32, rows*(n+1))
	for i := range rows * n {
		batch[i] = r.Float32()
	}
	for i := range rows {
		batch[rows*n+i] = float32(i % 10)
	}
	if err := m.Upload(batch, rows); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := m.Step(1.0/rows, nil); err != nil {
			b.Fatal(err)
		}
	}
	sps := float64(rows*b.N) / b.Elapsed().Seconds()
	b.ReportMetric(sps, "samples/s")
	b.ReportMetric(sps*float64(arch.TrainFLOPs())/1e9, "GFLOP/s")
}

// BenchmarkConvLayer is each distinct convolution of the presets at batch
// 64 on both CPU backends (cpu: pure-Go GEMM; blas: OpenBLAS, one
// thread), forward and backward (the weight gradient, and the input
// gradient but for a network's first layer, which takes none), as the
// model runs them (directly, or Im2col, GEMM and Transpose01), in GFLOP/s
// of their products (2·out·in·k·k·oh·ow per sample each).
// bench/torch/conv_ops.py prints oneDNN's and one OpenBLAS call's figures
// for the same convolutions. The blas runs skip without OpenBLAS.
func BenchmarkConvLayer(b *testing.B) {
	for _, c := range []struct {
		name                       string
		in, out, k, stride, pad, h int
		bias, first                bool
	}{
		{"lenet5.conv1", 1, 6, 5, 1, 2, 28, true, true},
		{"lenet5.conv2", 6, 16, 5, 1, 0, 14, true, false},
		{"resnet20.conv1", 3, 16, 3, 1, 1, 32, false, true},
		{"resnet20.16x32x32", 16, 16, 3, 1, 1, 32, false, false},
		{"resnet20.16-32s2", 16, 32, 3, 2, 1, 32, false, false},
		{"resnet20.shortcut2", 16, 32, 1, 2, 0, 32, false, false},
		{"resnet20.32x16x16", 32, 32, 3, 1, 1, 16, false, false},
		{"resnet20.32-64s2", 32, 64, 3, 2, 1, 16, false, false},
		{"resnet20.shortcut3", 32, 64, 1, 2, 0, 16, false, false},
		{"resnet20.64x8x8", 64, 64, 3, 1, 1, 8, false, false},
	} {
		for _, backend := range []string{"cpu", "blas"} {
			for _, dir := range []string{"forward", "backward"} {
				b.Run(c.name+"/"+backend+"/"+dir, func(b *testing.B) {
					var be kernels.Backend = cpu.New()
					if backend == "blas" {
						be = openBLAS(b)
					}
					benchConv(b, be, c.in, c.out, c.k, c.stride, c.pad, c.h, c.bias, c.first, dir == "backward")
				})
			}
		}
	}
}

// benchConv times one conv layer of BenchmarkConvLayer: the network's
// first layer, or after a ReLU (so that its input gradient is wanted).
func benchConv(b *testing.B, be kernels.Backend, in, out, k, stride, pad, h int, bias, first, backward bool) {
	const rows = 64
	layers := []LayerSpec{{Kind: KindConv, Name: "c", Out: out, Kernel: k, Stride: stride, Pad: pad, NoBias: !bias}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 10}}
	if !first {
		layers = append([]LayerSpec{{Kind: KindReLU}}, layers...)
	}
	arch, err := NewNet(Shape{C: in, H: h, W: h}, layers, 10, SoftmaxCE)
	if err != nil {
		b.Fatal(err)
	}
	m, err := New(arch, be, rows)
	if err != nil {
		b.Fatal(err)
	}
	be.Upload(m.Params, arch.InitParams(1))
	i := firstConv(m.nodes)
	n := m.nodes[i]
	batch := make([]float32, rows*(arch.Input.Size()+1))
	for j := range batch {
		batch[j] = float32(j%7) * 0.1
	}
	if err := m.Upload(batch, rows); err != nil {
		b.Fatal(err)
	}
	x, y, dy := m.input(i), m.view(m.acts[i], rows, n.out.Size()), m.view(m.dacts[i], rows, n.out.Size())
	var dx kernels.Buffer
	if !first {
		if dx, err = be.Alloc(rows * n.in.Size()); err != nil {
			b.Fatal(err)
		}
	}
	if err := m.convForward(i, n, x, y); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if backward {
			err = m.convBackward(i, n, x, dy, dx)
		} else {
			err = m.convForward(i, n, x, y)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	flop := 2 * float64(out) * float64(n.fanIn()) * float64(n.out.H*n.out.W) * rows
	if backward && !first {
		flop *= 2
	}
	b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
