// conv.cu: the ops of convolutional networks (kernels.ConvOps and
// kernels.NormOps): image-to-column and its adjoint, max and average
// pooling and their gradients, and batch normalisation.
//
// Images are NCHW, row-major; the runtime checks every shape on the host
// (kernels.CheckConv, CheckPool, CheckNorm) and passes the output sizes it
// derived. Each output element is written by exactly one thread, which
// gathers what it needs in a fixed order: no atomics, and the scatters of
// the CPU backend (Col2im, the pools' gradients) become gathers that add
// the same terms in the same order, so those ops and the forward ops match
// the CPU bit for bit. Batch norm reduces each channel in float64 in one
// block, in a fixed tree order (the CPU sums sequentially: the statistics
// can differ from its in the last bits of a float64, which rarely shows
// after rounding to float32).
#include "common.cuh"

// dml_im2col: cols is (c·k·k) × (n·oh·ow); row (ci·k + ki)·k + kj holds at
// column s·oh·ow + oy·ow + ox the pixel
// x[s][ci][oy·stride + ki − pad][ox·stride + kj − pad], 0 outside.
template <typename I>
__device__ __forceinline__ float dml_im2col_at(const float* __restrict__ x, I i, I c, I h, I w, I k, I stride,
                                               I pad, I oh, I ow, I n) {
  const I p = oh * ow, np = n * p;
  const I col = i % np, r = i / np;  // r = ci·k·k + ki·k + kj
  const I s = col / p, q = col % p;
  const I kj = r % k, ki = (r / k) % k, ci = r / (k * k);
  const I iy = (q / ow) * stride + ki - pad, ix = (q % ow) * stride + kj - pad;
  return (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[((s * c + ci) * h + iy) * w + ix] : 0.f;
}

DML_EXTERN void dml_im2col(float* __restrict__ cols, const float* __restrict__ x, long long n, long long c,
                           long long h, long long w, long long k, long long stride, long long pad,
                           long long oh, long long ow) {
  const long long total = c * k * k * n * oh * ow, img = n * c * h * w;
  if (dml_fits32(total > img ? total : img)) {
    DML_GRID_STRIDE32(i, total) {
      cols[i] = dml_im2col_at<int>(x, i, (int)c, (int)h, (int)w, (int)k, (int)stride, (int)pad, (int)oh, (int)ow, (int)n);
    }
  } else {
    DML_GRID_STRIDE(i, total) { cols[i] = dml_im2col_at<long long>(x, i, c, h, w, k, stride, pad, oh, ow, n); }
  }
}

// dml_col2im: dx (n × c × h × w) = every column entry added back to the
// pixel it was read from: each pixel sums its entries over (ki, kj) in
// row-major order, starting from 0, as the CPU's scatter adds them.
DML_EXTERN void dml_col2im(float* __restrict__ dx, const float* __restrict__ cols, long long n, long long c,
                           long long h, long long w, long long k, long long stride, long long pad,
                           long long oh, long long ow) {
  const long long p = oh * ow, np = n * p, total = n * c * h * w;
  DML_GRID_STRIDE(i, total) {
    const long long ix = i % w, iy = (i / w) % h, ci = (i / (h * w)) % c, s = i / (c * h * w);
    const float* base = cols + ci * k * k * np + s * p;
    float sum = 0.f;
    for (long long ki = 0; ki < k; ki++) {
      const long long ty = iy + pad - ki;
      if (ty < 0 || ty % stride != 0 || ty / stride >= oh) continue;
      for (long long kj = 0; kj < k; kj++) {
        const long long tx = ix + pad - kj;
        if (tx < 0 || tx % stride != 0 || tx / stride >= ow) continue;
        sum = __fadd_rn(sum, base[(ki * k + kj) * np + (ty / stride) * ow + tx / stride]);
      }
    }
    dx[i] = sum;
  }
}

// dml_transpose01: dst (b × a × inner) = src (a × b × inner) with the first
// two axes swapped (a convolution's out × n·oh·ow GEMM output to NCHW and
// back). One thread per element of dst, reading src.
DML_EXTERN void dml_transpose01(float* __restrict__ dst, const float* __restrict__ src, long long a, long long b,
                                long long inner) {
  const long long total = a * b * inner;
  if (dml_fits32(total)) {
    const int a32 = (int)a, b32 = (int)b, in32 = (int)inner;
    DML_GRID_STRIDE32(i, total) {
      const int q = i % in32, r = i / in32, ii = r % a32, j = r / a32;
      dst[i] = src[(ii * b32 + j) * in32 + q];
    }
  } else {
    DML_GRID_STRIDE(i, total) {
      const long long q = i % inner, r = i / inner, ii = r % a, j = r / a;
      dst[i] = src[(ii * b + j) * inner + q];
    }
  }
}

// dml_pad_window_argmax is the index, in its h×w plane, of the maximum of
// the cells of the k×k window at (y0, x0) that lie inside the plane (y0,
// x0 may be negative: the padding, −∞, wins nothing; without padding
// every cell is inside): the first non-NaN value, then any strictly
// larger one (row-major order, ties keep the first); the window's first
// cell when every value is NaN. As kernels/cpu's argmaxPadWindow. I is
// the index type (int where dml_fits32, else long long), as below.
template <typename I>
__device__ __forceinline__ I dml_pad_window_argmax(const float* xp, I h, I w, I y0, I x0, I k) {
  const I ylo = y0 > 0 ? y0 : 0, xlo = x0 > 0 ? x0 : 0;
  const I yhi = y0 + k < h ? y0 + k : h, xhi = x0 + k < w ? x0 + k : w;
  I best = -1;
  float bv = 0.f;
  for (I i = ylo; i < yhi; i++)
    for (I j = xlo; j < xhi; j++) {
      const float v = xp[i * w + j];
      if ((best < 0 && v == v) || (best >= 0 && v > bv)) {
        best = i * w + j;
        bv = v;
      }
    }
  return best < 0 ? ylo * w + xlo : best;
}

// dml_maxpool_at is output i's value (i over planes·oh·ow): its window's
// (padded by pad) maximum.
template <typename I>
__device__ __forceinline__ float dml_maxpool_at(const float* __restrict__ x, I i, I h, I w, I k, I stride, I pad,
                                                I oh, I ow) {
  const I ox = i % ow, oy = (i / ow) % oh, pl = i / (oh * ow);
  const float* xp = x + pl * h * w;
  return xp[dml_pad_window_argmax<I>(xp, h, w, oy * stride - pad, ox * stride - pad, k)];
}

// dml_maxpool_all is y = every window's maximum (dml_maxpool and
// dml_maxpool_pad), with 32-bit indices where they fit.
__device__ __forceinline__ void dml_maxpool_all(float* __restrict__ y, const float* __restrict__ x, long long planes,
                                                long long h, long long w, long long k, long long stride,
                                                long long pad, long long oh, long long ow) {
  const long long total = planes * oh * ow, in = planes * h * w;
  if (dml_fits32(total > in ? total : in)) {
    DML_GRID_STRIDE32(i, total) {
      y[i] = dml_maxpool_at<int>(x, i, (int)h, (int)w, (int)k, (int)stride, (int)pad, (int)oh, (int)ow);
    }
  } else {
    DML_GRID_STRIDE(i, total) { y[i] = dml_maxpool_at<long long>(x, i, h, w, k, stride, pad, oh, ow); }
  }
}

// dml_maxpool: y (planes × oh × ow) = each window's maximum, x[argmax].
DML_EXTERN void dml_maxpool(float* __restrict__ y, const float* __restrict__ x, long long planes, long long h,
                            long long w, long long k, long long stride, long long oh, long long ow) {
  dml_maxpool_all(y, x, planes, h, w, k, stride, 0, oh, ow);
}

// The windows (oy, ox) that contain pixel (iy, ix) along one axis:
// [lo, hi] with oy·stride ≤ iy < oy·stride + k and 0 ≤ oy < oh.
template <typename I>
__device__ __forceinline__ void dml_windows_over(I iy, I k, I stride, I oh, I* lo, I* hi) {
  const I a = iy - k + 1;
  *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  const I b = iy / stride;
  *hi = b < oh - 1 ? b : oh - 1;
}

// dml_maxpool_grad_at is input pixel i's gradient (i over planes·h·w):
// the dy of the windows (padded by pad) whose argmax it is, added in the
// windows' row-major order (as the CPU's scatter does).
template <typename I>
__device__ __forceinline__ float dml_maxpool_grad_at(const float* __restrict__ dy, const float* __restrict__ x, I i,
                                                     I h, I w, I k, I stride, I pad, I oh, I ow) {
  const I ix = i % w, iy = (i / w) % h, pl = i / (h * w), at = iy * w + ix;
  const float* xp = x + pl * h * w;
  const float* dyp = dy + pl * oh * ow;
  I ylo, yhi, xlo, xhi;
  dml_windows_over<I>(iy + pad, k, stride, oh, &ylo, &yhi);
  dml_windows_over<I>(ix + pad, k, stride, ow, &xlo, &xhi);
  float s = 0.f;
  for (I oy = ylo; oy <= yhi; oy++)
    for (I ox = xlo; ox <= xhi; ox++)
      if (dml_pad_window_argmax<I>(xp, h, w, oy * stride - pad, ox * stride - pad, k) == at)
        s = __fadd_rn(s, dyp[oy * ow + ox]);
  return s;
}

// dml_maxpool_grad_all is dx for every input pixel (dml_maxpool_grad and
// dml_maxpool_pad_grad), with 32-bit indices where they fit.
__device__ __forceinline__ void dml_maxpool_grad_all(float* __restrict__ dx, const float* __restrict__ dy,
                                                     const float* __restrict__ x, long long planes, long long h,
                                                     long long w, long long k, long long stride, long long pad,
                                                     long long oh, long long ow) {
  const long long total = planes * h * w, out = planes * oh * ow;
  if (dml_fits32(total > out ? total : out)) {
    DML_GRID_STRIDE32(i, total) {
      dx[i] = dml_maxpool_grad_at<int>(dy, x, i, (int)h, (int)w, (int)k, (int)stride, (int)pad, (int)oh, (int)ow);
    }
  } else {
    DML_GRID_STRIDE(i, total) { dx[i] = dml_maxpool_grad_at<long long>(dy, x, i, h, w, k, stride, pad, oh, ow); }
  }
}

// dml_maxpool_grad: dx = dy routed to each window's argmax, 0 elsewhere
// (dml_maxpool_grad_at).
DML_EXTERN void dml_maxpool_grad(float* __restrict__ dx, const float* __restrict__ dy, const float* __restrict__ x,
                                 long long planes, long long h, long long w, long long k, long long stride,
                                 long long oh, long long ow) {
  dml_maxpool_grad_all(dx, dy, x, planes, h, w, k, stride, 0, oh, ow);
}

// dml_maxpool_grad_disjoint: the gradient where the windows do not
// overlap (stride ≥ k, no padding), over dx already zeroed: one thread
// per window (planes·oh·ow) writes 0 + dy to its argmax — the one term
// dml_maxpool_grad's gather adds there, so the same bits (+0 for a dy of
// −0 too) — instead of every input pixel recomputing its window's argmax.
template <typename I>
__device__ __forceinline__ void dml_maxpool_grad_disjoint_all(float* __restrict__ dx, const float* __restrict__ dy,
                                                              const float* __restrict__ x, I total, I h, I w, I k,
                                                              I stride, I oh, I ow) {
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (I)blockDim.x * gridDim.x) {
    const I ox = i % ow, oy = (i / ow) % oh, pl = i / (oh * ow);
    const float* xp = x + pl * h * w;
    dx[pl * h * w + dml_pad_window_argmax<I>(xp, h, w, oy * stride, ox * stride, k)] = __fadd_rn(0.f, dy[i]);
  }
}

