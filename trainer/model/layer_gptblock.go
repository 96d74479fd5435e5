package model

import (
	"fmt"
	"math"
)

// KindGPTBlock is nanoGPT's Block, pre-norm: x + attn(ln_1(x)), then
// that + mlp(ln_2(that)), with NAME.ln_1, NAME.attn.c_attn (width → 3 ×
// width), Heads-head causal attention, NAME.attn.c_proj, NAME.ln_2,
// NAME.mlp.c_fc (4 × width), GELU and NAME.mlp.c_proj. Std, where set,
// is its linear layers' init (N(0, Std²), zero biases), the two output
// projections' scaled by 1/√(2·Rows), Rows being the network's blocks
// (nanoGPT's n_layer).
const KindGPTBlock = "gptblock"

func init() { register(KindGPTBlock, gptBlock{}) }

// gptBlock is a composite: it places as its layers and is never a node.
type gptBlock struct{}

func (gptBlock) expand(p *placer, i int, l LayerSpec, from int, shape Shape) (int, Shape, error) {
	if l.Name == "" || l.Heads <= 0 || l.Out != 0 || l.Kernel != 0 || l.Stride != 0 || l.Pad != 0 || l.Rows < 0 {
		return 0, shape, fmt.Errorf("%s: a gptblock needs a name and heads (and optionally std and rows, the blocks), nothing else", l.label(i))
	}
	if shape.T <= 0 || !shape.Flat() {
		return 0, shape, fmt.Errorf("%s: takes a sequence of vectors (after the embeddings), but it gets %v values per sample", l.label(i), shape)
	}
	width, projStd := shape.C, l.Std
	if l.Rows > 0 {
		projStd = l.Std / math.Sqrt(2*float64(l.Rows))
	}
	sub := func(kind, name string, out int, std float64) LayerSpec {
		return LayerSpec{Kind: kind, Name: l.Name + "." + name, Out: out, Std: std}
	}
	x := from
	steps := []LayerSpec{
		sub(KindLayerNorm, "ln_1", 0, 0),
		sub(KindLinear, "attn.c_attn", 3*width, l.Std),
		{Kind: KindAttention, Heads: l.Heads},
		sub(KindLinear, "attn.c_proj", width, projStd),
	}
	at, sh, err := p.chain(i, steps, x, shape)
	if err != nil {
		return 0, shape, err
	}
	p.ns = append(p.ns, node{LayerSpec: LayerSpec{Kind: kindAdd}, in: sh, out: sh, param: -1, from: at, plus: x})
	x = len(p.ns) - 1
	steps = []LayerSpec{
		sub(KindLayerNorm, "ln_2", 0, 0),
		sub(KindLinear, "mlp.c_fc", 4*width, l.Std),
		{Kind: KindGELU},
		sub(KindLinear, "mlp.c_proj", width, projStd),
	}
	if at, sh, err = p.chain(i, steps, x, sh); err != nil {
		return 0, shape, err
	}
	p.ns = append(p.ns, node{LayerSpec: LayerSpec{Kind: kindAdd}, in: sh, out: sh, param: -1, from: at, plus: x})
	return len(p.ns) - 1, sh, nil
}

// chain places layers one after another from node from (of the given
// shape), for layer i of the Net.
func (p *placer) chain(i int, ls []LayerSpec, from int, shape Shape) (int, Shape, error) {
	var err error
	for _, l := range ls {
		if from, shape, err = p.place(i, l, from, shape); err != nil {
			return 0, shape, err
		}
	}
	return from, shape, nil
}
