package kernels

import "fmt"

// SequenceOps is the optional op set (SequenceOf) of a transformer's
// sequence layers: the token embedding and causal multi-head
// self-attention (nanoGPT's CausalSelfAttention without its projections,
// which are Gemms). Every output is overwritten but EmbeddingGrad's,
// which adds.
type SequenceOps interface {
	// Embedding sets row r of y (n rows of cols) to row ids[r] of table
	// (vocab rows of cols); ids holds token ids as float32 values. An id
	// that is not an integer in [0, vocab) is an error wrapping ErrShape
	// where the backend checks ids (cpu); a device backend writes zeros
	// for it.
	Embedding(y, ids, table Buffer, n, vocab, cols int) error
	// EmbeddingGrad adds row r of dy to row ids[r] of dtable, in the
	// order of r (the rows a batch did not use are left as they are: the
	// caller zeroes dtable or leaves another gradient there to add to).
	EmbeddingGrad(dtable, ids, dy Buffer, n, vocab, cols int) error
	// Attention is causal multi-head self-attention over batch sequences
	// of seq positions: qkv holds, per position, the queries, keys and
	// values of width values each (3·width; head h's are the width/heads
	// values from h·width/heads of each), y receives per position the
	// heads' outputs side by side (width values): for head h, y =
	// softmax(Q·Kᵀ/√d + causal mask)·V, d = width/heads. probs
	// (batch·heads·seq·seq) receives the softmax's probabilities, zero
	// above the diagonal, for the backward pass.
	Attention(y, probs, qkv Buffer, batch, seq, heads, width int) error
	// AttentionGrad is Attention's backward pass given the probs it
	// wrote: dqkv receives the gradient with respect to qkv from dy's.
	AttentionGrad(dqkv, dy, qkv, probs Buffer, batch, seq, heads, width int) error
}

// SequenceOf returns b's SequenceOps (looking through decorators, as
// ConvOf).
func SequenceOf(b Backend) (SequenceOps, bool) { return optional[SequenceOps](b) }

// CheckEmbedding validates embedding shapes: ids of n, y (or dy) of n×cols
// and a table of vocab×cols.
func CheckEmbedding(op string, yLen, idsLen, tableLen, n, vocab, cols int) error {
	y, ok1 := mulAll(n, cols)
	t, ok2 := mulAll(vocab, cols)
	if n < 0 || vocab <= 0 || cols <= 0 || !ok1 || !ok2 || yLen != y || idsLen != n || tableLen != t {
		return fmt.Errorf("%s: rows %d of %d values, ids %d, table %d for n %d × vocab %d × cols %d: %w", op, yLen, cols, idsLen, tableLen, n, vocab, cols, ErrShape)
	}
	return nil
}

// CheckAttention validates attention shapes: qkv (or dqkv) of
// batch×seq×3·width, y (or dy) of batch×seq×width, probs of
// batch×heads×seq², heads dividing width.
func CheckAttention(op string, yLen, probsLen, qkvLen, batch, seq, heads, width int) error {
	y, ok1 := mulAll(batch, seq, width)
	q, ok2 := mulAll(batch, seq, 3, width)
	p, ok3 := mulAll(batch, heads, seq, seq)
	if batch < 0 || seq <= 0 || heads <= 0 || width <= 0 || width%heads != 0 || !ok1 || !ok2 || !ok3 ||
		yLen != y || qkvLen != q || probsLen != p {
		return fmt.Errorf("%s: y %d, probs %d, qkv %d for batch %d × seq %d × heads %d × width %d: %w", op, yLen, probsLen, qkvLen, batch, seq, heads, width, ErrShape)
	}
	return nil
}
