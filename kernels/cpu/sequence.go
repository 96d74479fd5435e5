package cpu

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"

	"github.com/dml-project/dml/kernels"
)

var _ kernels.SequenceOps = (*Backend)(nil)

// checkTokens reports the first of ids that is not a row index of a
// table of vocab rows (an integer in [0, vocab)), naming op.
func checkTokens(op string, ids []float32, vocab int) error {
	for r, id := range ids {
		if !(id >= 0 && id < float32(vocab)) || id != float32(math.Trunc(float64(id))) {
			return fmt.Errorf("%s: token %d is %v, not an id in [0, %d): %w", op, r, id, vocab, kernels.ErrShape)
		}
	}
	return nil
}

// Embedding: see kernels.SequenceOps. The ids are checked before
// anything is written.
func (be *Backend) Embedding(y, ids, table kernels.Buffer, n, vocab, cols int) error {
	yd, id, td := be.raw(y), be.data(ids), be.data(table)
	if err := kernels.CheckEmbedding("cpu.Embedding", len(yd), len(id), len(td), n, vocab, cols); err != nil {
		return err
	}
	if err := checkTokens("cpu.Embedding", id, vocab); err != nil {
		return err
	}
	be.output(yd)
	for r, v := range id {
		copy(yd[r*cols:(r+1)*cols], td[int(v)*cols:(int(v)+1)*cols])
	}
	return nil
}

// EmbeddingGrad: see kernels.SequenceOps. Rows added in order r = 0, 1,
// …, so the sums are the same run to run.
func (be *Backend) EmbeddingGrad(dtable, ids, dy kernels.Buffer, n, vocab, cols int) error {
	dt, id, dyd := be.data(dtable), be.data(ids), be.data(dy)
	if err := kernels.CheckEmbedding("cpu.EmbeddingGrad", len(dyd), len(id), len(dt), n, vocab, cols); err != nil {
		return err
	}
	if err := checkTokens("cpu.EmbeddingGrad", id, vocab); err != nil {
		return err
	}
	for r, v := range id {
		dst, src := dt[int(v)*cols:(int(v)+1)*cols], dyd[r*cols:(r+1)*cols]
		for j, g := range src {
			dst[j] += g
		}
	}
	return nil
}

// Attention: see kernels.SequenceOps. Per sequence and head, the scores
// Q·Kᵀ/√d and the output P·V are the backend's Sgemm on strided views
// of qkv (the whole square: the masked half is zeroed, then multiplied,
// rather than skipped), the softmax per row in float64 over the
// positions up to the row's.
func (be *Backend) Attention(y, probs, qkv kernels.Buffer, batch, seq, heads, width int) error {
	yd, pd, qd := be.raw(y), be.raw(probs), be.data(qkv)
	if err := kernels.CheckAttention("cpu.Attention", len(yd), len(pd), len(qd), batch, seq, heads, width); err != nil {
		return err
	}
	be.output(yd)
	be.output(pd)
	d, ld := width/heads, 3*width
	scale := float32(1 / math.Sqrt(float64(d)))
	for b := range batch {
		q0 := b * seq * ld
		for h := range heads {
			p := pd[(b*heads+h)*seq*seq : (b*heads+h+1)*seq*seq]
			be.blas.Sgemm(blas.NoTrans, blas.Trans, seq, seq, d, scale, qd[q0+h*d:], ld, qd[q0+width+h*d:], ld, 0, p, seq)
			softmaxCausalRows(p, seq)
			be.blas.Sgemm(blas.NoTrans, blas.NoTrans, seq, d, seq, 1, p, seq, qd[q0+2*width+h*d:], ld, 0, yd[b*seq*width+h*d:], width)
		}
	}
	return nil
}

// softmaxCausalRows is softmaxCausal on every row i of the seq×seq
// scores p, four rows at a time: each row's maximum and float64 sum are
// still taken in its own index order (the same bits), but the four rows'
// chains of dependent additions and comparisons run side by side instead
// of one after the other, which was most of the softmax's time.
func softmaxCausalRows(p []float32, seq int) {
	i := 0
	for ; i+4 <= seq; i += 4 {
		softmaxCausal4(p[i*seq:(i+4)*seq], seq, i)
	}
	for ; i < seq; i++ {
		softmaxCausal(p[i*seq:(i+1)*seq], i)
	}
}