DML_EXTERN void dml_maxpool_grad_disjoint(float* __restrict__ dx, const float* __restrict__ dy,
                                          const float* __restrict__ x, long long planes, long long h, long long w,
                                          long long k, long long stride, long long oh, long long ow) {
  const long long total = planes * oh * ow, in = planes * h * w;
  if (dml_fits32(total > in ? total : in)) {
    dml_maxpool_grad_disjoint_all<int>(dx, dy, x, (int)total, (int)h, (int)w, (int)k, (int)stride, (int)oh, (int)ow);
  } else {
    dml_maxpool_grad_disjoint_all<long long>(dx, dy, x, total, h, w, k, stride, oh, ow);
  }
}

// dml_maxpool_pad: y (planes × oh × ow) = each padded window's maximum
// (PyTorch's MaxPool2d padding).
DML_EXTERN void dml_maxpool_pad(float* __restrict__ y, const float* __restrict__ x, long long planes, long long h,
                                long long w, long long k, long long stride, long long pad, long long oh,
                                long long ow) {
  dml_maxpool_all(y, x, planes, h, w, k, stride, pad, oh, ow);
}

// dml_maxpool_pad_grad: dx = dy routed to each padded window's argmax, 0
// elsewhere (dml_maxpool_grad_at).
DML_EXTERN void dml_maxpool_pad_grad(float* __restrict__ dx, const float* __restrict__ dy,
                                     const float* __restrict__ x, long long planes, long long h, long long w,
                                     long long k, long long stride, long long pad, long long oh, long long ow) {
  dml_maxpool_grad_all(dx, dy, x, planes, h, w, k, stride, pad, oh, ow);
}

