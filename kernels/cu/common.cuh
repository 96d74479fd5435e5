// common.cuh: helpers shared by the kernels in this folder (device code only).
// See ABI.md for the contract every extern "C" kernel follows.
#pragma once

#define DML_EXTERN extern "C" __global__

// Threads per block of the row and reduction kernels (ABI.md): their shared
// memory trees assume exactly this many; any other block size traps, so the
// runtime gets a launch error instead of a wrong answer.
#define DML_RED_THREADS 256

// grid-stride loop over [0, n) with 64-bit indices.
#define DML_GRID_STRIDE(i, n)                                                   \
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (long long)blockDim.x * gridDim.x)

// grid-stride loop over [0, n) with int indices: only where
// dml_fits32(n) (n and every index the body forms below 2^31 minus the
// grid's stride, so that i never overflows). 64-bit integer division is a
// long subroutine on the GPU: index-heavy kernels (im2col, pooling) run
// several times faster with 32-bit indices.
#define DML_GRID_STRIDE32(i, n)                                             \
  for (int i = (int)(blockIdx.x * blockDim.x + threadIdx.x); i < (int)(n); \
       i += (int)(blockDim.x * gridDim.x))

__device__ __forceinline__ bool dml_fits32(long long n) {
  return n >= 0 && n <= 0x7fffffffLL - (long long)blockDim.x * gridDim.x;
}

__device__ __forceinline__ void dml_require_red_threads() {
  if (blockDim.x != DML_RED_THREADS || blockDim.y != 1 || blockDim.z != 1) __trap();
}

