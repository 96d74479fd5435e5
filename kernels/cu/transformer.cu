// transformer.cu: GELU and layer normalisation (kernels.TransformerOps).
// The maths is the CPU backend's (kernels/cpu/transformer.go): each value
// in float64, rounded once; the sums float64 in a fixed order.
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

// dml_layer_norm: one block of DML_RED_THREADS per row (grid-stride over
// the rows): μ, then σ² from the deviations (two passes, float64), mean
// and invstd written, y = (x − μ)·invstd·γ + β in float64.
DML_EXTERN void dml_layer_norm(float* __restrict__ y, float* __restrict__ mean, float* __restrict__ invstd,
                               const float* __restrict__ x, const float* __restrict__ gamma,
                               const float* __restrict__ beta, long long rows, long long cols, float eps) {
  dml_require_red_threads();
  __shared__ double sh[DML_RED_THREADS];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xs = x + r * cols;
    double s = 0;
    for (long long j = threadIdx.x; j < cols; j += DML_RED_THREADS) s = __dadd_rn(s, (double)xs[j]);
    const double mu = __ddiv_rn(dml_block_sum_d(s, sh), (double)cols);
    double q = 0;
    for (long long j = threadIdx.x; j < cols; j += DML_RED_THREADS) {
      const double d = __dsub_rn((double)xs[j], mu);
      q = __dadd_rn(q, __dmul_rn(d, d));
    }
    const double v = __ddiv_rn(dml_block_sum_d(q, sh), (double)cols);
    const double inv = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(v, (double)eps)));
    if (threadIdx.x == 0) {
      mean[r] = (float)mu;
      invstd[r] = (float)inv;
    }
    for (long long j = threadIdx.x; j < cols; j += DML_RED_THREADS)
      y[r * cols + j] = (float)__dadd_rn(__dmul_rn(__dmul_rn(__dsub_rn((double)xs[j], mu), inv), (double)gamma[j]),
                                         (double)beta[j]);
  }
}

// dml_layer_norm_grad_rows: one block per row (grid-stride): g = γ·dy,
// x̂ = (x − μ)·invstd, the row's means of g and g·x̂ (float64), dx =
// invstd·(g − mean(g) − x̂·mean(g·x̂)). dx may be dy (each element is read
// by the thread that writes it, before the barriers of the sums end).
DML_EXTERN void dml_layer_norm_grad_rows(float* dx, const float* dy, const float* __restrict__ x,
                                         const float* __restrict__ mean, const float* __restrict__ invstd,
                                         const float* __restrict__ gamma, long long rows, long long cols) {
  dml_require_red_threads();
  __shared__ double sh[DML_RED_THREADS];
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const double mu = (double)mean[r], inv = (double)invstd[r];
    double a = 0, q = 0;
    for (long long j = threadIdx.x; j < cols; j += DML_RED_THREADS) {
      const long long p = r * cols + j;
      const double g = __dmul_rn((double)gamma[j], (double)dy[p]);
      a = __dadd_rn(a, g);
      q = __dadd_rn(q, __dmul_rn(g, __dmul_rn(__dsub_rn((double)x[p], mu), inv)));
    }
    const double mg = __ddiv_rn(dml_block_sum_d(a, sh), (double)cols);
    const double mgx = __ddiv_rn(dml_block_sum_d(q, sh), (double)cols);
    for (long long j = threadIdx.x; j < cols; j += DML_RED_THREADS) {
      const long long p = r * cols + j;
      const double xh = __dmul_rn(__dsub_rn((double)x[p], mu), inv);
      const double g = __dmul_rn((double)gamma[j], (double)dy[p]);
      dx[p] = (float)__dmul_rn(inv, __dsub_rn(__dsub_rn(g, mg), __dmul_rn(xh, mgx)));
    }
  }
}

// dml_layer_norm_grad_cols: one thread per column (grid-stride): dγ = Σ
// dy·x̂ and dβ = Σ dy over the rows in order (float64), overwritten.
DML_EXTERN void dml_layer_norm_grad_cols(float* __restrict__ dgamma, float* __restrict__ dbeta,
                                         const float* __restrict__ dy, const float* __restrict__ x,
                                         const float* __restrict__ mean, const float* __restrict__ invstd,
                                         long long rows, long long cols) {
  DML_GRID_STRIDE(j, cols) {
    double sg = 0, sb = 0;
    for (long long r = 0; r < rows; r++) {
      const long long p = r * cols + j;
      const double d = (double)dy[p];
      const double xh = __dmul_rn(__dsub_rn((double)x[p], (double)mean[r]), (double)invstd[r]);
      sg = __dadd_rn(sg, __dmul_rn(d, xh));
      sb = __dadd_rn(sb, d);
    }
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