// dml_avgpool: y = the window's values summed in row-major order, times
// 1/(k·k) (both in float32, as the CPU).
DML_EXTERN void dml_avgpool(float* __restrict__ y, const float* __restrict__ x, long long planes, long long h,
                            long long w, long long k, long long stride, long long oh, long long ow) {
  const long long total = planes * oh * ow;
  const float inv = __fdiv_rn(1.f, (float)(k * k));
  DML_GRID_STRIDE(i, total) {
    const long long ox = i % ow, oy = (i / ow) % oh, pl = i / (oh * ow);
    const float* xp = x + pl * h * w;
    float s = 0.f;
    for (long long a = oy * stride; a < oy * stride + k; a++)
      for (long long b = ox * stride; b < ox * stride + k; b++) s = __fadd_rn(s, xp[a * w + b]);
    y[i] = __fmul_rn(s, inv);
  }
}

// dml_avgpool_grad: dx = Σ over the windows that contain the pixel (in
// row-major order) of dy·1/(k·k).
DML_EXTERN void dml_avgpool_grad(float* __restrict__ dx, const float* __restrict__ dy, long long planes,
                                 long long h, long long w, long long k, long long stride, long long oh,
                                 long long ow) {
  const long long total = planes * h * w;
  const float inv = __fdiv_rn(1.f, (float)(k * k));
  DML_GRID_STRIDE(i, total) {
    const long long ix = i % w, iy = (i / w) % h, pl = i / (h * w);
    const float* dyp = dy + pl * oh * ow;
    long long ylo, yhi, xlo, xhi;
    dml_windows_over(iy, k, stride, oh, &ylo, &yhi);
    dml_windows_over(ix, k, stride, ow, &xlo, &xhi);
    float s = 0.f;
    for (long long oy = ylo; oy <= yhi; oy++)
      for (long long ox = xlo; ox <= xhi; ox++) s = __fadd_rn(s, __fmul_rn(dyp[oy * ow + ox], inv));
    dx[i] = s;
  }
}

