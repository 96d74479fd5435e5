package model

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dml-project/dml/kernels/cpu"
)

// tinyGPT is a GPT small enough for finite differences.
func tinyGPT(t *testing.T, seq int) Arch {
	t.Helper()
	arch, err := NewNet(Shape{C: 1, H: 1, W: 1, T: seq}, GPT(GPTConfig{Layers: 2, Heads: 2, Embed: 8, SeqLen: seq + 2}, 11), 11, TokenCE)
	if err != nil {
		t.Fatal(err)
	}
	return arch
}

// tokenBatch is rows windows of seq inputs and their targets, Upload's
// layout for TokenCE.
func tokenBatch(rows, seq, vocab int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]float32, 2*rows*seq)
	for i := range b {
		b[i] = float32(r.IntN(vocab))
	}
	return b
}

// TestGPTGradient checks a GPT's gradient (embeddings, positions, layer
// norms, attention, GELU, the residual adds and the tied head) against
// finite differences of its loss, at weights large enough that every
// part moves the loss.
func TestGPTGradient(t *testing.T) {
	const rows, seq = 2, 5
	arch := tinyGPT(t, seq)
	b := cpu.New()
	m, err := New(arch, b, rows)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	params := arch.InitParams(5)
	for i := range params {
		params[i] += float32(0.3 * r.NormFloat64())
	}
	batch := tokenBatch(rows, seq, 11, 7)
	loss := stepLoss(t, m, batch, rows)
	l0 := loss(params)
	if l0 < 0.5*float64(rows)*math.Log(11) || l0 > 4*float64(rows)*math.Log(11) {
		t.Fatalf("loss %v for %d sequences over 11 tokens: want about %v each", l0, rows, math.Log(11))
	}
	grad := make([]float32, arch.NumParams()+GradStats)
	b.Download(grad, m.Grads)
	const eps = 1e-3
	worst, at, big := 0.0, 0, 0
	for i := range params {
		num := central(loss, params, i, eps)
		if math.Abs(num) > 1e-2 {
			big++
		}
		if e := math.Abs(num-float64(grad[i])) / math.Max(0.05, math.Abs(num)); e > worst {
			worst, at = e, i
		}
	}
	if worst > 2e-2 {
		t.Errorf("worst relative gradient error %.3g > 2e-2, at %s", worst, arch.LayerOf(at))
	}
	if big < len(params)/4 {
		t.Errorf("only %d of %d weights move the loss by more than 1e-2 per unit: the check checks little", big, len(params))
	}
}

// TestGPTKeys pins the preset's arrays to nanoGPT's state_dict (bias=True,
// tied head): names, shapes and order, the alias lm_head.weight.
func TestGPTKeys(t *testing.T) {
	arch, err := NewNet(Shape{C: 1, H: 1, W: 1, T: 128}, GPT(GPTConfig{Layers: 4, Heads: 4, Embed: 128, SeqLen: 128}, 256), 256, TokenCE)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ts := range arch.Tensors() {
		names = append(names, ts.Name)
	}
	got := strings.Join(names[:15], " ")
	want := "transformer.wte.weight transformer.wpe.weight transformer.h.0.ln_1.weight transformer.h.0.ln_1.bias " +
		"transformer.h.0.attn.c_attn.weight transformer.h.0.attn.c_attn.bias transformer.h.0.attn.c_proj.weight transformer.h.0.attn.c_proj.bias " +
		"transformer.h.0.ln_2.weight transformer.h.0.ln_2.bias transformer.h.0.mlp.c_fc.weight transformer.h.0.mlp.c_fc.bias " +
		"transformer.h.0.mlp.c_proj.weight transformer.h.0.mlp.c_proj.bias transformer.h.1.ln_1.weight"
	if got != want {
		t.Errorf("arrays\n%s\nwant\n%s", got, want)
	}
	if n := names[len(names)-2] + " " + names[len(names)-1]; n != "transformer.ln_f.weight transformer.ln_f.bias" {
		t.Errorf("last arrays %s", n)
	}
	// nanoGPT's count (its get_num_params counts wpe too): 12·L·C² +
	// 13·L·C + vocab·C + seq·C + 2·C.
	const L, C = 4, 128
	if n, want := arch.NumParams(), 12*L*C*C+13*L*C+256*C+128*C+2*C; n != want {
		t.Errorf("%d parameters, want %d", n, want)
	}
	al := arch.Aliases()
	if len(al) != 1 || al[0].Name != "lm_head.weight" || al[0].Off != 0 || al[0].Len() != 256*C {
		t.Errorf("aliases %+v, want lm_head.weight on wte", al)
	}
}

// TestGPTRefuses: shapes that cannot be built say which layer and why.
func TestGPTRefuses(t *testing.T) {
	seq := Shape{C: 1, H: 1, W: 1, T: 16}
	for _, c := range []struct {
		in     Shape
		layers []LayerSpec
		want   string
	}{
		{seq, GPT(GPTConfig{Layers: 1, Heads: 3, Embed: 16, SeqLen: 16}, 256), "3 heads do not divide the width 16"},
		{seq, GPT(GPTConfig{Layers: 1, Heads: 2, Embed: 16, SeqLen: 8}, 256), "a sequence of 16 positions is longer than its table of 8 rows"},
		{Shape{C: 3, H: 4, W: 4}, GPT(GPTConfig{Layers: 1, Heads: 2, Embed: 16, SeqLen: 16}, 10), "token sequence"},
		{seq, []LayerSpec{{Kind: KindEmbedding, Name: "e", Rows: 256, Out: 8}, {Kind: KindConv, Name: "c", Out: 2, Kernel: 1}}, "gets a sequence of 16 positions"},
		{seq, []LayerSpec{{Kind: KindEmbedding, Name: "e", Rows: 256, Out: 8}, {Kind: KindTiedLinear, Name: "h", Tie: "x"}}, `tie "x": no embedding`},
	} {
		loss := TokenCE
		if c.in.T == 0 {
			loss = SoftmaxCE
		}
		_, err := NewNet(c.in, c.layers, 256, loss)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.in, err, c.want)
		}
	}
}
