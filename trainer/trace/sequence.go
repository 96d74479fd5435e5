package trace

import "github.com/dml-project/dml/kernels"

// The traced backend passes kernels.SequenceOps through, a span per op
// (ErrNoConv where the wrapped backend has none).

var _ kernels.SequenceOps = (*tracedBackend)(nil)

func (tb *tracedBackend) Embedding(y, ids, table kernels.Buffer, n, vocab, cols int) error {
	return opSpan(tb, "Embedding", func(s kernels.SequenceOps) error { return s.Embedding(y, ids, table, n, vocab, cols) }, "n", n)
}

func (tb *tracedBackend) EmbeddingGrad(dtable, ids, dy kernels.Buffer, n, vocab, cols int) error {
	return opSpan(tb, "EmbeddingGrad", func(s kernels.SequenceOps) error { return s.EmbeddingGrad(dtable, ids, dy, n, vocab, cols) }, "n", n)
}

func (tb *tracedBackend) Attention(y, probs, qkv kernels.Buffer, batch, seq, heads, width int) error {
	return opSpan(tb, "Attention", func(s kernels.SequenceOps) error { return s.Attention(y, probs, qkv, batch, seq, heads, width) }, "batch", batch)
}

func (tb *tracedBackend) AttentionGrad(dqkv, dy, qkv, probs kernels.Buffer, batch, seq, heads, width int) error {
	return opSpan(tb, "AttentionGrad", func(s kernels.SequenceOps) error {
		return s.AttentionGrad(dqkv, dy, qkv, probs, batch, seq, heads, width)
	}, "batch", batch)
}
