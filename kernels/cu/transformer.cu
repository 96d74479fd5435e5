// transformer.cu: GELU and layer normalisation (kernels.TransformerOps).
// The maths is the CPU backend's reference (kernels/cpu/transformer.go):
// each value in float64, rounded once; the sums float64 in a fixed order
// (the CPU's erf-form GELU is float32, kernels/cpu/gelu.go: within 1e-6).
#include "common.cuh"

#define DML_SQRT1_2 0.70710678118654752440
#define DML_INV_SQRT_2PI 0.39894228040143267794
#define DML_SQRT_2_OVER_PI 0.79788456080286535588
#define DML_GELU_CUBIC 0.044715

__device__ __forceinline__ double dml_gelu_f(double x, long long tanh_form) {
  if (tanh_form) {
    const double u = DML_SQRT_2_OVER_PI * (x + DML_GELU_CUBIC * x * x * x);
    return 0.5 * x * (1.0 + tanh(u));
  }
  return 0.5 * x * (1.0 + erf(x * DML_SQRT1_2));
}

__device__ __forceinline__ double dml_gelu_df(double x, long long tanh_form) {
  if (tanh_form) {
    const double t = tanh(DML_SQRT_2_OVER_PI * (x + DML_GELU_CUBIC * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * DML_SQRT_2_OVER_PI * (1.0 + 3.0 * DML_GELU_CUBIC * x * x);
  }
  return 0.5 * (1.0 + erf(x * DML_SQRT1_2)) + x * DML_INV_SQRT_2PI * exp(-0.5 * x * x);
}

// dml_gelu: y = GELU(x), erf form or (tanh_form ≠ 0) tanh form; y may be x.
DML_EXTERN void dml_gelu(float* y, const float* x, long long n, long long tanh_form) {
  DML_GRID_STRIDE(i, n) { y[i] = (float)dml_gelu_f((double)x[i], tanh_form); }
}

// dml_gelu_grad: dx = dy·GELU′(x); dx may be dy.
DML_EXTERN void dml_gelu_grad(float* dx, const float* dy, const float* __restrict__ x, long long n,
                              long long tanh_form) {
  DML_GRID_STRIDE(i, n) { dx[i] = (float)((double)dy[i] * dml_gelu_df((double)x[i], tanh_form)); }
}

// dml_layer_norm: a warp per row (8 rows a block of exactly 256,
// dml_lanes_d): μ, then σ² from the deviations (two passes, float64),
// mean and invstd written, y = (x − μ)·invstd·γ + β in float64.
DML_EXTERN void dml_layer_norm(float* __restrict__ y, float* __restrict__ mean, float* __restrict__ invstd,
                               const float* __restrict__ x, const float* __restrict__ gamma,
                               const float* __restrict__ beta, long long rows, long long cols, float eps) {
  dml_require_red_threads();
  __shared__ double sh[DML_RED_THREADS];
  const int lane = threadIdx.x % DML_ROW_LANES;
  for (long long r0 = (long long)blockIdx.x * DML_ROWS_PER_BLOCK; r0 < rows;
       r0 += (long long)gridDim.x * DML_ROWS_PER_BLOCK) {
    const long long r = r0 + threadIdx.x / DML_ROW_LANES;
    const bool live = r < rows;
    const long long n = live ? cols : 0;
    const float* xs = x + (live ? r : 0) * cols;
    double s = 0;
    for (long long j = lane; j < n; j += DML_ROW_LANES) s = __dadd_rn(s, (double)xs[j]);
    const double mu = __ddiv_rn(dml_lanes_d(s, sh, DmlAddD{}), (double)cols);
    double q = 0;
    for (long long j = lane; j < n; j += DML_ROW_LANES) {
      const double d = __dsub_rn((double)xs[j], mu);
      q = __dadd_rn(q, __dmul_rn(d, d));
    }
    const double v = __ddiv_rn(dml_lanes_d(q, sh, DmlAddD{}), (double)cols);
    const double inv = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(v, (double)eps)));
    if (live && lane == 0) {
      mean[r] = (float)mu;
      invstd[r] = (float)inv;
    }
    for (long long j = lane; j < n; j += DML_ROW_LANES)
      y[r * cols + j] = (float)__dadd_rn(__dmul_rn(__dmul_rn(__dsub_rn((double)xs[j], mu), inv), (double)gamma[j]),
                                         (double)beta[j]);
  }
}