// ---- batch normalisation (per channel over n·hw values; NCHW) -------------
// One block of DML_RED_THREADS threads per channel (a grid-stride loop over
// the channels, so any grid ≥ 1 works). Element e of a channel's n·hw is
// x[((e / hw)·c + ch)·hw + e % hw].

__device__ __forceinline__ long long dml_bn_at(long long e, long long ch, long long c, long long hw) {
  return ((e / hw) * c + ch) * hw + e % hw;
}

// Batch norm's per-channel sums run in two stages so that a layer of few
// channels (ResNet's 16) still fills the GPU: dml_bn_partial and
// dml_bn_grad_partial give each of the c·splits blocks one channel's p-th
// slice of its N = n·hw values (splits a function of the shape alone: the
// same bits on every GPU), and the finishing kernels add each channel's
// slices in order. Sums are float64 in a fixed order.

// dml_bn_partial: part[2b], part[2b+1] = Σx and Σx² (float64) over block
// b's slice (b = ch·splits + p): one pass over x.
DML_EXTERN void dml_bn_partial(double* __restrict__ part, const float* __restrict__ x, long long n, long long c,
                               long long hw, long long splits) {
  dml_require_red_threads();
  __shared__ double sh[DML_RED_THREADS];
  const long long cnt = n * hw;
  for (long long b = blockIdx.x; b < c * splits; b += gridDim.x) {
    const long long ch = b / splits;
    long long lo, hi;
    dml_bn_slice(cnt, splits, b % splits, &lo, &hi);
    double s = 0, q = 0;
    for (long long e = lo + threadIdx.x; e < hi; e += DML_RED_THREADS) {
      const double v = (double)x[dml_bn_at(e, ch, c, hw)];
      s = __dadd_rn(s, v);
      q = __dadd_rn(q, __dmul_rn(v, v));
    }
    s = dml_block_sum_d(s, sh);
    q = dml_block_sum_d(q, sh);
    if (threadIdx.x == 0) {
      part[2 * b] = s;
      part[2 * b + 1] = q;
    }
  }
}

