package model

import (
	"math"
	"testing"

	"github.com/dml-project/dml/kernels"
	"github.com/dml-project/dml/kernels/cpu"
)

// hostAllocCPU is the cpu backend posing as a device (it hands out "pinned"
// host memory), for the chunk bound.
type hostAllocCPU struct{ *cpu.Backend }

func (hostAllocCPU) HostAlloc(n int) ([]float32, error) { return make([]float32, n), nil }
func (hostAllocCPU) HostFree([]float32) error           { return nil }

func TestChunkFloatsByBackend(t *testing.T) {
	if got := chunkFloats(cpu.New()); got != convChunkFloats {
		t.Errorf("cpu: %d, want %d", got, convChunkFloats)
	}
	if got := chunkFloats(hostAllocCPU{cpu.New()}); got != deviceChunkFloats {
		t.Errorf("a device: %d, want %d", got, deviceChunkFloats)
	}
}

// TestConvChunks: a network's gradient and logits do not depend on how its
// convolutions split the batch: one sample per GEMM, chunks of 3 (the last
// one short), the whole batch at once; with the forward pass's columns
// kept and recomputed. They agree to rounding (the weight gradient's sums
// run in another order).
func TestConvChunks(t *testing.T) {
	arch, err := NewNet(Shape{C: 2, H: 9, W: 9}, []LayerSpec{
		{Kind: KindConv, Name: "c1", Out: 4, Kernel: 3, Pad: 1},
		{Kind: KindReLU},
		{Kind: KindConv, Name: "c2", Out: 3, Kernel: 3, Stride: 2, NoBias: true},
		{Kind: KindFlatten},
		{Kind: KindLinear, Name: "fc", Out: 5},
	}, 5, SoftmaxCE)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 7
	batch := sineBatch(arch.Input.Size(), rows)
	run := func(chunkSamples int, keep bool) []float32 {
		b := cpu.New()
		m, err := New(arch, b, rows)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Free()
		m.cv.chunkFloats = chunkSamples * m.nodes[firstConv(m.nodes)].columns()
		if !keep {
			clear(m.cv.kept)
		}
		// scratch for the smaller chunks: every conv's columns at this bound
		cols, _, _ := arch.convScratch(rows, m.cv.chunkFloats)
		if m.cv.cols, err = b.Alloc(cols); err != nil {
			t.Fatal(err)
		}
		return gradAndLogits(t, m, arch, batch, rows)
	}
	want := run(rows, true)
	for _, c := range []struct {
		samples int
		keep    bool
	}{{1, true}, {3, true}, {3, false}, {rows, false}} {
		got := run(c.samples, c.keep)
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-5*(1+math.Abs(float64(want[i])))) {
				t.Errorf("chunks of %d samples (columns kept: %v): value %d is %g, whole batch %g", c.samples, c.keep, i, got[i], want[i])
				break
			}
		}
	}
	var _ kernels.HostAllocator = hostAllocCPU{}
}

// withoutDirect is a cpu backend without its direct convolution (it
// keeps ConvOps and NormOps).
type withoutDirect struct {
	kernels.Backend
	kernels.ConvOps
	kernels.NormOps
}

