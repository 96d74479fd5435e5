// loss.cu: the fused loss+gradient kernels, argmax prediction and the
// deterministic loss statistics. The per-row maths is the CPU backend's
// (kernels/cpu/loss.go): float64 exp/log of float32 inputs, the same
// operation order, products written with _rn intrinsics so nothing is fused
// that the CPU does not fuse; the only difference is the order of the
// per-row sums (a fixed tree instead of a left-to-right loop).
#include "common.cuh"

__device__ __forceinline__ float dml_nanf() { return __int_as_float(0x7fc00000); }

// label is an integer class index in [0, classes)?
__device__ __forceinline__ bool dml_label_ok(float l, long long classes) {
  return l >= 0.f && (double)l < (double)classes && l == truncf(l);
}

// One block of DML_RED_THREADS per row (a grid-stride loop over rows, so any
// grid works). grad may be logits: every z[j] is read by the thread that
// later writes grad[j], and z[label], z[0] and the maximum are read before
// the barrier that precedes any write.
DML_EXTERN void dml_softmax_xent(float* grad, const float* logits, const float* __restrict__ labels,
                                 long long rows, long long cols, float scale,
                                 float* __restrict__ rowloss, float* __restrict__ rowok) {
  dml_require_red_threads();
  __shared__ float sv[DML_RED_THREADS];
  __shared__ long long si[DML_RED_THREADS];
  __shared__ double sd[DML_RED_THREADS];
  const int t = threadIdx.x;
  const double s = (double)scale;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* z = logits + r * cols;
    float* g = grad + r * cols;
    const float lf = labels[r];
    const bool valid = dml_label_ok(lf, cols);
    const long long l = valid ? (long long)lf : -1;
    float zmax;
    const long long best = dml_row_argmax(z, cols, sv, si, &zmax);
    const double zl = valid ? (double)z[l] : 0.0;
    double part = 0.0;
    for (long long j = t; j < cols; j += DML_RED_THREADS) part += exp((double)z[j] - (double)zmax);
    const double sum = dml_block_sum_d(part, sd);  // barrier: all reads of z are done
    const double inv = 1.0 / sum;
    for (long long j = t; j < cols; j += DML_RED_THREADS) {
      const float e = (float)exp((double)z[j] - (double)zmax);
      g[j] = j == l ? (float)(s * __dsub_rn(__dmul_rn((double)e, inv), 1.0))
                    : (float)__dmul_rn(__dmul_rn(s, (double)e), inv);
    }
    if (t == 0) {
      rowloss[r] = valid ? (float)(log(sum) + (double)zmax - zl) : dml_nanf();
      rowok[r] = (valid && best == l) ? 1.f : 0.f;
    }
    __syncthreads();  // the next row reuses the shared scratch
  }
}

// 1-D (grid-stride over rows): binary logistic loss of one logit per row.
DML_EXTERN void dml_sigmoid_xent(float* grad, const float* logits, const float* __restrict__ labels,
                                 long long rows, float scale, float* __restrict__ rowloss,
                                 float* __restrict__ rowok) {
  const double s = (double)scale;
  DML_GRID_STRIDE(i, rows) {
    const float zf = logits[i], yf = labels[i];
    const double z = (double)zf, y = (double)yf;
    const double e = exp(-fabs(z));
    const double mz = z > 0.0 ? z : (z == z ? 0.0 : z);  // math.Max(z, 0), NaN kept
    const double loss = __dadd_rn(__dsub_rn(mz, __dmul_rn(y, z)), log1p(e));
    const double p = z < 0.0 ? e / (1.0 + e) : 1.0 / (1.0 + e);
    grad[i] = (float)__dmul_rn(s, __dsub_rn(p, y));
    const bool valid = yf == 0.f || yf == 1.f;
    rowloss[i] = valid ? (float)loss : dml_nanf();
    rowok[i] = ((zf > 0.f) == (yf == 1.f)) ? 1.f : 0.f;
  }
}

// out[i] = first argmax of row i (cols == 1: x > 0 ? 1 : 0; cols == 0: 0).
// One block of DML_RED_THREADS per row, grid-stride over rows.
DML_EXTERN void dml_predict(float* __restrict__ out, const float* __restrict__ x, long long rows,
                            long long cols) {
  dml_require_red_threads();
  __shared__ float sv[DML_RED_THREADS];
  __shared__ long long si[DML_RED_THREADS];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = x + r * cols;
    if (cols == 1) {
      if (threadIdx.x == 0) out[r] = row[0] > 0.f ? 1.f : 0.f;
      continue;  // uniform across the block: no barrier skipped by some threads only
    }
    float top;
    const long long best = dml_row_argmax(row, cols, sv, si, &top);
    if (threadIdx.x == 0) out[r] = (float)best;
  }
}

// One block of DML_RED_THREADS: stats[0] = Σ rowloss, stats[1] = Σ rowok,
// summed in float64 in a fixed order (thread t takes rows t, t+256, … in
// order, then a fixed tree), stored rounded to float32 like the CPU's sums.
DML_EXTERN void dml_stats(float* __restrict__ stats, const float* __restrict__ rowloss,
                          const float* __restrict__ rowok, long long rows) {
  dml_require_red_threads();
  __shared__ double sd[DML_RED_THREADS];
  double a = 0.0, b = 0.0;
  for (long long i = threadIdx.x; i < rows; i += DML_RED_THREADS) {
    a += (double)rowloss[i];
    b += (double)rowok[i];
  }
  const double la = dml_block_sum_d(a, sd);
  const double lb = dml_block_sum_d(b, sd);
  if (threadIdx.x == 0) {
    stats[0] = (float)la;
    stats[1] = (float)lb;
  }
}