// dml_bn_finish_channel finishes channel ch from its sums sx = Σx and
// sq = Σx² over cnt values: μ = Σx/N, σ² = max(Σx²/N − μ², 0) (N = cnt,
// 1 for cnt ≤ 1), mean and invstd, the running statistics (unbiased
// σ²·cnt/(cnt−1), σ² when cnt ≤ 1) and ss's scale and shift
// (dml_bn_finish and dml_bn_finish_sums share it).
__device__ __forceinline__ void dml_bn_finish_channel(long long ch, double sx, double sq, long long cnt, float eps,
                                                      float momentum, double* ss, float* mean, float* invstd,
                                                      float* runMean, float* runVar, const float* gamma,
                                                      const float* beta) {
  const double dcnt = cnt > 1 ? (double)cnt : 1.0;
  const double mu = __ddiv_rn(sx, dcnt);
  const double v = fmax(__dsub_rn(__ddiv_rn(sq, dcnt), __dmul_rn(mu, mu)), 0.0);
  const double inv = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(v, (double)eps)));
  mean[ch] = (float)mu;
  invstd[ch] = (float)inv;
  const double unbiased = cnt > 1 ? __ddiv_rn(__dmul_rn(v, (double)cnt), (double)(cnt - 1)) : v;
  const double m = (double)momentum;
  runMean[ch] = (float)__dadd_rn(__dmul_rn(__dsub_rn(1.0, m), (double)runMean[ch]), __dmul_rn(m, mu));
  runVar[ch] = (float)__dadd_rn(__dmul_rn(__dsub_rn(1.0, m), (double)runVar[ch]), __dmul_rn(m, unbiased));
  const double scale = __dmul_rn((double)gamma[ch], inv);
  ss[2 * ch] = scale;
  ss[2 * ch + 1] = __dsub_rn((double)beta[ch], __dmul_rn(scale, mu));
}

