package model

import (
	"slices"
	"testing"

	"github.com/dml-project/dml/kernels/cpu"
)

// TestSparseKeys: the keys SparseKeys leaves out are the rows of an
// untied embedding no token of the batch names and a position table's
// rows past the sequence, and the batch's gradient there is exactly 0;
// every row a token names is kept. A tied table is not sparse.
func TestSparseKeys(t *testing.T) {
	const rows, seq, vocab, used = 3, 6, 40, 12
	arch, err := NewNet(Shape{C: 1, H: 1, W: 1, T: seq}, []LayerSpec{
		{Kind: KindEmbedding, Name: "wte", Rows: vocab, Out: 8},
		{Kind: KindPosEmbed, Name: "wpe", Rows: seq + 4},
		{Kind: KindLayerNorm, Name: "ln"},
		{Kind: KindLinear, Name: "head", Out: vocab},
	}, vocab, TokenCE)
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New()
	m, err := New(arch, b, rows)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.SparseWeights(), vocab*8+4*8; got != want {
		t.Fatalf("SparseWeights %d, want %d (the embedding's table, the position table's rows past the sequence)", got, want)
	}
	batch := tokenBatch(rows, seq, used, 9) // tokens below 12 only
	if err := b.Upload(m.Params, arch.InitParams(3)); err != nil {
		t.Fatal(err)
	}
	if err := m.Upload(batch, rows); err != nil {
		t.Fatal(err)
	}
	if err := m.Step(1, nil); err != nil {
		t.Fatal(err)
	}
	grad := make([]float32, arch.NumParams()+GradStats)
	if err := b.Download(grad, m.Grads); err != nil {
		t.Fatal(err)
	}
	keys := m.SparseKeys(nil)
	if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
		t.Fatal("keys not strictly ascending")
	}
	kept := make([]bool, arch.NumParams())
	for _, k := range keys {
		kept[k] = true
	}
	named := map[int]bool{}
	for _, tok := range batch[:rows*seq] {
		named[int(tok)] = true
	}
	wte, wpe := arch.Layers()[0], arch.Layers()[1]
	for k := range kept {
		var want bool
		switch {
		case k < wte.End:
			want = named[(k-wte.WOff)/8]
		case k < wpe.End:
			want = (k-wpe.WOff)/8 < seq
		default:
			want = true
		}
		if kept[k] != want {
			t.Fatalf("key %d (%s): kept %v, want %v", k, arch.LayerOf(k), kept[k], want)
		}
		if !kept[k] && grad[k] != 0 {
			t.Fatalf("key %d (%s) left out, its gradient is %v", k, arch.LayerOf(k), grad[k])
		}
	}
	if most := arch.NumParams() - 4*8 - (vocab-used)*8; len(keys) > most {
		t.Fatalf("%d keys of %d: the batch's tokens name %d rows of %d, want %d keys at most", len(keys), arch.NumParams(), len(named), vocab, most)
	}

	// nanoGPT's tied head reads every row of wte; wpe as long as the
	// sequence: nothing sparse.
	gpt, err := NewNet(Shape{C: 1, H: 1, W: 1, T: seq}, GPT(GPTConfig{Layers: 1, Heads: 2, Embed: 8, SeqLen: seq}, vocab), vocab, TokenCE)
	if err != nil {
		t.Fatal(err)
	}
	mg, err := New(gpt, b, rows)
	if err != nil {
		t.Fatal(err)
	}
	if n := mg.SparseWeights(); n != 0 {
		t.Errorf("a GPT with a tied head and a position table of the sequence's length: SparseWeights %d, want 0", n)
	}
}