// softmaxCausal4 is softmaxCausal on the four rows of p (each seq long),
// those of positions i … i+3.
func softmaxCausal4(p []float32, seq, i int) {
	r0, r1, r2, r3 := p[:i+1], p[seq:seq+i+2], p[2*seq:2*seq+i+3], p[3*seq:3*seq+i+4]
	t0, t1, t2, t3 := r0[0], r1[0], r2[0], r3[0]
	for j := range r0 { // the prefix every row has, side by side
		t0, t1, t2, t3 = max(t0, r0[j]), max(t1, r1[j]), max(t2, r2[j]), max(t3, r3[j])
	}
	t1 = max(t1, r1[i+1])
	t2 = max(t2, r2[i+1], r2[i+2])
	t3 = max(t3, r3[i+1], r3[i+2], r3[i+3])
	tops := [4]float32{t0, t1, t2, t3}
	for k, top := range tops {
		row := p[k*seq : (k+1)*seq]
		w := row[:min(seq, (i+k+8)&^7)]
		for j, v := range w {
			w[j] = v - top
		}
		expFast(w, w)
	}
	var s0, s1, s2, s3 float64
	for j := range r0 { // each row's sum in its own index order
		s0 += float64(r0[j])
		s1 += float64(r1[j])
		s2 += float64(r2[j])
		s3 += float64(r3[j])
	}
	s1 += float64(r1[i+1])
	s2 += float64(r2[i+1])
	s2 += float64(r2[i+2])
	s3 += float64(r3[i+1])
	s3 += float64(r3[i+2])
	s3 += float64(r3[i+3])
	for k, s := range [4]float64{s0, s1, s2, s3} {
		row := p[k*seq : (k+1)*seq]
		r := row[:i+k+1]
		inv := float32(1 / s)
		for j := range r {
			r[j] *= inv
		}
		clear(row[i+k+1:])
	}
}

// softmaxCausal replaces row (the scores of position i) by the softmax of
// its first i+1 values, zero after them: their maximum subtracted, e^x in
// float32 (expFast, over whole 8-value blocks: the masked scores past i
// are finite and zeroed after), the sum in float64.
func softmaxCausal(row []float32, i int) {
	r := row[:i+1]
	top := r[0]
	for _, v := range r {
		top = max(top, v)
	}
	w := row[:min(len(row), (i+8)&^7)]
	for j, v := range w {
		w[j] = v - top
	}
	expFast(w, w)
	var s float64
	for _, v := range r {
		s += float64(v)
	}
	inv := float32(1 / s)
	for j := range r {
		r[j] *= inv
	}
	clear(row[i+1:])
}

// AttentionGrad: see kernels.SequenceOps. With P the probabilities and
// dP = dY·Vᵀ: dS = P ⊙ (dP − rowsum(P ⊙ dP)) (row sums in float64),
// dQ = dS·K/√d, dK = dSᵀ·Q/√d, dV = Pᵀ·dY, each an Sgemm per sequence and
// head.
func (be *Backend) AttentionGrad(dqkv, dy, qkv, probs kernels.Buffer, batch, seq, heads, width int) error {
	dq, dyd, qd, pd := be.raw(dqkv), be.data(dy), be.data(qkv), be.data(probs)
	if err := firstError(
		kernels.CheckAttention("cpu.AttentionGrad", len(dyd), len(pd), len(qd), batch, seq, heads, width),
		checkLen("AttentionGrad", "dqkv", len(dq), len(qd)),
	); err != nil {
		return err
	}
	be.output(dq)
	d, ld := width/heads, 3*width
	scale := float32(1 / math.Sqrt(float64(d)))
	ds := make([]float32, seq*seq)
	for b := range batch {
		q0, y0 := b*seq*ld, b*seq*width
		for h := range heads {
			p := pd[(b*heads+h)*seq*seq : (b*heads+h+1)*seq*seq]
			be.blas.Sgemm(blas.NoTrans, blas.Trans, seq, seq, d, 1, dyd[y0+h*d:], width, qd[q0+2*width+h*d:], ld, 0, ds, seq)
			softmaxGradCausalRows(ds, p, seq)
			be.blas.Sgemm(blas.NoTrans, blas.NoTrans, seq, d, seq, scale, ds, seq, qd[q0+width+h*d:], ld, 0, dq[q0+h*d:], ld)
			be.blas.Sgemm(blas.Trans, blas.NoTrans, seq, d, seq, scale, ds, seq, qd[q0+h*d:], ld, 0, dq[q0+width+h*d:], ld)
			be.blas.Sgemm(blas.Trans, blas.NoTrans, seq, d, seq, 1, p, seq, dyd[y0+h*d:], width, 0, dq[q0+2*width+h*d:], ld)
		}
	}
	return nil
}

