package model

import "fmt"

// KindBottleneck is torchvision's Bottleneck (ResNet-50's block; the
// stride on its 3×3 convolution, "ResNet v1.5"), Out its width: NAME.conv1
// 1×1 (Out), NAME.bn1, ReLU, NAME.conv2 3×3 (Out, stride), NAME.bn2, ReLU,
// NAME.conv3 1×1 (4·Out), NAME.bn3, plus the shortcut — the input itself,
// or, where the shape changes, NAME.downsample.0 (1×1 conv, stride) and
// NAME.downsample.1 (batch norm) — then ReLU. Its convolutions have no
// bias.
const KindBottleneck = "bottleneck"

func init() { register(KindBottleneck, bottleneck{}) }

// BottleneckExpansion is the bottleneck's output channels over its width.
const BottleneckExpansion = 4

// bottleneck is a composite, as block.
type bottleneck struct{}

func (bottleneck) expand(p *placer, i int, l LayerSpec, from int, shape Shape) (int, Shape, error) {
	if l.Name == "" || l.Out <= 0 || l.Stride < 0 || l.Kernel != 0 || l.Pad != 0 {
		return 0, shape, fmt.Errorf("%s: a bottleneck needs a name and its width (out; it outputs 4·out channels), and optionally a stride, nothing else", l.label(i))
	}
	stride, out := max(l.Stride, 1), BottleneckExpansion*l.Out
	sub := func(kind, name string, out, k, s, pad int) LayerSpec {
		return LayerSpec{Kind: kind, Name: l.Name + "." + name, Out: out, Kernel: k, Stride: s, Pad: pad, NoBias: kind == KindConv}
	}
	at, sh, err := from, shape, error(nil)
	for _, s := range []LayerSpec{sub(KindConv, "conv1", l.Out, 1, 1, 0), sub(KindBatchNorm, "bn1", 0, 0, 0, 0), {Kind: KindReLU},
		sub(KindConv, "conv2", l.Out, 3, stride, 1), sub(KindBatchNorm, "bn2", 0, 0, 0, 0), {Kind: KindReLU},
		sub(KindConv, "conv3", out, 1, 1, 0), sub(KindBatchNorm, "bn3", 0, 0, 0, 0)} {
		if at, sh, err = p.place(i, s, at, sh); err != nil {
			return 0, shape, err
		}
	}
	return p.residual(i, l, from, shape, at, sh, "downsample", stride)
}