// dml_bn_finish: one thread per channel adds its slices in order: μ =
// Σx/N and the biased variance σ² = max(Σx²/N − μ², 0) (float64), written
// as mean = μ and invstd = 1/√(σ² + eps) (float32); the running statistics
// updated with momentum m (runVar takes the unbiased σ²·N/(N−1), σ² when
// N = 1); and ss[2ch], ss[2ch+1] = the float64 scale γ·invstd and shift
// β − γ·invstd·μ that dml_bn_apply applies.
DML_EXTERN void dml_bn_finish(double* __restrict__ ss, float* __restrict__ mean, float* __restrict__ invstd,
                              float* __restrict__ runMean, float* __restrict__ runVar,
                              const double* __restrict__ part, const float* __restrict__ gamma,
                              const float* __restrict__ beta, long long n, long long c, long long hw,
                              long long splits, float eps, float momentum) {
  const long long cnt = n * hw;
  DML_GRID_STRIDE(ch, c) {
    double sx = 0, sq = 0;
    for (long long p = 0; p < splits; p++) {
      sx = __dadd_rn(sx, part[2 * (ch * splits + p)]);
      sq = __dadd_rn(sq, part[2 * (ch * splits + p) + 1]);
    }
    dml_bn_finish_channel(ch, sx, sq, cnt, eps, momentum, ss, mean, invstd, runMean, runVar, gamma, beta);
  }
}

// dml_bn_coef: ss as dml_bn_stats writes it, from the running statistics
// (evaluation): one thread per channel, grid-stride.
DML_EXTERN void dml_bn_coef(double* __restrict__ ss, const float* __restrict__ runMean,
                            const float* __restrict__ runVar, const float* __restrict__ gamma,
                            const float* __restrict__ beta, long long c, float eps) {
  DML_GRID_STRIDE(ch, c) {
    const double inv = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn((double)runVar[ch], (double)eps)));
    const double scale = __dmul_rn((double)gamma[ch], inv);
    ss[2 * ch] = scale;
    ss[2 * ch + 1] = __dsub_rn((double)beta[ch], __dmul_rn(scale, (double)runMean[ch]));
  }
}

// dml_bn_apply: y = scale·x + shift per channel, in float64, rounded once
// (y may be x). Grid-stride over the n·c·hw elements.
DML_EXTERN void dml_bn_apply(float* y, const float* x, const double* __restrict__ ss, long long n, long long c,
                             long long hw) {
  const long long total = n * c * hw;
  DML_GRID_STRIDE(i, total) {
    const long long ch = (i / hw) % c;
    y[i] = (float)__dadd_rn(__dmul_rn(ss[2 * ch], (double)x[i]), ss[2 * ch + 1]);
  }
}

// dml_bn_grad_partial: part[2b], part[2b+1] = Σ dy and Σ dy·(x − μ)·invstd
// (float64) over block b's slice, as dml_bn_partial.
DML_EXTERN void dml_bn_grad_partial(double* __restrict__ part, const float* __restrict__ dy,
                                    const float* __restrict__ x, const float* __restrict__ mean,
                                    const float* __restrict__ invstd, long long n, long long c, long long hw,
                                    long long splits) {
  dml_require_red_threads();
  __shared__ double sh[DML_RED_THREADS];
  const long long cnt = n * hw;
  for (long long b = blockIdx.x; b < c * splits; b += gridDim.x) {
    const long long ch = b / splits;
    const double mu = (double)mean[ch], inv = (double)invstd[ch];
    long long lo, hi;
    dml_bn_slice(cnt, splits, b % splits, &lo, &hi);
    double a = 0, q = 0;
    for (long long e = lo + threadIdx.x; e < hi; e += DML_RED_THREADS) {
      const long long at = dml_bn_at(e, ch, c, hw);
      const double g = (double)dy[at];
      a = __dadd_rn(a, g);
      q = __dadd_rn(q, __dmul_rn(__dmul_rn(g, __dsub_rn((double)x[at], mu)), inv));
    }
    a = dml_block_sum_d(a, sh);
    q = dml_block_sum_d(q, sh);
    if (threadIdx.x == 0) {
      part[2 * b] = a;
      part[2 * b + 1] = q;
    }
  }
}