// dml_layer_norm_grad_rows: a warp per row (as dml_layer_norm): g = γ·dy,
// x̂ = (x − μ)·invstd, the row's means of g and g·x̂ (float64), dx =
// invstd·(g − mean(g) − x̂·mean(g·x̂)). dx may be dy (each element is read
// and written by the same lane, and read before it is written).
DML_EXTERN void dml_layer_norm_grad_rows(float* dx, const float* dy, const float* __restrict__ x,
                                         const float* __restrict__ mean, const float* __restrict__ invstd,
                                         const float* __restrict__ gamma, long long rows, long long cols) {
  dml_require_red_threads();
  __shared__ double sh[DML_RED_THREADS];
  const int lane = threadIdx.x % DML_ROW_LANES;
  for (long long r0 = (long long)blockIdx.x * DML_ROWS_PER_BLOCK; r0 < rows;
       r0 += (long long)gridDim.x * DML_ROWS_PER_BLOCK) {
    const long long r = r0 + threadIdx.x / DML_ROW_LANES;
    const bool live = r < rows;
    const long long n = live ? cols : 0;
    const double mu = live ? (double)mean[r] : 0, inv = live ? (double)invstd[r] : 0;
    double a = 0, q = 0;
    for (long long j = lane; j < n; j += DML_ROW_LANES) {
      const long long p = r * cols + j;
      const double g = __dmul_rn((double)gamma[j], (double)dy[p]);
      a = __dadd_rn(a, g);
      q = __dadd_rn(q, __dmul_rn(g, __dmul_rn(__dsub_rn((double)x[p], mu), inv)));
    }
    const double mg = __ddiv_rn(dml_lanes_d(a, sh, DmlAddD{}), (double)cols);
    const double mgx = __ddiv_rn(dml_lanes_d(q, sh, DmlAddD{}), (double)cols);
    for (long long j = lane; j < n; j += DML_ROW_LANES) {
      const long long p = r * cols + j;
      const double xh = __dmul_rn(__dsub_rn((double)x[p], mu), inv);
      const double g = __dmul_rn((double)gamma[j], (double)dy[p]);
      dx[p] = (float)__dmul_rn(inv, __dsub_rn(__dsub_rn(g, mg), __dmul_rn(xh, mgx)));
    }
  }
}

// dml_layer_norm_grad_cols_partial: the column sums dγ = Σ dy·x̂ and
// dβ = Σ dy in two stages, so that a few columns over many rows (a GPT's
// 128 over batch·seq) still fill the GPU: the rows are cut into slices
// near-equal slices (a function of the shape alone). A block of exactly
// 256 is 32 columns × 8 lanes (dml_col_lanes, as dml_sum_rows_partial): grid =
// (ceil(cols/32), slices), grid-stride over the slices; lane l of column
// j adds its slice's rows l, l+8, … in order (float64), then the 8 lanes
// are added in lane order into part[2(p·cols + j)], part[2(p·cols + j) + 1].
DML_EXTERN void dml_layer_norm_grad_cols_partial(double* __restrict__ part, const float* __restrict__ dy,
                                                 const float* __restrict__ x, const float* __restrict__ mean,
                                                 const float* __restrict__ invstd, long long rows, long long cols,
                                                 long long slices) {
  dml_require_red_threads();
  __shared__ double sh[DML_RED_THREADS];
  const int lane = threadIdx.x / DML_SUM_COLS;
  const long long j = (long long)blockIdx.x * DML_SUM_COLS + threadIdx.x % DML_SUM_COLS;
  for (long long p = blockIdx.y; p < slices; p += gridDim.y) {
    long long lo, hi;
    dml_bn_slice(rows, slices, p, &lo, &hi);
    double sg = 0, sb = 0;
    if (j < cols)
      for (long long r = lo + lane; r < hi; r += DML_SUM_LANES) {
        const long long q = r * cols + j;
        const double d = (double)dy[q];
        const double xh = __dmul_rn(__dsub_rn((double)x[q], (double)mean[r]), (double)invstd[r]);
        sg = __dadd_rn(sg, __dmul_rn(d, xh));
        sb = __dadd_rn(sb, d);
      }
    sg = dml_col_lanes(sg, sh, DmlAddD{});
    sb = dml_col_lanes(sb, sh, DmlAddD{});
    if (lane == 0 && j < cols) {
      part[2 * (p * cols + j)] = sg;
      part[2 * (p * cols + j) + 1] = sb;
    }
  }
}

