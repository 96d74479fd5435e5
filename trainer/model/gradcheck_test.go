package model

import (
	"math"
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels/cpu"
)

// TestModelGradient checks the whole model's backward pass (every layer,
// ReLU masks, both losses) against central finite differences of the
// summed loss.
func TestModelGradient(t *testing.T) {
	for _, tc := range []struct {
		hidden  []int
		outputs int
		loss    Loss
	}{{[]int{7, 5}, 4, SoftmaxCE}, {nil, 3, SoftmaxCE}, {[]int{6}, 1, SigmoidCE}} {
		arch, err := NewArch(9, tc.hidden, tc.outputs, tc.loss)
		if err != nil {
			t.Fatal(err)
		}
		b := cpu.New()
		const rows = 5
		m, err := New(arch, b, rows)
		if err != nil {
			t.Fatal(err)
		}
		params := arch.InitParams(3)
		x := make([]float32, rows*9)
		for i := range x {
			x[i] = float32(math.Sin(float64(i)*1.7)) * 2
		}
		y := []float32{0, 1, float32(2 % max(tc.outputs, 2)), 1, 0}
		if tc.outputs == 1 {
			y = []float32{0, 1, 1, 0, 1}
		}
		batch := append(append([]float32(nil), x...), y...)
		loss := stepLoss(t, m, batch, rows)
		loss(params)
		grad := make([]float32, arch.NumParams()+GradStats)
		b.Download(grad, m.Grads)
		const eps = 2e-3
		worst := 0.0
		for i := range params {
			num := central(loss, params, i, eps)
			if e := math.Abs(num-float64(grad[i])) / math.Max(1, math.Abs(num)); e > 5e-3 {
				t.Logf("%v %s i=%d num %v ana %v", arch.Sizes, arch.LayerOf(i), i, num, grad[i])
			}
			worst = math.Max(worst, math.Abs(num-float64(grad[i]))/math.Max(1, math.Abs(num)))
		}
		if worst > 2e-2 {
			t.Errorf("%v: worst relative gradient error %.3g > 2e-2", arch.Sizes, worst)
		}
	}
}

