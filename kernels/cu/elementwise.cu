// elementwise.cu: 1-D kernels (fill, scale, axpy, add, ReLU, bias add, the
// optimizer updates, gather/scatter). Grid-stride loops: any grid and block.
//
// Arithmetic that the CPU backend also does is written with the _rn
// intrinsics, which the compiler never contracts into a fused multiply-add,
// in the CPU's operation order, so the results are the CPU's bit for bit
// (see kernels/optim/rules.go for the update rules).
#include "common.cuh"

DML_EXTERN void dml_fill(float* __restrict__ x, long long n, float v) {
  DML_GRID_STRIDE(i, n) x[i] = v;
}

DML_EXTERN void dml_scale(float* __restrict__ x, long long n, float a) {
  DML_GRID_STRIDE(i, n) x[i] = __fmul_rn(x[i], a);
}

// Mixed precision (kernels.BF16, FP16): src rounded to bfloat16 (fp16 = 0)
// or IEEE half (fp16 != 0), to nearest even, written as float32; the
// products then run on the rounded copies. NaN stays NaN; past the largest
// finite value, ±Inf. Integer and exact float steps only, so that the
// emulator and every GPU give kernels.Precision.Round's values (its NaNs
// may be quieted; these keep their payload).
__device__ __forceinline__ float dml_round_bf16(float x) {
  unsigned int u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return x;
  u += 0x7fffu + ((u >> 16) & 1u);
  return __uint_as_float(u & 0xffff0000u);
}

__device__ __forceinline__ float dml_round_fp16(float x) {
  unsigned int u = __float_as_uint(x), a = u & 0x7fffffffu, sign = u & 0x80000000u;
  if (a > 0x7f800000u) return x;                                  // NaN
  if (a >= 0x477ff000u) return __uint_as_float(sign | 0x7f800000u); // ≥ 65520: rounds past 65504
  if (a >= 0x38800000u) {                                          // ≥ 2^-14: 10 mantissa bits kept
    a += 0xfffu + ((a >> 13) & 1u);
    return __uint_as_float(sign | (a & ~0x1fffu));
  }
  // A subnormal half: a multiple of 2^-24. |x|·2^24 < 1024 is exact; adding
  // and taking away 2^23 rounds it to an integer, to nearest even.
  float q = __fmul_rn(__uint_as_float(a), 16777216.f);
  q = __fsub_rn(__fadd_rn(q, 8388608.f), 8388608.f);
  return __uint_as_float(sign | __float_as_uint(__fmul_rn(q, 5.9604644775390625e-8f)));
}

DML_EXTERN void dml_round(float* __restrict__ dst, const float* __restrict__ src, long long n, long long fp16) {
  if (fp16) {
    DML_GRID_STRIDE(i, n) dst[i] = dml_round_fp16(src[i]);
  } else {
    DML_GRID_STRIDE(i, n) dst[i] = dml_round_bf16(src[i]);
  }
}