// dml_layer_norm_grad_cols_finish: grid = ceil(cols/32) blocks of exactly
// 256 = 32 columns × 8 lanes: lane l of a column adds slices l, l+8, … in
// order (float64), then the lanes in lane order; dγ and dβ overwritten.
DML_EXTERN void dml_layer_norm_grad_cols_finish(float* __restrict__ dgamma, float* __restrict__ dbeta,
                                                const double* __restrict__ part, long long cols, long long slices) {
  dml_require_red_threads();
  __shared__ double sh[DML_RED_THREADS];
  const int lane = threadIdx.x / DML_SUM_COLS;
  const long long j = (long long)blockIdx.x * DML_SUM_COLS + threadIdx.x % DML_SUM_COLS;
  double sg = 0, sb = 0;
  if (j < cols)
    for (long long p = lane; p < slices; p += DML_SUM_LANES) {
      sg = __dadd_rn(sg, part[2 * (p * cols + j)]);
      sb = __dadd_rn(sb, part[2 * (p * cols + j) + 1]);
    }
  sg = dml_col_lanes(sg, sh, DmlAddD{});
  sb = dml_col_lanes(sb, sh, DmlAddD{});
  if (lane == 0 && j < cols) {
    dgamma[j] = (float)sg;
    dbeta[j] = (float)sb;
  }
}