// TestNetGradient checks convolutional networks' backward passes (conv
// with and without bias, padding and stride, max and average pooling,
// global pooling, flatten) against central finite differences, as
// TestModelGradient does for MLPs.
func TestNetGradient(t *testing.T) {
	for _, tc := range []struct {
		in     Shape
		layers []LayerSpec
		out    int
	}{
		{Shape{C: 2, H: 6, W: 6}, []LayerSpec{{Kind: KindConv, Name: "c1", Out: 3, Kernel: 3, Pad: 1}, {Kind: KindReLU}, {Kind: KindMaxPool, Kernel: 2},
			{Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 4}}, 4},
		{Shape{C: 1, H: 7, W: 7}, []LayerSpec{{Kind: KindConv, Name: "c1", Out: 2, Kernel: 3, Stride: 2, NoBias: true}, {Kind: KindReLU},
			{Kind: KindConv, Name: "c2", Out: 3, Kernel: 2}, {Kind: KindAvgPool}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 3}}, 3},
		// A "same" 5×5 convolution with as many outputs as inputs, on a
		// non-square image: its input gradient runs as a convolution of dY
		// with the flipped kernels (node.flipped).
		{Shape{C: 1, H: 6, W: 5}, []LayerSpec{{Kind: KindConv, Name: "c0", Out: 2, Kernel: 3, Pad: 1}, {Kind: KindReLU},
			{Kind: KindConv, Name: "c1", Out: 2, Kernel: 5, Pad: 2}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 3}}, 3},
		{Shape{C: 3, H: 4, W: 4}, []LayerSpec{{Kind: KindAvgPool, Kernel: 2}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 2}}, 2},
		// Local response normalisation (AlexNet's, and an even window with
		// a large alpha, where the cross-channel terms matter).
		{Shape{C: 2, H: 5, W: 5}, []LayerSpec{{Kind: KindConv, Name: "c1", Out: 6, Kernel: 3, Pad: 1}, {Kind: KindLRN, Size: 5, Alpha: 1e-4, Beta: 0.75, K: 2},
			{Kind: KindConv, Name: "c2", Out: 4, Kernel: 3}, {Kind: KindLRN, Size: 4, Alpha: 0.5, Beta: 0.75, K: 1}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 3}}, 3},
		// A padded max pool (ResNet-50's stem's) after a ReLU.
		{Shape{C: 3, H: 5, W: 5}, []LayerSpec{{Kind: KindConv, Name: "c1", Out: 2, Kernel: 3, Pad: 1}, {Kind: KindReLU},
			{Kind: KindMaxPool, Kernel: 3, Stride: 2, Pad: 1}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 3}}, 3},
		// Batch norm and residual blocks, with an identity and a projection
		// shortcut (ResNet's), then global pooling.
		{Shape{C: 2, H: 6, W: 6}, []LayerSpec{{Kind: KindConv, Name: "c1", Out: 3, Kernel: 3, Pad: 1, NoBias: true}, {Kind: KindBatchNorm, Name: "bn1"}, {Kind: KindReLU},
			{Kind: KindBlock, Name: "b1", Out: 3}, {Kind: KindBlock, Name: "b2", Out: 4, Stride: 2}, {Kind: KindAvgPool}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 3}}, 3},
		// A bottleneck block with a downsample shortcut (the identity one is
		// the basic block's add, above).
		{Shape{C: 2, H: 6, W: 6}, []LayerSpec{{Kind: KindConv, Name: "c1", Out: 8, Kernel: 3, Pad: 1, NoBias: true}, {Kind: KindBatchNorm, Name: "bn1"}, {Kind: KindReLU},
			{Kind: KindBottleneck, Name: "b2", Out: 3, Stride: 2}, {Kind: KindAvgPool}, {Kind: KindFlatten}, {Kind: KindLinear, Name: "fc", Out: 3}}, 3},
		// A transformer's MLP: layer norm, GELU in both forms (the input
		// gradient of a layer norm read by one layer, and of a flatten
		// read by a layer norm).
		{Shape{C: 2, H: 2, W: 2}, []LayerSpec{{Kind: KindFlatten}, {Kind: KindLayerNorm, Name: "ln0"}, {Kind: KindLinear, Name: "fc1", Out: 6},
			{Kind: KindGELU}, {Kind: KindLayerNorm, Name: "ln1"}, {Kind: KindLinear, Name: "fc2", Out: 5}, {Kind: KindGELU, Approximate: "tanh"},
			{Kind: KindDropout, P: 0.3}, {Kind: KindLinear, Name: "fc", Out: 3}}, 3},
		// Dropout in place (on a linear's output) and not (on a GELU's,
		// which the GELU's backward reads): a fixed mask per row key.
		{Shape{C: 6, H: 1, W: 1}, []LayerSpec{{Kind: KindLinear, Name: "fc1", Out: 8}, {Kind: KindDropout, P: 0.5}, {Kind: KindGELU},
			{Kind: KindDropout, P: 0.2}, {Kind: KindLinear, Name: "fc", Out: 3}}, 3},
	} {
		arch, err := NewNet(tc.in, tc.layers, tc.out, SoftmaxCE)
		if err != nil {
			t.Fatal(err)
		}
		b := cpu.New()
		const rows = 3
		m, err := New(arch, b, rows)
		if err != nil {
			t.Fatal(err)
		}
		params := arch.InitParams(5)
		n := tc.in.Size()
		batch := make([]float32, rows*(n+1))
		for i := range rows * n {
			batch[i] = float32(math.Sin(float64(i)*0.77+1.1)) * 2
		}
		for r := range rows {
			batch[rows*n+r] = float32(r % tc.out)
		}
		loss := stepLoss(t, m, batch, rows)
		loss(params)
		grad := make([]float32, arch.NumParams()+GradStats)
		b.Download(grad, m.Grads)
		const eps = 5e-4
		// A max pool is not differentiable where a window's two largest
		// values tie: a perturbation that swaps them makes the difference
		// quotient meaningless there. A weight moved by ±eps moves a conv
		// output by at most eps·max|x| = 2·eps (inputs are within ±2), so
		// windows whose top two are more than twice that apart cannot swap;
		// the input is chosen so, and that is checked.
		for i, nd := range m.nodes {
			if nd.Kind != KindMaxPool {
				continue
			}
			x := make([]float32, rows*nd.in.Size())
			b.Download(x, m.input(i))
			if gap := minMaxGap(x, rows*nd.in.C, nd.in.H, nd.in.W, nd.Kernel, nd.Stride, nd.Pad); gap <= 4*eps {
				t.Fatalf("%s: a pooling window's two largest inputs are %.3g apart: pick an input farther from a tie", arch.Describe(), gap)
			}
		}
		// A ReLU is not differentiable at 0: where moving a weight by ±eps
		// flips some ReLU's mask (after a batch norm, inputs near 0 are
		// common), the difference quotient straddles a kink and is not the
		// derivative; those weights are left out (counted, and few).
		mask := func() []bool {
			var bits []bool
			for i, nd := range m.nodes {
				if nd.Kind == KindReLU {
					y := make([]float32, rows*nd.out.Size())
					b.Download(y, m.output(i))
					for _, v := range y {
						bits = append(bits, v > 0)
					}
				}
			}
			return bits
		}
		base := mask()
		worst, at, skipped := 0.0, 0, 0
		for i := range params {
			p := append([]float32(nil), params...)
			p[i] += eps
			up := loss(p)
			same := slices.Equal(mask(), base)
			p[i] -= 2 * eps
			down := loss(p)
			if !same || !slices.Equal(mask(), base) {
				skipped++
				continue
			}
			num := (up - down) / (2 * eps)
			if e := math.Abs(num-float64(grad[i])) / math.Max(1, math.Abs(num)); e > worst {
				worst, at = e, i
			}
		}
		if worst > 2e-2 {
			t.Errorf("%s: worst relative gradient error %.3g > 2e-2, at %s", arch.Describe(), worst, arch.LayerOf(at))
		}
		if skipped > len(params)/3 { // about a quarter after batch norms, none elsewhere
			t.Errorf("%s: %d of %d weights straddle a ReLU kink: too few checked", arch.Describe(), skipped, len(params))
		}
	}
}

