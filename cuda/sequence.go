//go:build cuda

package cuda

import (
	"math"

	"github.com/dml-project/dml/kernels"
)

// The sequence ops (kernels/cu/transformer.cu, module transformer;
// ABI.md): our kernels, one thread per output row or table element (the
// embedding's gradient after a stable sort of the rows by token), sums
// in float64 in a fixed order. The embedding's agree with the CPU's to the
// bit (an id outside the table gives zeros here, where the CPU refuses
// it); attention within float32 rounding (the CPU's runs on its GEMMs).
// Attention keeps a head's vector per thread: heads of more than
// maxHeadWidth values are refused.

var _ kernels.SequenceOps = (*Backend)(nil)

// maxHeadWidth is transformer.cu's DML_ATT_MAXD.
const maxHeadWidth = 128

// Embedding: see kernels.SequenceOps.
func (be *Backend) Embedding(y, ids, table kernels.Buffer, n, vocab, cols int) error {
	const op = "Embedding"
	yd, id, td := be.buf(y), be.buf(ids), be.buf(table)
	if err := be.usable(op); err != nil {
		return err
	}
	if err := kernels.CheckEmbedding("cuda."+op, yd.n, id.n, td.n, n, vocab, cols); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return be.done(op, be.launch1D(be.dev.k.embedding, n*cols, ptr(yd), ptr(id), ptr(td), i64(n), i64(vocab), i64(cols)), n, vocab, cols)
}

// EmbeddingGrad: see kernels.SequenceOps.
func (be *Backend) EmbeddingGrad(dtable, ids, dy kernels.Buffer, n, vocab, cols int) error {
	const op = "EmbeddingGrad"
	dt, id, gd := be.buf(dtable), be.buf(ids), be.buf(dy)
	if err := be.usable(op); err != nil {
		return err
	}
	if err := kernels.CheckEmbedding("cuda."+op, gd.n, id.n, dt.n, n, vocab, cols); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	// The sort counts rows and their places in int32 (transformer.cu), and
	// its scratch holds a count per token per block of 256 rows.
	if n > math.MaxInt32 || vocab > math.MaxInt32 {
		return be.shapeErr(op, "%d rows of a %d-token table: the gradient's sort takes at most %d of each", n, vocab, math.MaxInt32)
	}
	// The rows sorted by token, stably (transformer.cu), in one scratch of
	// ints: each block's counts per token (then where its rows go), each
	// row's rank in its block, the sorted rows, each token's first. The
	// counts are n/256 × vocab ints (32 KiB for the GPT's 8192 rows of a
	// byte vocabulary, 6.4 MB at 50,000 tokens), and one block turns them
	// into places: sized for dml's byte-level text; a tokenizer's large
	// vocabulary would want the per-token totals summed grid-wide first.
	blocks := ceilDiv(n, threads)
	s, err := be.scratch(op, blocks*vocab+2*n+vocab+1, n, vocab, cols)
	if err != nil {
		return err
	}
	defer be.release(s)
	counts := s.ptr
	rank := counts + devPtr(4*blocks*vocab)
	order := rank + devPtr(4*n)
	start := order + devPtr(4*n)
	k := &be.dev.k
	for _, step := range []func() error{
		func() error { return be.q.memset32(counts, 0, blocks*vocab) },
		func() error {
			return be.launch(k.embeddingCount, blocks, 1, threads, ptrAt(counts), ptrAt(rank), ptr(id), i64(n), i64(vocab))
		},
		func() error {
			return be.launch(k.embeddingOffsets, 1, 1, threads, ptrAt(counts), ptrAt(start), i64(blocks), i64(vocab))
		},
		func() error {
			return be.launch1D(k.embeddingPlace, n, ptrAt(order), ptrAt(counts), ptrAt(rank), ptr(id), i64(n), i64(vocab))
		},
	} {
		if err := step(); err != nil {
			return be.deviceErr(op, dimsString([]int{n, vocab, cols}), err)
		}
	}
	return be.done(op, be.launch1D(k.embeddingGrad, vocab*cols, ptr(dt), ptrAt(order), ptrAt(start), ptr(gd), i64(vocab), i64(cols)), n, vocab, cols)
}