// dml_bn_grad_finish: one thread per channel adds its slices in order:
// sums[2ch] = Σ dy and sums[2ch+1] = Σ dy·x̂ (float64); dbeta and dgamma
// are those, rounded.
DML_EXTERN void dml_bn_grad_finish(double* __restrict__ sums, float* __restrict__ dgamma, float* __restrict__ dbeta,
                                   const double* __restrict__ part, long long c, long long splits) {
  DML_GRID_STRIDE(ch, c) {
    double a = 0, q = 0;
    for (long long p = 0; p < splits; p++) {
      a = __dadd_rn(a, part[2 * (ch * splits + p)]);
      q = __dadd_rn(q, part[2 * (ch * splits + p) + 1]);
    }
    sums[2 * ch] = a;
    sums[2 * ch + 1] = q;
    dbeta[ch] = (float)a;
    dgamma[ch] = (float)q;
  }
}

// dml_bn_grad_apply: dx = γ·invstd·(dy − Σdy/N − x̂·Σdy·x̂/N), x̂ = (x − μ)·invstd,
// in float64 (dx may be dy). Grid-stride over the n·c·hw elements.
DML_EXTERN void dml_bn_grad_apply(float* dx, const float* dy, const float* __restrict__ x,
                                  const float* __restrict__ mean, const float* __restrict__ invstd,
                                  const float* __restrict__ gamma, const double* __restrict__ sums, long long n,
                                  long long c, long long hw) {
  const long long total = n * c * hw;
  const double cnt = n * hw > 1 ? (double)(n * hw) : 1.0;
  DML_GRID_STRIDE(i, total) {
    const long long ch = (i / hw) % c;
    const double inv = (double)invstd[ch];
    const double k1 = __dmul_rn((double)gamma[ch], inv);
    const double xh = __dmul_rn(__dsub_rn((double)x[i], (double)mean[ch]), inv);
    const double t = __dsub_rn(__dsub_rn((double)dy[i], __ddiv_rn(sums[2 * ch], cnt)),
                               __ddiv_rn(__dmul_rn(xh, sums[2 * ch + 1]), cnt));
    dx[i] = (float)__dmul_rn(k1, t);
  }
}

// ---- local response normalisation (across channels; NCHW) ---------------
// One thread per element; each value in float64, rounded once (the CPU
// backend's maths, kernels/cpu/lrn.go).

// dml_lrn: s = k + α/size · Σ x² over channels c − ⌊size/2⌋ … c +
// ⌊(size−1)/2⌋ that exist, y = x·s^−β.
DML_EXTERN void dml_lrn(float* __restrict__ y, float* __restrict__ s, const float* __restrict__ x, long long n,
                        long long c, long long hw, long long size, float alpha, float beta, float k) {
  const long long total = n * c * hw;
  DML_GRID_STRIDE(at, total) {
    const long long p = at % hw, ch = (at / hw) % c, i = at / (hw * c);
    const long long lo = ch - size / 2 > 0 ? ch - size / 2 : 0;
    const long long hi = ch + (size - 1) / 2 < c - 1 ? ch + (size - 1) / 2 : c - 1;
    double sum = 0;
    for (long long q = lo; q <= hi; q++) {
      const double v = (double)x[(i * c + q) * hw + p];
      sum = __dadd_rn(sum, __dmul_rn(v, v));
    }
    const double sc = __dadd_rn((double)k, __dmul_rn(__ddiv_rn((double)alpha, (double)size), sum));
    s[at] = (float)sc;
    y[at] = (float)__dmul_rn((double)x[at], pow(sc, -(double)beta));
  }
}

