// reduce.cu: deterministic reductions. No float atomics: each result is a
// sum in a fixed order for a given shape and launch configuration (which the
// runtime derives from the shape alone).
#include "common.cuh"

// The row sums (a bias's gradient: rows = batch × positions, often
// thousands) in two stages, each block 256 threads = 32 columns × 8 lanes
// (dml_col_lanes, common.cuh), so that a stage's dependent additions are
// short for any number of rows. The order is fixed by the shape alone (the
// runtime derives rowsPerBlock from it), so every run gives the same bits.

// grid = (ceil(cols/32), ceil(rows/rowsPerBlock)), block exactly 256:
// partial[by·cols + j] = Σ x[i, j] over block row by's rows, lane by lane.
DML_EXTERN void dml_sum_rows_partial(float* __restrict__ partial, const float* __restrict__ x,
                                     long long rows, long long cols, long long rowsPerBlock) {
  dml_require_red_threads();
  __shared__ float sm[DML_RED_THREADS];
  const int c = threadIdx.x % DML_SUM_COLS, lane = threadIdx.x / DML_SUM_COLS;
  const long long j = (long long)blockIdx.x * DML_SUM_COLS + c;
  const long long r0 = (long long)blockIdx.y * rowsPerBlock;
  long long r1 = r0 + rowsPerBlock;
  if (r1 > rows) r1 = rows;
  float s = 0.f;
  if (j < cols)
    for (long long i = r0 + lane; i < r1; i += DML_SUM_LANES) s = __fadd_rn(s, x[i * cols + j]);
  s = dml_col_lanes(s, sm, DmlAddF{});
  if (lane == 0 && j < cols) partial[(long long)blockIdx.y * cols + j] = s;
}

// grid = ceil(cols/32), block exactly 256: dst[j] = (beta == 0 ? 0 :
// beta·dst[j]) + Σ_p partial[p·cols + j], lane by lane. beta == 0 never
// reads dst.
DML_EXTERN void dml_sum_rows_final(float* __restrict__ dst, const float* __restrict__ partial,
                                   long long parts, long long cols, float beta) {
  dml_require_red_threads();
  __shared__ float sm[DML_RED_THREADS];
  const int c = threadIdx.x % DML_SUM_COLS, lane = threadIdx.x / DML_SUM_COLS;
  const long long j = (long long)blockIdx.x * DML_SUM_COLS + c;
  float s = 0.f;
  if (j < cols)
    for (long long p = lane; p < parts; p += DML_SUM_LANES) s = __fadd_rn(s, partial[p * cols + j]);
  s = dml_col_lanes(s, sm, DmlAddF{});
  if (lane == 0 && j < cols) dst[j] = __fadd_rn(beta == 0.f ? 0.f : __fmul_rn(beta, dst[j]), s);
}

// grid ≤ 1024 blocks of 256: partial[b] = Σ x[i]·y[i] (float64) over block b's
// grid-stride share, each thread in index order, then a fixed tree.
DML_EXTERN void dml_dot_partial(double* __restrict__ partial, const float* __restrict__ x,
                                const float* __restrict__ y, long long n) {
  dml_require_red_threads();
  __shared__ double sd[DML_RED_THREADS];
  double s = 0.0;
  // float32 products are exact in float64, so fusing them changes nothing.
  DML_GRID_STRIDE(i, n) s = __dadd_rn(s, __dmul_rn((double)x[i], (double)y[i]));
  const double b = dml_block_sum_d(s, sd);
  if (threadIdx.x == 0) partial[blockIdx.x] = b;
}

// One block of 256: out[0] = Σ partial[0..parts) in a fixed order.
DML_EXTERN void dml_dot_final(double* __restrict__ out, const double* __restrict__ partial,
                              long long parts) {
  dml_require_red_threads();
  __shared__ double sd[DML_RED_THREADS];
  double s = 0.0;
  for (long long i = threadIdx.x; i < parts; i += DML_RED_THREADS) s = __dadd_rn(s, partial[i]);
  const double b = dml_block_sum_d(s, sd);
  if (threadIdx.x == 0) out[0] = b;
}

// LARS's norms in kernels/optim.SumSquares's order. 1-D over the chunks
// of x and y (n floats each, chunk = optim.NormChunk): partial[2c] =
// Σ x[i]², partial[2c+1] = Σ y[i]² over chunk c, in index order from 0,
// in double (a float's square is exact in double).
DML_EXTERN void dml_sumsq2_partial(double* __restrict__ partial, const float* __restrict__ x,
                                   const float* __restrict__ y, long long n, long long chunk) {
  if (chunk <= 0) return;
  const long long parts = (n + chunk - 1) / chunk;
  DML_GRID_STRIDE(c, parts) {
    const long long lo = c * chunk;
    const long long hi = lo + chunk < n ? lo + chunk : n;
    double sx = 0.0, sy = 0.0;
    for (long long i = lo; i < hi; i++) {
      const double a = (double)x[i], b = (double)y[i];
      sx = __dadd_rn(sx, __dmul_rn(a, a));
      sy = __dadd_rn(sy, __dmul_rn(b, b));
    }
    partial[2 * c] = sx;
    partial[2 * c + 1] = sy;
  }
}

// One thread (thread 0 of block 0; any launch): the chunk sums of
// dml_sumsq2_partial added in chunk order, then LARS's rate as
// kernels/optim's LARSStep.Rate: trust = eta·‖w‖/(‖g‖ + wd·‖w‖), 1 unless
// both sums are > 0; rate[0] = (float)(lr·trust). lr, eta, wd are doubles.
DML_EXTERN void dml_lars_rate(float* __restrict__ rate, const double* __restrict__ partial, long long parts,
                              double lr, double eta, double wd) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  double sw = 0.0, sg = 0.0;
  for (long long c = 0; c < parts; c++) {
    sw = __dadd_rn(sw, partial[2 * c]);
    sg = __dadd_rn(sg, partial[2 * c + 1]);
  }
  double trust = 1.0;
  if (sw > 0.0 && sg > 0.0) {
    const double nw = __dsqrt_rn(sw), ng = __dsqrt_rn(sg);
    trust = __ddiv_rn(__dmul_rn(eta, nw), __dadd_rn(ng, __dmul_rn(wd, nw)));
  }
  rate[0] = (float)__dmul_rn(lr, trust);
}

// first[0] must hold n before the launch; it ends as the smallest index of a
// NaN or ±Inf in x (integer atomicMin: order-independent), or n if none.
DML_EXTERN void dml_nonfinite(long long* __restrict__ first, const float* __restrict__ x, long long n) {
  DML_GRID_STRIDE(i, n) {
    const float v = x[i];
    if (!isfinite(v)) atomicMin(first, i);
  }
}