// TestDirectConv: networks whose stride-1 convolutions run on the
// backend's direct convolution (forward, weight and input gradients)
// compute the gradient and logits that Im2col and GEMM compute, to
// rounding. The first has batch norm and residual blocks, a 16-wide and an
// 8-wide stage (the two 3×3 micro-kernels) and a stride-2 block; the
// second is LeNet-5 (5×5 kernels with biases at padding 2 and 0, 6 output
// channels, on the k×k micro-kernels) on a 20×20 image; the third mixes
// 7×7, 3×3 at paddings 0 and 2, 2×2 at stride 2 (Im2col) and padding 1,
// 1×1 (Im2col), a residual block and a kernel as large as its padded
// input, on a non-square image. Each at a full batch, a short one and an
// empty one.
func TestDirectConv(t *testing.T) {
	c := cpu.New()
	if !c.ConvSupports(8, 16, 16, 8, 3, 1) {
		t.Skip("no direct convolution on this CPU (AVX2 and FMA3)")
	}
	for _, tc := range []struct {
		name   string
		in     Shape
		layers []LayerSpec
		// direct passes: forward and input gradient decisions
		direct int
	}{
		{"resnet", Shape{C: 2, H: 16, W: 16}, []LayerSpec{
			{Kind: KindConv, Name: "c1", Out: 8, Kernel: 3, Pad: 1, NoBias: true},
			{Kind: KindBatchNorm, Name: "bn1"},
			{Kind: KindReLU},
			{Kind: KindBlock, Name: "b1", Out: 8},
			{Kind: KindConv, Name: "c2", Out: 16, Kernel: 3, Pad: 1, NoBias: true},
			{Kind: KindReLU},
			{Kind: KindBlock, Name: "b2", Out: 16, Stride: 2},
			{Kind: KindAvgPool},
			{Kind: KindFlatten},
			{Kind: KindLinear, Name: "fc", Out: 5},
			// c1 forward (the input takes no gradient); b1's two convs,
			// c2 (8→16, its input gradient 16→8) and b2's second (8×8)
			// forward and input gradient; b2's first is stride 2.
		}, 9},
		{"lenet5", Shape{C: 1, H: 20, W: 20}, LeNet5(5), 3},
		{"mixed", Shape{C: 2, H: 12, W: 11}, []LayerSpec{
			{Kind: KindConv, Name: "c1", Out: 5, Kernel: 7, Pad: 3},
			{Kind: KindReLU},
			{Kind: KindConv, Name: "c2", Out: 6, Kernel: 2, Stride: 2},
			{Kind: KindConv, Name: "c3", Out: 4, Kernel: 3},
			{Kind: KindConv, Name: "c4", Out: 7, Kernel: 3, Pad: 2, NoBias: true},
			{Kind: KindConv, Name: "c5", Out: 3, Kernel: 1},
			{Kind: KindConv, Name: "c6", Out: 4, Kernel: 2, Pad: 1},
			{Kind: KindBlock, Name: "b1", Out: 4},
			{Kind: KindConv, Name: "c7", Out: 3, Kernel: 6},
			{Kind: KindFlatten},
			{Kind: KindLinear, Name: "fc", Out: 5},
			// c1 (7×7 pad 3) forward; c3, c4 (pad 2), c6 (2×2 pad 1),
			// b1's two and c7 (6×6 on 7×6) forward and input gradient;
			// c2 is stride 2, c5 1×1.
		}, 13},
	} {
		arch, err := NewNet(tc.in, tc.layers, 5, SoftmaxCE)
		if err != nil {
			t.Fatal(err)
		}
		const maxRows = 5
		for _, rows := range []int{maxRows, 3, 0} { // a full batch, a short one, an empty one
			batch := sineBatch(arch.Input.Size(), rows)
			run := func(b kernels.Backend) ([]float32, int) {
				m, err := New(arch, b, maxRows)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Free()
				direct := 0
				for i := range m.nodes {
					if m.cv.directFwd[i] {
						direct++
					}
					if m.cv.directDX[i] {
						direct++
					}
				}
				return gradAndLogits(t, m, arch, batch, rows), direct
			}
			want, none := run(withoutDirect{c, c, c})
			got, direct := run(cpu.New())
			if none != 0 || direct != tc.direct {
				t.Fatalf("%s: %d and %d direct passes, want 0 and %d", tc.name, none, direct, tc.direct)
			}
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-4*(1+math.Abs(float64(want[i])))) {
					t.Errorf("%s, %d rows: value %d is %g with the direct convolution, %g with Im2col and GEMM", tc.name, rows, i, got[i], want[i])
				}
			}
		}
	}
}

// gradAndLogits runs a training step of m (weights InitParams(2)) on batch
// and returns its gradient and statistics, then the logits of a forward
// pass.
func gradAndLogits(t *testing.T, m *Model, arch Arch, batch []float32, rows int) []float32 {
	t.Helper()
	b := m.B
	b.Upload(m.Params, arch.InitParams(2))
	if err := m.Upload(batch, rows); err != nil {
		t.Fatal(err)
	}
	if err := m.Step(1, nil); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, m.NumParams()+GradStats)
	b.Download(out, m.Grads)
	logits, err := m.Forward()
	if err != nil {
		t.Fatal(err)
	}
	l := make([]float32, logits.Len())
	b.Download(l, logits)
	return append(out, l...)
}

// firstConv is the index of the first conv node (-1 without one).
func firstConv(nodes []node) int {
	for i, n := range nodes {
		if n.Kind == KindConv {
			return i
		}
	}
	return -1
}

// sineBatch is rows samples of in values, sin(0.37·i), labelled i mod 5.
func sineBatch(in, rows int) []float32 {
	batch := make([]float32, rows*(in+1))
	for i := range rows * in {
		batch[i] = float32(math.Sin(float64(i) * 0.37))
	}
	for i := range rows {
		batch[rows*in+i] = float32(i % 5)
	}
	return batch
}