// Argmax candidates: idx < 0 means "no candidate" (every value seen was NaN).
// The combined result is the first index of the largest non-NaN value, which
// with the row[0]-is-NaN rule in dml_row_argmax reproduces the CPU's
// sequential `if v > top` scan exactly.
__device__ __forceinline__ void dml_argmax_combine(float& v, long long& i, float ov, long long oi) {
  if (oi < 0) return;
  if (i < 0 || ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

// dml_row_argmax returns, to every thread of the block, the index of the
// first maximum of row[0..cols) as the CPU computes it (0 when row[0] is NaN,
// when every value is NaN, or when cols == 0), and that value (row[best], or
// NaN / 0 as the CPU would see it). sv and si are shared scratch of
// DML_RED_THREADS entries. Ends with a __syncthreads.
__device__ __forceinline__ long long dml_row_argmax(const float* row, long long cols, float* sv,
                                                    long long* si, float* top) {
  const int t = threadIdx.x;
  float v = 0.f;
  long long i = -1;
  for (long long j = t; j < cols; j += DML_RED_THREADS) {
    float x = row[j];
    if (x == x) dml_argmax_combine(v, i, x, j);
  }
  sv[t] = v;
  si[t] = i;
  __syncthreads();
  for (int s = DML_RED_THREADS / 2; s > 0; s >>= 1) {
    if (t < s) {
      float a = sv[t];
      long long ai = si[t];
      dml_argmax_combine(a, ai, sv[t + s], si[t + s]);
      sv[t] = a;
      si[t] = ai;
    }
    __syncthreads();
  }
  long long best = si[0];
  float bv = sv[0];
  float first = cols > 0 ? row[0] : 0.f;
  __syncthreads();  // everyone has read sv[0]/si[0] before the scratch is reused
  if (cols <= 0) {
    *top = 0.f;
    return 0;
  }
  if (first != first || best < 0) {  // row[0] NaN: the CPU keeps index 0, top NaN
    *top = first;
    return 0;
  }
  *top = bv;
  return best;
}

// dml_bn_slice is the p-th of splits near-equal slices of [0, cnt) (batch
// norm's and layer norm's two-stage sums).
__device__ __forceinline__ void dml_bn_slice(long long cnt, long long splits, long long p, long long* lo, long long* hi) {
  *lo = cnt * p / splits;
  *hi = cnt * (p + 1) / splits;
}

// dml_block_reduce_d returns to every thread op folded over each thread's
// v in the block, in a fixed tree order. sh is shared scratch of
// DML_RED_THREADS doubles. Ends with a __syncthreads.
template <typename Op>
__device__ __forceinline__ double dml_block_reduce_d(double v, double* sh, Op op) {
  const int t = threadIdx.x;
  sh[t] = v;
  __syncthreads();
  for (int s = DML_RED_THREADS / 2; s > 0; s >>= 1) {
    if (t < s) sh[t] = op(sh[t], sh[t + s]);
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

struct DmlAddD {
  __device__ __forceinline__ double operator()(double a, double b) const { return __dadd_rn(a, b); }
};
struct DmlMaxD {  // fmax: a NaN loses unless every value is NaN
  __device__ __forceinline__ double operator()(double a, double b) const { return fmax(a, b); }
};

// dml_block_sum_d is the block's sum of v (dml_block_reduce_d).
__device__ __forceinline__ double dml_block_sum_d(double v, double* sh) { return dml_block_reduce_d(v, sh, DmlAddD{}); }

// dml_block_max_d is the block's largest v (dml_block_reduce_d).
__device__ __forceinline__ double dml_block_max_d(double v, double* sh) { return dml_block_reduce_d(v, sh, DmlMaxD{}); }

// Row kernels with a warp per row (attention's and layer norm's rows of a
// few hundred values): a block of exactly DML_RED_THREADS takes
// DML_ROWS_PER_BLOCK rows, one a warp; lane l of a row takes its values
// l, l+32, …, and dml_lanes_d combines the 32 lane values in lane order
// in every lane, so each row's result has the same bits whatever the
// schedule. Such a kernel walks its rows in groups of DML_ROWS_PER_BLOCK
// (grid-stride), every thread through every group, because the
// combination waits for the whole block.
#define DML_ROW_LANES 32
#define DML_ROWS_PER_BLOCK (DML_RED_THREADS / DML_ROW_LANES)

// dml_lanes_d returns to every lane op folded over its warp's 32 values v
// in lane order. sh is shared scratch of DML_RED_THREADS doubles; every
// thread of the block must call it.
template <typename Op>
__device__ __forceinline__ double dml_lanes_d(double v, double* sh, Op op) {
  const int w = threadIdx.x - threadIdx.x % DML_ROW_LANES;
  sh[threadIdx.x] = v;
  __syncthreads();
  double r = sh[w];
  for (int l = 1; l < DML_ROW_LANES; l++) r = op(r, sh[w + l]);
  __syncthreads();
  return r;
}

// Column kernels over many rows (a bias's gradient, layer norm's dγ and
// dβ): a block of exactly DML_RED_THREADS is DML_SUM_COLS columns ×
// DML_SUM_LANES lanes (column threadIdx.x % DML_SUM_COLS, lane
// threadIdx.x / DML_SUM_COLS); lane l of a column adds its share of the
// rows l, l+8, l+16, … in order, and dml_col_lanes adds the lanes.
#define DML_SUM_LANES 8
#define DML_SUM_COLS (DML_RED_THREADS / DML_SUM_LANES)

struct DmlAddF {
  __device__ __forceinline__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};

// dml_col_lanes returns to lane 0 of each column add folded over the
// column's DML_SUM_LANES lane values s in lane order (the other lanes get
// their own s back). sm is shared scratch of DML_RED_THREADS values; every
// thread of the block must call it. Ends with a __syncthreads, so sm may
// serve the next call at once.
template <typename T, typename Op>
__device__ __forceinline__ T dml_col_lanes(T s, T* sm, Op add) {
  sm[threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.x < DML_SUM_COLS)
    for (int l = 1; l < DML_SUM_LANES; l++) s = add(s, sm[l * DML_SUM_COLS + threadIdx.x]);
  __syncthreads();
  return s;
}