// attentionCheck validates an attention's buffers and its heads' width.
func (be *Backend) attentionCheck(op string, y, probs, qkv *Buffer, batch, seq, heads, width int) error {
	if err := be.usable(op); err != nil {
		return err
	}
	if err := kernels.CheckAttention("cuda."+op, y.n, probs.n, qkv.n, batch, seq, heads, width); err != nil {
		return err
	}
	if width/heads > maxHeadWidth {
		return be.shapeErr(op, "heads of %d values (width %d / %d heads): this backend's attention takes at most %d", width/heads, width, heads, maxHeadWidth)
	}
	return nil
}

// Attention: see kernels.SequenceOps: cuBLAS's products where they serve
// (attention.go), else one thread per (sequence, head, position).
func (be *Backend) Attention(y, probs, qkv kernels.Buffer, batch, seq, heads, width int) error {
	const op = "Attention"
	yd, pd, qd := be.buf(y), be.buf(probs), be.buf(qkv)
	if err := be.attentionCheck(op, yd, pd, qd, batch, seq, heads, width); err != nil {
		return err
	}
	if batch == 0 {
		return nil
	}
	if be.libAttentionServes(batch, seq, heads, width) {
		return be.done(op, attentionForward(libAttention{be}, yd.ptr, pd.ptr, qd.ptr, batch, seq, heads, width, attentionScale(width/heads)),
			batch, seq, heads, width)
	}
	return be.done(op, be.launch1D(be.dev.k.attention, batch*heads*seq, ptr(yd), ptr(pd), ptr(qd),
		i64(batch), i64(seq), i64(heads), i64(width)), batch, seq, heads, width)
}

// attentionScale is 1/√d in float32, as the CPU backends scale the scores.
func attentionScale(d int) float32 { return float32(1 / math.Sqrt(float64(d))) }

// AttentionGrad: see kernels.SequenceOps: cuBLAS's products where they
// serve (attention.go), else three kernels: each row's
// Σ p·dP (kept in dqkv's query slots), then the keys' and values'
// gradients per position, then the queries' (over those slots).
func (be *Backend) AttentionGrad(dqkv, dy, qkv, probs kernels.Buffer, batch, seq, heads, width int) error {
	const op = "AttentionGrad"
	dq, gd, qd, pd := be.buf(dqkv), be.buf(dy), be.buf(qkv), be.buf(probs)
	if err := be.attentionCheck(op, gd, pd, qd, batch, seq, heads, width); err != nil {
		return err
	}
	if dq.n != qd.n {
		return be.shapeErr(op, "dqkv has %d elements, qkv %d", dq.n, qd.n)
	}
	if batch == 0 {
		return nil
	}
	if be.libAttentionServes(batch, seq, heads, width) {
		ds, err := be.scratch(op, batch*heads*seq*seq, batch, seq, heads, width)
		if err != nil {
			return err
		}
		defer be.release(ds)
		return be.done(op, attentionBackward(libAttention{be}, dq.ptr, gd.ptr, qd.ptr, pd.ptr, ds.ptr, batch, seq, heads, width,
			attentionScale(width/heads)), batch, seq, heads, width)
	}
	k := &be.dev.k
	args := []uint64{ptr(dq), ptr(gd), ptr(qd), ptr(pd), i64(batch), i64(seq), i64(heads), i64(width)}
	for _, f := range []function{k.attentionGradDot, k.attentionGradKV, k.attentionGradQ} {
		if err := be.launch1D(f, batch*heads*seq, args...); err != nil {
			return be.deviceErr(op, dimsString([]int{batch, seq, heads, width}), err)
		}
	}
	return be.record(op, batch, seq, heads, width)
}