// ---- dropout (kernels.DropoutBits: MurmurHash3's finaliser) --------------
__device__ __forceinline__ unsigned dml_fmix32(unsigned h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// dml_dropout: y = x·scale (float32) where the element's bits,
// fmix32(key ^ fmix32(col·0x9e3779b9 + salt)), are ≥ threshold, else 0;
// keys[r] is row r's key as float32 bits. 1-D over rows·cols; y may be x.
DML_EXTERN void dml_dropout(float* y, const float* x, const float* __restrict__ keys, long long rows, long long cols,
                            unsigned salt, unsigned threshold, float scale) {
  const long long total = rows * cols;
  DML_GRID_STRIDE(i, total) {
    const long long r = i / cols;
    const unsigned col = (unsigned)(i - r * cols);
    const unsigned bits = dml_fmix32(__float_as_uint(keys[r]) ^ dml_fmix32(col * 0x9e3779b9u + salt));
    y[i] = bits >= threshold ? __fmul_rn(x[i], scale) : 0.f;
  }
}

// ---- The sequence ops (kernels.SequenceOps): token embeddings and causal
// multi-head self-attention. Our kernels: one thread per output row (or
// table element), sums in float64 in a fixed order; the CPU backend's
// attention runs on its GEMMs, so the two agree within float32 rounding,
// not to the bit (the embedding's ops do agree to the bit).

// dml_token reads a token id: -1 where f is not an integer in [0, vocab).
__device__ __forceinline__ long long dml_token(float f, long long vocab) {
  if (!(f >= 0.f && f < (float)vocab)) return -1;
  const long long id = (long long)f;
  return (float)id == f ? id : -1;
}

// dml_embedding: row r of y (n rows of cols) = row ids[r] of table, zeros
// for an id outside it. 1-D over n·cols.
DML_EXTERN void dml_embedding(float* __restrict__ y, const float* __restrict__ ids, const float* __restrict__ table,
                              long long n, long long vocab, long long cols) {
  const long long total = n * cols;
  DML_GRID_STRIDE(i, total) {
    const long long r = i / cols, id = dml_token(ids[r], vocab);
    y[i] = id < 0 ? 0.f : table[id * cols + (i - r * cols)];
  }
}

// The embedding's gradient: dtable[v][j] += dy[r][j] for each row r
// whose id is v, in row order, in float32, as the CPU adds them. Scanning
// every id for each table element (as before) cost 0.57 ms of the GPT's
// step on an H200; instead the rows are first sorted by token, stably,
// with integer counts only (dml_embedding_count, _offsets, _place), and
// each table element then adds just its own rows (dml_embedding_grad).
// An id outside the table (dml_token < 0) adds nothing.

// dml_embedding_count: grid = ceil(n/256) blocks of exactly 256, a row
// per thread: rank[r] = how many rows before r in its block have r's
// token, and counts[b·vocab + v] = how many rows of block b have token v
// (written by the block's last such row; the runtime zeroes counts
// first).
DML_EXTERN void dml_embedding_count(int* __restrict__ counts, int* __restrict__ rank, const float* __restrict__ ids,
                                    long long n, long long vocab) {
  dml_require_red_threads();
  __shared__ long long tok[DML_RED_THREADS];
  const int t = threadIdx.x;
  const long long r = (long long)blockIdx.x * DML_RED_THREADS + t;
  const long long v = r < n ? dml_token(ids[r], vocab) : -1;
  tok[t] = v;
  __syncthreads();
  if (v < 0) return;
  int before = 0;
  bool last = true;
  for (int u = 0; u < DML_RED_THREADS; u++)
    if (tok[u] == v) {
      if (u < t) before++;
      if (u > t) last = false;
    }
  rank[r] = before;
  if (last) counts[(long long)blockIdx.x * vocab + v] = before + 1;
}

// dml_embedding_offsets: one block of exactly 256, after
// dml_embedding_count over the blocks: start[v] = the rows of every token
// before v, start[vocab] = every row with a token, and counts[b·vocab + v]
// becomes where block b's rows of token v go: start[v] + the rows of v in
// the blocks before b.
DML_EXTERN void dml_embedding_offsets(int* __restrict__ counts, int* __restrict__ start, long long blocks,
                                      long long vocab) {
  dml_require_red_threads();
  __shared__ long long sm[DML_RED_THREADS];
  const int t = threadIdx.x;
  long long carry = 0;
  for (long long v0 = 0; v0 < vocab; v0 += DML_RED_THREADS) {
    const long long v = v0 + t;
    long long total = 0;
    if (v < vocab)
      for (long long b = 0; b < blocks; b++) total += counts[b * vocab + v];
    sm[t] = total;  // an inclusive scan of the totals over the block
    __syncthreads();
    for (int s = 1; s < DML_RED_THREADS; s <<= 1) {
      const long long add = t >= s ? sm[t - s] : 0;
      __syncthreads();
      sm[t] += add;
      __syncthreads();
    }
    if (v < vocab) {
      long long at = carry + sm[t] - total;
      start[v] = (int)at;
      for (long long b = 0; b < blocks; b++) {
        const int c = counts[b * vocab + v];
        counts[b * vocab + v] = (int)at;
        at += c;
      }
    }
    carry += sm[DML_RED_THREADS - 1];
    __syncthreads();
  }
  if (t == 0) start[vocab] = (int)carry;
}

// dml_embedding_place: 1-D over n, after dml_embedding_offsets:
// order[counts[b·vocab + v] + rank[r]] = r for each row r (of block b =
// r/256) with a token v: the rows sorted by token, each token's in row
// order.
DML_EXTERN void dml_embedding_place(int* __restrict__ order, const int* __restrict__ counts,
                                    const int* __restrict__ rank, const float* __restrict__ ids, long long n,
                                    long long vocab) {
  DML_GRID_STRIDE(r, n) {
    const long long v = dml_token(ids[r], vocab);
    if (v >= 0) order[counts[(r / DML_RED_THREADS) * vocab + v] + rank[r]] = (int)r;
  }
}

// dml_embedding_grad: 1-D over vocab·cols, after dml_embedding_place:
// dtable[v][j] += dy[r][j] for r = order[start[v]], …, order[start[v+1]−1]
// (token v's rows in row order), in float32.
DML_EXTERN void dml_embedding_grad(float* __restrict__ dtable, const int* __restrict__ order,
                                   const int* __restrict__ start, const float* __restrict__ dy, long long vocab,
                                   long long cols) {
  const long long total = vocab * cols;
  DML_GRID_STRIDE(i, total) {
    const long long v = i / cols, j = i - v * cols;
    float acc = dtable[i];
    for (int k = start[v]; k < start[v + 1]; k++) acc = __fadd_rn(acc, dy[(long long)order[k] * cols + j]);
    dtable[i] = acc;
  }
}

// DML_ATT_MAXD bounds a head's width (width/heads) for the kernels that
// keep a head's vector per thread (cuda/sequence.go refuses wider).
#define DML_ATT_MAXD 128

// dml_attention: one thread per (sequence b, head h, position i), 1-D
// over batch·heads·seq: the scores s_j = q_i·k_j/√d for j ≤ i (float64
// sums), their softmax (max subtracted) into probs' row, zeros after i,
// and y_i = Σ_j p_j v_j for the head's d values.
DML_EXTERN void dml_attention(float* __restrict__ y, float* __restrict__ probs, const float* __restrict__ qkv,
                              long long batch, long long seq, long long heads, long long width) {
  const long long rows = batch * heads * seq, d = width / heads, ld = 3 * width;
  const double scale = 1.0 / sqrt((double)d);
  DML_GRID_STRIDE(t, rows) {
    const long long i = t % seq, bh = t / seq, h = bh % heads, b = bh / heads;
    const float* q = qkv + (b * seq + i) * ld + h * d;
    float* p = probs + t * seq;
    double top = -1.0 / 0.0;
    for (long long j = 0; j <= i; j++) {
      const float* k = qkv + (b * seq + j) * ld + width + h * d;
      double s = 0;
      for (long long e = 0; e < d; e++) s += (double)q[e] * (double)k[e];
      s *= scale;
      p[j] = (float)s;
      top = s > top ? s : top;
    }
    double sum = 0;
    for (long long j = 0; j <= i; j++) sum += exp((double)p[j] - top);
    for (long long j = 0; j <= i; j++) p[j] = (float)(exp((double)p[j] - top) / sum);
    for (long long j = i + 1; j < seq; j++) p[j] = 0.f;
    float* yi = y + (b * seq + i) * width + h * d;
    for (long long e = 0; e < d; e++) {
      double acc = 0;
      for (long long j = 0; j <= i; j++) acc += (double)p[j] * (double)qkv[(b * seq + j) * ld + 2 * width + h * d + e];
      yi[e] = (float)acc;
    }
  }
}

// dml_attention_dp is dP_ij = dy_i·v_j for head h of sequence b.
__device__ __forceinline__ double dml_attention_dp(const float* dy, const float* qkv, long long b, long long h,
                                                   long long i, long long j, long long seq, long long width,
                                                   long long d) {
  const float* g = dy + (b * seq + i) * width + h * d;
  const float* v = qkv + (b * seq + j) * 3 * width + 2 * width + h * d;
  double s = 0;
  for (long long e = 0; e < d; e++) s += (double)g[e] * (double)v[e];
  return s;
}

// dml_attention_grad_dot: the first of AttentionGrad's three kernels, one
// thread per (b, h, i): dot_i = Σ_j p_ij·dP_ij, kept (as float64's float32
// rounding) in dqkv's first query slot of the head, which the third kernel
// reads and then overwrites.
DML_EXTERN void dml_attention_grad_dot(float* __restrict__ dqkv, const float* __restrict__ dy,
                                       const float* __restrict__ qkv, const float* __restrict__ probs,
                                       long long batch, long long seq, long long heads, long long width) {
  const long long rows = batch * heads * seq, d = width / heads;
  DML_GRID_STRIDE(t, rows) {
    const long long i = t % seq, bh = t / seq, h = bh % heads, b = bh / heads;
    const float* p = probs + t * seq;
    double dot = 0;
    for (long long j = 0; j <= i; j++) dot += (double)p[j] * dml_attention_dp(dy, qkv, b, h, i, j, seq, width, d);
    dqkv[(b * seq + i) * 3 * width + h * d] = (float)dot;
  }
}

// dml_attention_grad_kv: one thread per (b, h, j): dV_j = Σ_{i≥j} p_ij dy_i
// and dK_j = Σ_{i≥j} dS_ij q_i/√d, dS_ij = p_ij (dP_ij − dot_i).
DML_EXTERN void dml_attention_grad_kv(float* __restrict__ dqkv, const float* __restrict__ dy,
                                      const float* __restrict__ qkv, const float* __restrict__ probs,
                                      long long batch, long long seq, long long heads, long long width) {
  const long long rows = batch * heads * seq, d = width / heads, ld = 3 * width;
  const double scale = 1.0 / sqrt((double)d);
  DML_GRID_STRIDE(t, rows) {
    const long long j = t % seq, bh = t / seq, h = bh % heads, b = bh / heads;
    double ak[DML_ATT_MAXD], av[DML_ATT_MAXD];
    for (long long e = 0; e < d; e++) ak[e] = av[e] = 0;
    for (long long i = j; i < seq; i++) {
      const double p = (double)probs[(bh * seq + i) * seq + j];
      const double dot = (double)dqkv[(b * seq + i) * ld + h * d];
      const double ds = p * (dml_attention_dp(dy, qkv, b, h, i, j, seq, width, d) - dot) * scale;
      const float* q = qkv + (b * seq + i) * ld + h * d;
      const float* g = dy + (b * seq + i) * width + h * d;
      for (long long e = 0; e < d; e++) {
        ak[e] += ds * (double)q[e];
        av[e] += p * (double)g[e];
      }
    }
    float* out = dqkv + (b * seq + j) * ld + h * d;
    for (long long e = 0; e < d; e++) {
      out[width + e] = (float)ak[e];
      out[2 * width + e] = (float)av[e];
    }
  }
}

// dml_attention_grad_q: one thread per (b, h, i): dQ_i = Σ_{j≤i} dS_ij
// k_j/√d, reading dot_i from the slot the first kernel left, then writing
// the head's d query gradients over it.
DML_EXTERN void dml_attention_grad_q(float* __restrict__ dqkv, const float* __restrict__ dy,
                                     const float* __restrict__ qkv, const float* __restrict__ probs,
                                     long long batch, long long seq, long long heads, long long width) {
  const long long rows = batch * heads * seq, d = width / heads, ld = 3 * width;
  const double scale = 1.0 / sqrt((double)d);
  DML_GRID_STRIDE(t, rows) {
    const long long i = t % seq, bh = t / seq, h = bh % heads, b = bh / heads;
    float* out = dqkv + (b * seq + i) * ld + h * d;
    const double dot = (double)out[0];
    const float* p = probs + t * seq;
    double aq[DML_ATT_MAXD];
    for (long long e = 0; e < d; e++) aq[e] = 0;
    for (long long j = 0; j <= i; j++) {
      const double ds = (double)p[j] * (dml_attention_dp(dy, qkv, b, h, i, j, seq, width, d) - dot) * scale;
      const float* k = qkv + (b * seq + j) * ld + width + h * d;
      for (long long e = 0; e < d; e++) aq[e] += ds * (double)k[e];
    }
    for (long long e = 0; e < d; e++) out[e] = (float)aq[e];
  }
}

// ---- attention around the library's products (cuda/attention.go) ---------
// With cuBLAS, the scores Q·Kᵀ/√d, P·V and the gradients' products are
// strided batched GEMMs; these two row kernels run between them. Rows are
// batch·heads·seq rows of seq values; row r is position i = r mod seq.

// The two row kernels give a row a warp, not a block (dml_lanes_d): a
// row is one position's seq scores (128 in the GPT), and a block of 256
// per row left half its threads idle and spent two block-wide trees per
// row (0.56 ms of the GPT's step on an H200).

// dml_attention_softmax: a warp per row (8 rows a block of exactly 256,
// grid-stride), the scores of position i replaced by their causal
// softmax: p_j = e^(s_j − max)/Σ for j ≤ i (the maximum, e^x and the sum
// in float64), 0 after i.
DML_EXTERN void dml_attention_softmax(float* __restrict__ p, long long rows, long long seq) {
  dml_require_red_threads();
  __shared__ double sh[DML_RED_THREADS];
  const int lane = threadIdx.x % DML_ROW_LANES;
  for (long long r0 = (long long)blockIdx.x * DML_ROWS_PER_BLOCK; r0 < rows;
       r0 += (long long)gridDim.x * DML_ROWS_PER_BLOCK) {
    const long long r = r0 + threadIdx.x / DML_ROW_LANES;
    const bool live = r < rows;
    float* row = p + (live ? r : 0) * seq;
    const long long n = live ? r % seq + 1 : 0;
    double top = -1.0 / 0.0;
    for (long long j = lane; j < n; j += DML_ROW_LANES) top = fmax(top, (double)row[j]);
    top = dml_lanes_d(top, sh, DmlMaxD{});
    double s = 0;
    for (long long j = lane; j < n; j += DML_ROW_LANES) s = __dadd_rn(s, exp(__dsub_rn((double)row[j], top)));
    s = dml_lanes_d(s, sh, DmlAddD{});
    if (live)
      for (long long j = lane; j < seq; j += DML_ROW_LANES)
        row[j] = j < n ? (float)__ddiv_rn(exp(__dsub_rn((double)row[j], top)), s) : 0.f;
  }
}

// dml_attention_ds: a warp per row (as dml_attention_softmax), dS in
// place of dP (ds holds dY·Vᵀ): dot = Σ_{j≤i} p_j·dP_j (float64), dS_j =
// p_j·(dP_j − dot) for j ≤ i, 0 after i.
DML_EXTERN void dml_attention_ds(float* __restrict__ ds, const float* __restrict__ p, long long rows, long long seq) {
  dml_require_red_threads();
  __shared__ double sh[DML_RED_THREADS];
  const int lane = threadIdx.x % DML_ROW_LANES;
  for (long long r0 = (long long)blockIdx.x * DML_ROWS_PER_BLOCK; r0 < rows;
       r0 += (long long)gridDim.x * DML_ROWS_PER_BLOCK) {
    const long long r = r0 + threadIdx.x / DML_ROW_LANES;
    const bool live = r < rows;
    float* dr = ds + (live ? r : 0) * seq;
    const float* pr = p + (live ? r : 0) * seq;
    const long long n = live ? r % seq + 1 : 0;
    double dot = 0;
    for (long long j = lane; j < n; j += DML_ROW_LANES)
      dot = __dadd_rn(dot, __dmul_rn((double)pr[j], (double)dr[j]));
    dot = dml_lanes_d(dot, sh, DmlAddD{});
    if (live)
      for (long long j = lane; j < seq; j += DML_ROW_LANES)
        dr[j] = j < n ? (float)__dmul_rn((double)pr[j], __dsub_rn((double)dr[j], dot)) : 0.f;
  }
}
