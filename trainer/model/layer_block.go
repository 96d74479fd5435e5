package model

import "fmt"

// KindBlock is He et al.'s basic residual block (Out channels, Stride):
// NAME.conv1 3×3 (stride), NAME.bn1, ReLU, NAME.conv2 3×3, NAME.bn2,
// plus the shortcut — the input itself, or, where the shape changes,
// NAME.shortcut.0 (1×1 conv, stride) and NAME.shortcut.1 (batch norm)
// — then ReLU. Its convolutions have no bias.
const KindBlock = "block"

func init() {
	register(KindBlock, block{})
}

// block is He et al.'s basic residual block (KindBlock: Out channels,
// Stride), torchvision's BasicBlock with the option-B shortcut: the
// input itself, or, where the shape changes, NAME.shortcut.0 (1×1 conv,
// stride) and NAME.shortcut.1 (batch norm). Its convolutions have no
// bias. It is a composite: it places as its layers and is never a node.
type block struct{}

// expand places the block as its layers: NAME.conv1 3×3 (stride),
// NAME.bn1, ReLU, NAME.conv2 3×3, NAME.bn2, the shortcut, their sum (an
// add node) and a ReLU.
func (block) expand(p *placer, i int, l LayerSpec, from int, shape Shape) (int, Shape, error) {
	if l.Name == "" || l.Out <= 0 || l.Stride < 0 || l.Kernel != 0 || l.Pad != 0 {
		return 0, shape, fmt.Errorf("%s: a block needs a name and out channels (and optionally a stride), nothing else", l.label(i))
	}
	stride := max(l.Stride, 1)
	sub := func(kind, name string, out, k, s, pad int) LayerSpec {
		return LayerSpec{Kind: kind, Name: l.Name + "." + name, Out: out, Kernel: k, Stride: s, Pad: pad, NoBias: kind == KindConv}
	}
	x := from
	at, sh, err := p.place(i, sub(KindConv, "conv1", l.Out, 3, stride, 1), x, shape)
	for _, s := range []LayerSpec{sub(KindBatchNorm, "bn1", 0, 0, 0, 0), {Kind: KindReLU}, sub(KindConv, "conv2", l.Out, 3, 1, 1), sub(KindBatchNorm, "bn2", 0, 0, 0, 0)} {
		if err != nil {
			return 0, shape, err
		}
		at, sh, err = p.place(i, s, at, sh)
	}
	if err != nil {
		return 0, shape, err
	}
	return p.residual(i, l, x, shape, at, sh, "shortcut", stride)
}

// residual finishes a residual block (layer i, l) whose path, from node x
// of the given shape, ends at node at of shape sh: the shortcut — x
// itself, or where the shape changes NAME.SHORT.0 (1×1 conv, stride, no
// bias) and NAME.SHORT.1 (batch norm) — their sum and a ReLU.
func (p *placer) residual(i int, l LayerSpec, x int, shape Shape, at int, sh Shape, short string, stride int) (int, Shape, error) {
	from := x
	if stride != 1 || shape.C != sh.C {
		s, ssh, err := p.place(i, LayerSpec{Kind: KindConv, Name: l.Name + "." + short + ".0", Out: sh.C, Kernel: 1, Stride: stride, NoBias: true}, x, shape)
		if err == nil {
			s, ssh, err = p.place(i, LayerSpec{Kind: KindBatchNorm, Name: l.Name + "." + short + ".1"}, s, ssh)
		}
		if err != nil {
			return 0, shape, err
		}
		if ssh != sh {
			return 0, shape, fmt.Errorf("%s: the shortcut gives %v, the block's path %v", l.label(i), ssh, sh)
		}
		from = s
	}
	p.ns = append(p.ns, node{LayerSpec: LayerSpec{Kind: kindAdd}, in: sh, out: sh, param: -1, from: at, plus: from})
	return p.place(i, LayerSpec{Kind: KindReLU}, len(p.ns)-1, sh)
}