// dml_lrn_grad: dx_j = dy_j·s_j^−β − (2αβ/size)·x_j·Σ dy_i·x_i·s_i^(−β−1)
// over the channels i whose window holds j (dx may not be dy).
DML_EXTERN void dml_lrn_grad(float* __restrict__ dx, const float* __restrict__ dy, const float* __restrict__ x,
                             const float* __restrict__ s, long long n, long long c, long long hw, long long size,
                             float alpha, float beta, float k) {
  const long long total = n * c * hw;
  const double b = (double)beta, f = __ddiv_rn(2.0 * (double)alpha * b, (double)size);
  DML_GRID_STRIDE(at, total) {
    const long long p = at % hw, ch = (at / hw) % c, i = at / (hw * c);
    const long long lo = ch - (size - 1) / 2 > 0 ? ch - (size - 1) / 2 : 0;
    const long long hi = ch + size / 2 < c - 1 ? ch + size / 2 : c - 1;
    double sum = 0;
    for (long long q = lo; q <= hi; q++) {
      const long long o = (i * c + q) * hw + p;
      sum = __dadd_rn(sum, __dmul_rn(__dmul_rn((double)dy[o], (double)x[o]), pow((double)s[o], -b - 1.0)));
    }
    dx[at] = (float)__dsub_rn(__dmul_rn((double)dy[at], pow((double)s[at], -b)), __dmul_rn(__dmul_rn(f, (double)x[at]), sum));
  }
}

// ---- batch norm over several ranks (SyncBatchNorm; kernels.SyncNormOps) ----
// The runtime runs dml_bn_partial (or dml_bn_grad_partial) and then
// dml_bn_sums_finish for a rank's sums; the caller sums them over the
// ranks; dml_bn_finish_sums and dml_bn_apply (or dml_bn_grad_input) use
// them.

// dml_bn_sums_finish: one thread per channel adds its slices in order:
// sums[ch], sums[c+ch] = the two float64 partial sums, rounded.
DML_EXTERN void dml_bn_sums_finish(float* __restrict__ sums, const double* __restrict__ part, long long c,
                                   long long splits) {
  DML_GRID_STRIDE(ch, c) {
    double a = 0, q = 0;
    for (long long p = 0; p < splits; p++) {
      a = __dadd_rn(a, part[2 * (ch * splits + p)]);
      q = __dadd_rn(q, part[2 * (ch * splits + p) + 1]);
    }
    sums[ch] = (float)a;
    sums[c + ch] = (float)q;
  }
}

// dml_bn_finish_sums: dml_bn_finish from summed sums over count values:
// μ = Σx/count, σ² = max(Σx²/count − μ², 0), mean, invstd, the running
// statistics (unbiased σ²·count/(count−1)), and ss for dml_bn_apply.
DML_EXTERN void dml_bn_finish_sums(double* __restrict__ ss, float* __restrict__ mean, float* __restrict__ invstd,
                                   float* __restrict__ runMean, float* __restrict__ runVar,
                                   const float* __restrict__ sums, const float* __restrict__ gamma,
                                   const float* __restrict__ beta, long long count, long long c, float eps,
                                   float momentum) {
  DML_GRID_STRIDE(ch, c) {
    dml_bn_finish_channel(ch, (double)sums[ch], (double)sums[c + ch], count, eps, momentum, ss, mean, invstd, runMean,
                          runVar, gamma, beta);
  }
}

// dml_bn_grad_input: dx = γ·invstd·(dy − Σdy/count − x̂·Σdy·x̂/count), the
// sums (sums[ch] = Σdy, sums[c+ch] = Σdy·x̂) over every rank; float64 (dx
// may be dy). Grid-stride over the n·c·hw elements.
DML_EXTERN void dml_bn_grad_input(float* dx, const float* dy, const float* __restrict__ x,
                                  const float* __restrict__ mean, const float* __restrict__ invstd,
                                  const float* __restrict__ gamma, const float* __restrict__ sums, long long count,
                                  long long n, long long c, long long hw) {
  const long long total = n * c * hw;
  const double cnt = count > 1 ? (double)count : 1.0;
  DML_GRID_STRIDE(i, total) {
    const long long ch = (i / hw) % c;
    const double inv = (double)invstd[ch];
    const double k1 = __dmul_rn((double)gamma[ch], inv);
    const double xh = __dmul_rn(__dsub_rn((double)x[i], (double)mean[ch]), inv);
    const double t = __dsub_rn(__dsub_rn((double)dy[i], __ddiv_rn((double)sums[ch], cnt)),
                               __ddiv_rn(__dmul_rn(xh, (double)sums[c + ch]), cnt));
    dx[i] = (float)__dmul_rn(k1, t);
  }
}
