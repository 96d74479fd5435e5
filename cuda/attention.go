//go:build cuda

package cuda

// Causal self-attention through the library's products: where cuBLAS
// serves (with cublasSgemmStridedBatched) and the products are float32's
// (not TF32), Attention and AttentionGrad are the CPU backends' algorithm
// on the device — per head, the scores Q·Kᵀ/√d and the output P·V as
// strided batched GEMMs over the batch's sequences, the causal softmax
// between them (dml_attention_softmax); backward dP = dY·Vᵀ, dS (dml_
// attention_ds), dQ = dS·K/√d, dK = dSᵀ·Q/√d, dV = Pᵀ·dY. Without them our
// kernels serve (dml_attention and its three gradient kernels: a thread
// per position, float64 sums), which on an H200 made a GPT step take
// ~46 ms against PyTorch eager's 10.6 (bench/gpu/RESULTS.md).

// stridedGemm is one cublasSgemmStridedBatched call, column-major: count
// products C_q = α·op(A_q)·op(B_q) + β·C_q, operand q starting q·s floats
// after operand 0 (sa, sb, sc).
type stridedGemm struct {
	ta, tb         bool
	m, n, k        int
	alpha, beta    float32
	a              devPtr
	lda, sa        int
	b              devPtr
	ldb, sb        int
	c              devPtr
	ldc, sc, count int
}

// rowMajor is the stridedGemm for the row-major product C (m×n) = α·op(A)·
// op(B) with leading dimensions lda, ldb, ldc (as kernels.Backend.Gemm
// takes them): column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, the operands swapped,
// each keeping its transposition.
func rowMajor(transA, transB bool, m, n, k int, alpha float32, a devPtr, lda, sa int, b devPtr, ldb, sb int, c devPtr, ldc, sc, count int) stridedGemm {
	return stridedGemm{ta: transB, tb: transA, m: n, n: m, k: k, alpha: alpha,
		a: b, lda: ldb, sa: sb, b: a, ldb: lda, sb: sa, c: c, ldc: ldc, sc: sc, count: count}
}

// attnDevice is what the library route queues: the products and the two
// row kernels (rows of seq values, row r being position r mod seq).
type attnDevice interface {
	gemm(g stridedGemm) error
	softmaxRows(p devPtr, rows, seq int) error
	dsRows(ds, p devPtr, rows, seq int) error
}

// at is the address of float i after p.
func at(p devPtr, i int) devPtr { return p + devPtr(4*i) }

// attentionForward queues probs = causal softmax(Q·Kᵀ/√d) per sequence and
// head, and y = P·V, over qkv (batch×seq×3·width) as kernels.SequenceOps
// lays them out.
func attentionForward(dev attnDevice, y, probs, qkv devPtr, batch, seq, heads, width int, scale float32) error {
	d, ld, sq := width/heads, 3*width, seq*seq
	for h := range heads {
		p := at(probs, h*sq)
		if err := dev.gemm(rowMajor(false, true, seq, seq, d, scale, at(qkv, h*d), ld, seq*ld,
			at(qkv, width+h*d), ld, seq*ld, p, seq, heads*sq, batch)); err != nil {
			return err
		}
	}
	if err := dev.softmaxRows(probs, batch*heads*seq, seq); err != nil {
		return err
	}
	for h := range heads {
		if err := dev.gemm(rowMajor(false, false, seq, d, seq, 1, at(probs, h*sq), seq, heads*sq,
			at(qkv, 2*width+h*d), ld, seq*ld, at(y, h*d), width, seq*width, batch)); err != nil {
			return err
		}
	}
	return nil
}

// attentionBackward queues dqkv from dy given attentionForward's probs; ds
// is scratch of batch·heads·seq² floats.
func attentionBackward(dev attnDevice, dqkv, dy, qkv, probs, ds devPtr, batch, seq, heads, width int, scale float32) error {
	d, ld, sq := width/heads, 3*width, seq*seq
	for h := range heads { // dP = dY·Vᵀ
		if err := dev.gemm(rowMajor(false, true, seq, seq, d, 1, at(dy, h*d), width, seq*width,
			at(qkv, 2*width+h*d), ld, seq*ld, at(ds, h*sq), seq, heads*sq, batch)); err != nil {
			return err
		}
	}
	if err := dev.dsRows(ds, probs, batch*heads*seq, seq); err != nil {
		return err
	}
	for h := range heads {
		dS, p := at(ds, h*sq), at(probs, h*sq)
		for _, g := range []stridedGemm{
			// dQ = dS·K/√d
			rowMajor(false, false, seq, d, seq, scale, dS, seq, heads*sq, at(qkv, width+h*d), ld, seq*ld, at(dqkv, h*d), ld, seq*ld, batch),
			// dK = dSᵀ·Q/√d
			rowMajor(true, false, seq, d, seq, scale, dS, seq, heads*sq, at(qkv, h*d), ld, seq*ld, at(dqkv, width+h*d), ld, seq*ld, batch),
			// dV = Pᵀ·dY
			rowMajor(true, false, seq, d, seq, 1, p, seq, heads*sq, at(dy, h*d), width, seq*width, at(dqkv, 2*width+h*d), ld, seq*ld, batch),
		} {
			if err := dev.gemm(g); err != nil {
				return err
			}
		}
	}
	return nil
}

// libAttention is attnDevice on the backend: cuBLAS and our row kernels.
type libAttention struct{ be *Backend }

func (l libAttention) gemm(g stridedGemm) error {
	return blasSgemmBatched(l.be.q, l.be.libs.blas, g)
}

// warpRows is the rows a block of the attention's row kernels takes, one
// a warp (transformer.cu's DML_ROWS_PER_BLOCK).
const warpRows = threads / 32

func (l libAttention) softmaxRows(p devPtr, rows, seq int) error {
	return l.be.launch(l.be.dev.k.attentionSoftmax, min(ceilDiv(rows, warpRows), maxRowBlocks), 1, threads, ptrAt(p), i64(rows), i64(seq))
}

func (l libAttention) dsRows(ds, p devPtr, rows, seq int) error {
	return l.be.launch(l.be.dev.k.attentionDS, min(ceilDiv(rows, warpRows), maxRowBlocks), 1, threads, ptrAt(ds), ptrAt(p), i64(rows), i64(seq))
}

// libAttentionServes reports whether attention takes the library route:
// cuBLAS with its strided batched product, float32 products (not TF32:
// our kernels keep attention's float64 sums there), and sizes within its
// 32-bit arguments.
func (be *Backend) libAttentionServes(batch, seq, heads, width int) bool {
	return be.libs.blas != nil && hasBatched() && !be.tf32 &&
		batch <= maxInt32 && 3*width <= maxInt32 && heads*seq*seq <= maxInt32
}