// minMaxGap is the smallest difference between the two largest values of
// any k×k window (at stride) of planes h×w planes, leaving out windows a
// ReLU zeroed (two exact zeros on top).
func minMaxGap(x []float32, planes, h, w, k, stride, pad int) float64 {
	gap := math.Inf(1)
	oh, ow := convOut(h, w, k, stride, pad)
	for p := range planes {
		for oy := range oh {
			for ox := range ow {
				best, second := math.Inf(-1), math.Inf(-1)
				for i := max(oy*stride-pad, 0); i < min(oy*stride-pad+k, h); i++ {
					for j := max(ox*stride-pad, 0); j < min(ox*stride-pad+k, w); j++ {
						v := float64(x[(p*h+i)*w+j])
						if v > best {
							best, second = v, best
						} else if v > second {
							second = v
						}
					}
				}
				if best == 0 && second == 0 {
					continue // all ≤ 0 after a ReLU: no gradient flows through either
				}
				gap = math.Min(gap, best-second)
			}
		}
	}
	return gap
}

// stepLoss is the summed loss of one Step of m on batch (rows rows, the
// layout Upload takes) at the weights given: the finite differences'
// function. It leaves m.Grads holding that step's gradient.
func stepLoss(t *testing.T, m *Model, batch []float32, rows int) func([]float32) float64 {
	stats := make([]float32, GradStats)
	return func(p []float32) float64 {
		t.Helper()
		if err := m.B.Upload(m.Params, p); err != nil {
			t.Fatal(err)
		}
		if err := m.Upload(batch, rows); err != nil {
			t.Fatal(err)
		}
		if err := m.Step(1, nil); err != nil {
			t.Fatal(err)
		}
		if err := m.B.Download(stats, m.Stats()); err != nil {
			t.Fatal(err)
		}
		return float64(stats[0])
	}
}

// central is the central difference of loss at params along weight i,
// moved by ±eps (as float32).
func central(loss func([]float32) float64, params []float32, i int, eps float64) float64 {
	p := append([]float32(nil), params...)
	p[i] += float32(eps)
	up := loss(p)
	p[i] -= float32(2 * eps)
	down := loss(p)
	return (up - down) / (2 * eps)
}