// y and x may be the same buffer (then y = y + a·y), so no __restrict__.
DML_EXTERN void dml_axpy(float* y, const float* x, long long n, float a) {
  DML_GRID_STRIDE(i, n) y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

// dst may be a or b.
DML_EXTERN void dml_add(float* dst, const float* a, const float* b, long long n) {
  DML_GRID_STRIDE(i, n) dst[i] = __fadd_rn(a[i], b[i]);
}

// y = max(x, 0); NaN stays NaN, -0 stays -0 (as the CPU's `if v < 0`). y may be x.
DML_EXTERN void dml_relu(float* y, const float* x, long long n) {
  DML_GRID_STRIDE(i, n) {
    float v = x[i];
    y[i] = v < 0.f ? 0.f : v;
  }
}

// dx = dy where y > 0, else 0 (NaN y gives 0). dx may be dy.
DML_EXTERN void dml_relu_grad(float* dx, const float* dy, const float* __restrict__ y, long long n) {
  DML_GRID_STRIDE(i, n) {
    float g = dy[i];
    dx[i] = y[i] > 0.f ? g : 0.f;
  }
}

// x[i, j] += bias[j] over the rows×cols elements of x.
DML_EXTERN void dml_add_bias(float* __restrict__ x, const float* __restrict__ bias, long long rows,
                             long long cols) {
  if (cols <= 0) return;
  const long long n = rows * cols;
  DML_GRID_STRIDE(i, n) x[i] = __fadd_rn(x[i], bias[i % cols]);
}

// SGD: w -= lr·(g + wd·w).
DML_EXTERN void dml_sgd(float* __restrict__ w, const float* __restrict__ g, long long n, float lr,
                        float wd) {
  DML_GRID_STRIDE(i, n) {
    float wi = w[i];
    w[i] = __fsub_rn(wi, __fmul_rn(lr, __fadd_rn(g[i], __fmul_rn(wd, wi))));
  }
}

// Momentum (PyTorch's form): v = mu·v + (g + wd·w); w -= lr·v.
DML_EXTERN void dml_momentum(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ v,
                             long long n, float lr, float mu, float wd) {
  DML_GRID_STRIDE(i, n) {
    float wi = w[i];
    float vi = __fadd_rn(__fmul_rn(mu, v[i]), __fadd_rn(g[i], __fmul_rn(wd, wi)));
    v[i] = vi;
    w[i] = __fsub_rn(wi, __fmul_rn(lr, vi));
  }
}

// Adagrad (PyTorch's form): g' = g + wd·w; h += g'²; w -= lr·g'/(√h + eps),
// where lr·g'/(…) is (lr·g')/(…) as Go evaluates it, and √ is correctly
// rounded (Go's float32(math.Sqrt(float64(h))) is too).
DML_EXTERN void dml_adagrad(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ h,
                            long long n, float lr, float eps, float wd) {
  DML_GRID_STRIDE(i, n) {
    float wi = w[i];
    float gi = __fadd_rn(g[i], __fmul_rn(wd, wi));
    float hi = __fadd_rn(h[i], __fmul_rn(gi, gi));
    h[i] = hi;
    w[i] = __fsub_rn(wi, __fdiv_rn(__fmul_rn(lr, gi), __fadd_rn(__fsqrt_rn(hi), eps)));
  }
}

// Adam and AdamW (PyTorch's), as kernels/optim's adamAt: m and v of
// weight i interleaved in s (2i, 2i+1); the update's constants (1−β1,
// 1−β2, lr/(1−β1^t), √(1−β2^t), AdamW's 1 − lr·wd) come from the host
// (optim.NewAdamStep), so that the same float32 operations run in the
// same order. decoupled is 1 for AdamW, 0 for Adam: every parameter after n
// is a float, as optim.Update.Scalars gives them.
DML_EXTERN void dml_adam(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ s,
                         long long n, float b1, float omb1, float b2, float omb2, float step_size,
                         float bc2_sqrt, float eps, float wd, float decay, float decoupled) {
  DML_GRID_STRIDE(i, n) {
    float wi = w[i];
    float gi = g[i];
    if (decoupled != 0.f) {
      wi = __fmul_rn(wi, decay);
    } else {
      gi = __fadd_rn(gi, __fmul_rn(wd, wi));
    }
    float mi = __fadd_rn(__fmul_rn(b1, s[2 * i]), __fmul_rn(omb1, gi));
    float vi = __fadd_rn(__fmul_rn(b2, s[2 * i + 1]), __fmul_rn(__fmul_rn(omb2, gi), gi));
    s[2 * i] = mi;
    s[2 * i + 1] = vi;
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), bc2_sqrt), eps);
    w[i] = __fsub_rn(wi, __fmul_rn(step_size, __fdiv_rn(mi, denom)));
  }
}

// LARS's element-wise step, as kernels/optim's larsAt: g' = g + wd·w;
// v = mu·v + rate·g'; w -= v, rate the tensor's lr·trust, which
// dml_lars_rate (reduce.cu) left in device memory (rate[0]): the host
// never waits for it.
DML_EXTERN void dml_lars(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ v,
                         long long n, const float* __restrict__ rate, float mu, float wd) {
  const float r = rate[0];
  DML_GRID_STRIDE(i, n) {
    const float wi = w[i];
    const float gi = __fadd_rn(g[i], __fmul_rn(wd, wi));
    const float vi = __fadd_rn(__fmul_rn(mu, v[i]), __fmul_rn(r, gi));
    v[i] = vi;
    w[i] = __fsub_rn(wi, vi);
  }
}

// dst[i·width + c] = src[idx[i]·width + c] for i < n, c < width: gathers rows
// of a table (width 1: single values) by key index. An index outside
// [0, srcRows) writes NaN (the runtime validates keys on the host; this only
// keeps a bad key from reading out of bounds).
DML_EXTERN void dml_gather(float* __restrict__ dst, const float* __restrict__ src,
                           const long long* __restrict__ idx, long long n, long long width,
                           long long srcRows) {
  if (width <= 0) return;
  const long long total = n * width;
  DML_GRID_STRIDE(e, total) {
    long long i = e / width, c = e - i * width;
    long long k = idx[i];
    dst[e] = (k >= 0 && k < srcRows) ? src[k * width + c] : __int_as_float(0x7fc00000);
  }
}

// dst[idx[i]·width + c] += src[i·width + c]: scatters gradient rows back to
// a table. Precondition (ABI.md): the n indices are distinct, as the sparse
// worker's sorted, compacted key list is; then no two threads touch the same
// element, no atomics are needed, and the result is deterministic. An index
// outside [0, dstRows) is skipped.
DML_EXTERN void dml_scatter_add(float* __restrict__ dst, const float* __restrict__ src,
                                const long long* __restrict__ idx, long long n, long long width,
                                long long dstRows) {
  if (width <= 0) return;
  const long long total = n * width;
  DML_GRID_STRIDE(e, total) {
    long long i = e / width, c = e - i * width;
    long long k = idx[i];
    if (k >= 0 && k < dstRows) dst[k * width + c] = __fadd_rn(dst[k * width + c], src[e]);
  }
}