// softmaxGradCausalRows turns ds, the gradient of a causal softmax's
// output p (seq × seq, row i reaching column i), into that of its input:
// ds_ij = p_ij·(ds_ij − Σ_k p_ik·ds_ik), zero above the diagonal. Each
// row's sum runs over its columns in order, in float64; rows are taken
// four at a time, one chain of additions each, so that the chains overlap
// instead of each waiting on the adder (the bits of one row at a time:
// TestSoftmaxGradCausalRows).
func softmaxGradCausalRows(ds, p []float32, seq int) {
	i := 0
	for ; i+4 <= seq; i += 4 {
		dots := causalDots4(ds, p, seq, i)
		for k := range 4 {
			softmaxGradRow(ds[(i+k)*seq:(i+k+1)*seq], p[(i+k)*seq:(i+k)*seq+i+k+1], dots[k])
		}
	}
	for ; i < seq; i++ {
		pr, dr := p[i*seq:i*seq+i+1], ds[i*seq:(i+1)*seq]
		var dot float64
		for j, v := range pr {
			dot += float64(v) * float64(dr[j])
		}
		softmaxGradRow(dr, pr, dot)
	}
}

// causalDots4 returns Σ_j p_rj·ds_rj over j ≤ r for the four rows
// r = i … i+3, each in column order.
func causalDots4(ds, p []float32, seq, i int) [4]float64 {
	p0, p1, p2, p3 := p[i*seq:i*seq+i+1], p[(i+1)*seq:(i+1)*seq+i+1], p[(i+2)*seq:(i+2)*seq+i+1], p[(i+3)*seq:(i+3)*seq+i+1]
	d0, d1, d2, d3 := ds[i*seq:i*seq+i+1], ds[(i+1)*seq:(i+1)*seq+i+1], ds[(i+2)*seq:(i+2)*seq+i+1], ds[(i+3)*seq:(i+3)*seq+i+1]
	p1, p2, p3, d0, d1, d2, d3 = p1[:len(p0)], p2[:len(p0)], p3[:len(p0)], d0[:len(p0)], d1[:len(p0)], d2[:len(p0)], d3[:len(p0)]
	var s0, s1, s2, s3 float64
	for j, v := range p0 { // the columns all four rows reach
		s0 += float64(v) * float64(d0[j])
		s1 += float64(p1[j]) * float64(d1[j])
		s2 += float64(p2[j]) * float64(d2[j])
		s3 += float64(p3[j]) * float64(d3[j])
	}
	dots := [4]float64{s0, s1, s2, s3}
	for k := 1; k < 4; k++ { // the columns past row i's reach, in order
		r := i + k
		for j := i + 1; j <= r; j++ {
			dots[k] += float64(p[r*seq+j]) * float64(ds[r*seq+j])
		}
	}
	return dots
}

// softmaxGradRow writes row dr's input gradient from its dot product
// with its probabilities pr, and zeros past pr's reach.
func softmaxGradRow(dr, pr []float32, dot float64) {
	dr2 := dr[:len(pr)]
	for j, v := range pr {
		dr2[j] = float32(float64(v) * (float64(dr2[j]) - dot))
	}
	clear(dr[len(pr):])
}
