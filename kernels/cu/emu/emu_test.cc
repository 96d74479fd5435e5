// emu_test.cc: runs every kernel of kernels/cu on the host through
// cuda_emu.h and compares it with a reference written like the CPU backend
// (kernels/cpu, kernels/optim). `make kernels-emu` builds and runs it; it
// exits non-zero on the first batch of failures.
#include "cuda_emu.h"
#include <algorithm>
#include <random>
#include <string>
#include <tuple>

#include "../conv.cu"
#include "../elementwise.cu"
#include "../gemm.cu"
#include "../gemm_tf32.cu"
#include "../loss.cu"
#include "../reduce.cu"
#include "../transformer.cu"

static int failures = 0;
#define CHECK(cond, ...)                                           \
  do {                                                             \
    if (!(cond)) {                                                 \
      if (failures++ < 30) {                                       \
        std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);  \
        std::fprintf(stderr, __VA_ARGS__);                         \
        std::fprintf(stderr, "\n");                                \
      }                                                            \
    }                                                              \
  } while (0)

static std::mt19937_64 rng(1);
static std::vector<float> normals(size_t n, float sd = 1) {
  std::normal_distribution<float> d(0, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
static bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }
static const float NaN = std::nanf("");

// grids that exercise grid-stride loops: fewer threads than elements.
static const dim3 G1{3, 1, 1}, B1{32, 1, 1};

// ref_round: x rounded to a float of mbits significant bits whose smallest
// normal exponent is emin, to nearest even, ±Inf past maxv (double maths,
// written from the definition, not from the kernel's bit tricks).
static float ref_round(float x, int mbits, int emin, double maxv) {
  if (x != x || std::isinf(x) || x == 0) return x;
  int e;
  std::frexp((double)x, &e);  // |x| = f·2^e, f in [0.5, 1)
  double quantum = std::ldexp(1.0, std::max(e - 1, emin) - (mbits - 1));
  double r = std::nearbyint((double)x / quantum) * quantum;
  if (std::fabs(r) > maxv) return x < 0 ? -INFINITY : INFINITY;
  return (float)r;
}

static void test_round() {
  std::vector<float> x;
  for (float sd : {1e-9f, 1e-6f, 1e-3f, 1.f, 1e3f, 3e4f, 1e5f, 1e38f}) {
    auto v = normals(2000, sd);
    x.insert(x.end(), v.begin(), v.end());
  }
  for (float e : {0.f, -0.f, 65504.f, 65519.f, 65520.f, -65520.f, 0x1p-24f, 0x1p-25f, 1.5f * 0x1p-25f, 0x1p-14f,
                  0x1.ffcp-15f, 1 + 0x1p-8f, 1 + 0x1p-11f, 3.4028235e38f, 1e-40f, INFINITY, -INFINITY, NaN})
    x.push_back(e);
  const long long n = x.size();
  std::vector<float> y(n);
  const double bf16max = std::ldexp(255.0, 120), fp16max = 65504;
  for (long long fp16 : {0LL, 1LL}) {
    emu_launch(dml_round, G1, B1, y.data(), (const float*)x.data(), n, fp16);
    for (long long i = 0; i < n; i++) {
      float want = fp16 ? ref_round(x[i], 11, -14, fp16max) : ref_round(x[i], 8, -126, bf16max);
      CHECK(same_bits(y[i], want) || (want != want && y[i] != y[i]), "round fp16=%lld x=%a: %a, want %a", fp16, x[i], y[i], want);
    }
  }
}

static void test_elementwise() {
  test_round();
  for (long long n : {0LL, 1LL, 7LL, 1000LL}) {
    auto x = normals(n), y = normals(n), g = normals(n), v = normals(n), h = normals(n);
    for (auto& e : h) e = std::fabs(e);
    if (n > 3) {
      x[0] = NaN;
      x[1] = -0.f;
      x[2] = -3.f;
    }
    const float a = 0.37f, lr = 0.05f, mu = 0.9f, wd = 1e-3f, eps = 1e-8f;
    auto t = x;
    emu_launch(dml_fill, G1, B1, t.data(), n, 2.5f);
    for (long long i = 0; i < n; i++) CHECK(t[i] == 2.5f, "fill");
    t = x;
    emu_launch(dml_scale, G1, B1, t.data(), n, a);
    for (long long i = 0; i < n; i++) CHECK(same_bits(t[i], x[i] * a), "scale %lld", i);
    t = y;
    emu_launch(dml_axpy, G1, B1, t.data(), (const float*)x.data(), n, a);
    for (long long i = 0; i < n; i++) CHECK(same_bits(t[i], y[i] + a * x[i]), "axpy %lld", i);
    t = y;
    emu_launch(dml_add, G1, B1, t.data(), (const float*)t.data(), (const float*)x.data(), n);
    for (long long i = 0; i < n; i++) CHECK(same_bits(t[i], y[i] + x[i]), "add %lld", i);
    t = x;
    emu_launch(dml_relu, G1, B1, t.data(), (const float*)t.data(), n);
    for (long long i = 0; i < n; i++) {
      float want = x[i] < 0 ? 0.f : x[i];
      CHECK(same_bits(t[i], want) || (std::isnan(want) && std::isnan(t[i])), "relu %lld", i);
    }
    t = g;
    emu_launch(dml_relu_grad, G1, B1, t.data(), (const float*)t.data(), (const float*)x.data(), n);
    for (long long i = 0; i < n; i++) CHECK(same_bits(t[i], x[i] > 0 ? g[i] : 0.f), "relu_grad %lld", i);
    // optimizers, as kernels/optim/rules.go
    {
      auto w = y;
      emu_launch(dml_sgd, G1, B1, w.data(), (const float*)g.data(), n, lr, wd);
      for (long long i = 0; i < n; i++) {
        float wi = y[i];
        CHECK(same_bits(w[i], wi - lr * (g[i] + wd * wi)), "sgd %lld", i);
      }
      w = y;
      auto vv = v;
      emu_launch(dml_momentum, G1, B1, w.data(), (const float*)g.data(), vv.data(), n, lr, mu, wd);
      for (long long i = 0; i < n; i++) {
        float wi = y[i];
        float vi = mu * v[i] + (g[i] + wd * wi);
        CHECK(same_bits(vv[i], vi) && same_bits(w[i], wi - lr * vi), "momentum %lld", i);
      }
      w = y;
      auto hh = h;
      emu_launch(dml_adagrad, G1, B1, w.data(), (const float*)g.data(), hh.data(), n, lr, eps, wd);
      for (long long i = 0; i < n; i++) {
        float wi = y[i];
        float gi = g[i] + wd * wi;
        float hi = h[i] + gi * gi;
        float want = wi - lr * gi / ((float)std::sqrt((double)hi) + eps);
        CHECK(same_bits(hh[i], hi) && same_bits(w[i], want), "adagrad %lld", i);
      }
      // Adam (decoupled 0) and AdamW (1), m and v interleaved; constants
      // as optim.NewAdamStep gives them for step 3 of lr 0.05, betas 0.9,
      // 0.999: the reference is kernels/optim's adamAt.
      for (float dec : {0.f, 1.f}) {
        const float b1 = 0.9f, omb1 = 0.1f, b2 = 0.999f, omb2 = 0.001f, step_size = 0.18450184f,
                    bc2s = 0.054744864f, decay = 1.f - 0.05f * 1e-3f;
        w = y;
        std::vector<float> s(2 * n), s0(2 * n);
        for (long long i = 0; i < n; i++) s0[2 * i] = v[i], s0[2 * i + 1] = h[i];
        s = s0;
        emu_launch(dml_adam, G1, B1, w.data(), (const float*)g.data(), s.data(), n, b1, omb1, b2, omb2, step_size, bc2s,
                   eps, wd, decay, dec);
        for (long long i = 0; i < n; i++) {
          float wi = y[i], gi = g[i];
          if (dec != 0.f) wi = wi * decay; else gi = gi + wd * wi;
          float mi = b1 * s0[2 * i] + omb1 * gi;
          float vi = b2 * s0[2 * i + 1] + omb2 * gi * gi;
          float denom = (float)std::sqrt((double)vi) / bc2s + eps;
          float want = wi - step_size * (mi / denom);
          CHECK(same_bits(s[2 * i], mi) && same_bits(s[2 * i + 1], vi) && same_bits(w[i], want), "adam(decoupled %g) %lld", (double)dec, i);
        }
      }
    }
  }
  // bias add
  for (auto [rows, cols] : std::vector<std::pair<long long, long long>>{{1, 1}, {5, 7}, {33, 300}, {0, 4}}) {
    auto x = normals(rows * cols), b = normals(cols), t = x;
    emu_launch(dml_add_bias, G1, B1, t.data(), (const float*)b.data(), rows, cols);
    for (long long i = 0; i < rows; i++)
      for (long long j = 0; j < cols; j++)
        CHECK(same_bits(t[i * cols + j], x[i * cols + j] + b[j]), "add_bias %lld,%lld", i, j);
  }
  // gather / scatter_add
  {
    long long rows = 50, width = 3;
    auto table = normals(rows * width);
    std::vector<long long> idx = {0, 3, 7, 49, 12};
    long long n = idx.size();
    std::vector<float> dst(n * width);
    emu_launch(dml_gather, G1, B1, dst.data(), (const float*)table.data(), (const long long*)idx.data(), n, width, rows);
    for (long long i = 0; i < n; i++)
      for (long long c = 0; c < width; c++)
        CHECK(same_bits(dst[i * width + c], table[idx[i] * width + c]), "gather");
    auto src = normals(n * width), t = table;
    emu_launch(dml_scatter_add, G1, B1, t.data(), (const float*)src.data(), (const long long*)idx.data(), n, width, rows);
    auto want = table;
    for (long long i = 0; i < n; i++)
      for (long long c = 0; c < width; c++) want[idx[i] * width + c] += src[i * width + c];
    for (long long e = 0; e < rows * width; e++) CHECK(same_bits(t[e], want[e]), "scatter_add %lld", e);
    std::vector<long long> bad = {-1, 50};
    std::vector<float> d2(2 * width);
    emu_launch(dml_gather, G1, B1, d2.data(), (const float*)table.data(), (const long long*)bad.data(), 2LL, width, rows);
    for (auto v : d2) CHECK(std::isnan(v), "gather of a bad index is not NaN");
  }
}

// CPU argmax (kernels/cpu/loss.go)
static long long cpu_argmax(const float* row, long long cols, float* top) {
  long long best = 0;
  float t = row[0];
  for (long long j = 0; j < cols; j++)
    if (row[j] > t) best = j, t = row[j];
  *top = t;
  return best;
}

static bool close(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  return std::fabs(got - want) <= tol * (1 + std::fabs(want));
}

static void test_loss() {
  for (long long cols : {1LL, 2LL, 10LL, 300LL}) {
    const long long rows = 23;
    auto z = normals(rows * cols, 3);
    std::vector<float> labels(rows);
    std::uniform_int_distribution<long long> ld(0, cols - 1);
    for (auto& l : labels) l = (float)ld(rng);
    labels[1] = -1;
    labels[2] = (float)cols;
    labels[3] = 0.5f;
    labels[4] = NaN;
    z[5 * cols] = NaN;  // NaN at column 0
    if (cols > 2) {
      z[6 * cols + 2] = NaN;  // NaN later in the row
      z[7 * cols + 1] = z[7 * cols + 2] = 100.f;  // a tie
      labels[7] = 1;
      z[8 * cols + cols - 1] = 1e30f;  // huge logit
    }
    const float scale = 1.f / rows;
    std::vector<float> grad(rows * cols, 7.f), rl(rows), ro(rows);
    auto zz = z;  // in place: grad aliases logits
    emu_launch(dml_softmax_xent, dim3{5, 1, 1}, dim3{256, 1, 1}, zz.data(), (const float*)zz.data(),
               (const float*)labels.data(), rows, cols, scale, rl.data(), ro.data());
    for (long long i = 0; i < rows; i++) {
      const float* r = &z[i * cols];
      float zmax;
      long long best = cpu_argmax(r, cols, &zmax);
      float lf = labels[i];
      bool valid = lf >= 0 && (double)lf < (double)cols && lf == std::trunc(lf);
      long long l = valid ? (long long)lf : -1;
      double sum = 0;
      std::vector<float> e(cols);
      for (long long j = 0; j < cols; j++) sum += (e[j] = (float)std::exp((double)r[j] - (double)zmax));
      double loss = valid ? std::log(sum) + zmax - (double)r[l] : NAN;
      CHECK(close(rl[i], (float)loss, 1e-6), "softmax loss row %lld cols %lld: %g want %g", i, cols, rl[i], loss);
      CHECK(ro[i] == ((valid && best == l) ? 1.f : 0.f), "softmax ok row %lld cols %lld", i, cols);
      double inv = 1 / sum;
      for (long long j = 0; j < cols; j++) {
        double want = j == l ? (double)(float)(scale * ((double)e[j] * inv - 1)) : (double)(float)(scale * (double)e[j] * inv);
        CHECK(close(zz[i * cols + j], want, 1e-6), "softmax grad %lld,%lld cols %lld: %g want %g", i, j, cols, zz[i * cols + j], want);
      }
    }
    // predict on the same logits
    std::vector<float> out(rows, -5);
    emu_launch(dml_predict, dim3{4, 1, 1}, dim3{256, 1, 1}, out.data(), (const float*)z.data(), rows, cols);
    for (long long i = 0; i < rows; i++) {
      float top;
      float want = cols == 1 ? (z[i] > 0 ? 1.f : 0.f) : (float)cpu_argmax(&z[i * cols], cols, &top);
      CHECK(out[i] == want, "predict row %lld cols %lld: %g want %g", i, cols, out[i], want);
    }
    // stats
    std::vector<float> st(2);
    emu_launch(dml_stats, dim3{1, 1, 1}, dim3{256, 1, 1}, st.data(), (const float*)rl.data(), (const float*)ro.data(), rows);
    double a = 0, b = 0;
    for (long long i = 0; i < rows; i++) a += rl[i], b += ro[i];
    CHECK(close(st[0], a, 1e-6) && st[1] == (float)b, "stats %g %g want %g %g", st[0], st[1], a, b);
  }
  {  // stats over many rows, exact for counts
    long long rows = 3000;
    auto rl = normals(rows);
    std::vector<float> ro(rows);
    for (long long i = 0; i < rows; i++) ro[i] = i % 3 == 0;
    std::vector<float> st(2);
    emu_launch(dml_stats, dim3{1, 1, 1}, dim3{256, 1, 1}, st.data(), (const float*)rl.data(), (const float*)ro.data(), rows);
    double a = 0;
    for (auto v : rl) a += v;
    CHECK(close(st[0], a, 1e-5) && st[1] == 1000.f, "stats 3000: %g %g", st[0], st[1]);
  }
  // sigmoid
  {
    long long rows = 40;
    auto z = normals(rows, 4);
    std::vector<float> y(rows);
    for (long long i = 0; i < rows; i++) y[i] = (float)(i % 2);
    y[3] = 0.5f;
    z[4] = 80.f;
    z[5] = -80.f;
    z[6] = 0.f;
    float scale = 0.25f;
    std::vector<float> g(rows), rl(rows), ro(rows);
    emu_launch(dml_sigmoid_xent, G1, B1, g.data(), (const float*)z.data(), (const float*)y.data(), rows, scale, rl.data(), ro.data());
    for (long long i = 0; i < rows; i++) {
      double zz = z[i], yy = y[i];
      double e = std::exp(-std::fabs(zz));
      double loss = std::max(zz, 0.0) - yy * zz + std::log1p(e);
      double p = zz < 0 ? e / (1 + e) : 1 / (1 + e);
      bool valid = y[i] == 0 || y[i] == 1;
      CHECK(close(rl[i], valid ? (float)loss : NAN, 1e-6), "sigmoid loss %lld", i);
      CHECK(same_bits(g[i], (float)(scale * (p - yy))), "sigmoid grad %lld", i);
      CHECK(ro[i] == (((z[i] > 0) == (y[i] == 1)) ? 1.f : 0.f), "sigmoid ok %lld", i);
    }
  }
}

// sum_lanes is the sum rows lo, lo+step, … < hi of column j of x (row
// stride cols) over 8 lanes, as dml_sum_rows_partial and _final add them:
// lane l adds lo+l·step, lo+(l+8)·step, … in order; then the lanes in order.
static float sum_lanes(const float* x, long long lo, long long hi, long long cols, long long j) {
  float lanes[8] = {};
  for (long long i = lo; i < hi; i++) lanes[(i - lo) % 8] += x[i * cols + j];
  float s = lanes[0];
  for (int l = 1; l < 8; l++) s += lanes[l];
  return s;
}

static void test_reduce() {
  for (auto [rows, cols, rpb] : std::vector<std::tuple<long long, long long, long long>>{
           {1, 1, 64}, {7, 3, 64}, {100, 300, 64}, {100, 300, 100}, {33, 5, 64}, {700, 40, 64}, {2000, 33, 64}}) {
    auto x = normals(rows * cols);
    long long parts = (rows + rpb - 1) / rpb;
    std::vector<float> partial(parts * cols, NaN);
    const dim3 grid{(unsigned)((cols + 31) / 32), 1, 1};
    emu_launch(dml_sum_rows_partial, dim3{grid.x, (unsigned)parts, 1}, dim3{256, 1, 1}, partial.data(),
               (const float*)x.data(), rows, cols, rpb);
    for (long long p = 0; p < parts; p++)
      for (long long j = 0; j < cols; j++)
        CHECK(same_bits(partial[p * cols + j], sum_lanes(x.data(), p * rpb, std::min(rows, (p + 1) * rpb), cols, j)),
              "sum_rows_partial %lld×%lld part %lld col %lld: not the lanes' order", rows, cols, p, j);
    for (float beta : {0.f, 0.5f}) {
      std::vector<float> dst(cols, beta == 0 ? NaN : 3.f);
      emu_launch(dml_sum_rows_final, grid, dim3{256, 1, 1}, dst.data(), (const float*)partial.data(), parts, cols,
                 beta);
      for (long long j = 0; j < cols; j++) {
        double d = beta == 0 ? 0.0 : beta * 3.0;
        for (long long i = 0; i < rows; i++) d += x[i * cols + j];
        CHECK(close(dst[j], d, 1e-5), "sum_rows %lld×%lld col %lld: %g want %g", rows, cols, j, dst[j], d);
        const float want = (beta == 0 ? 0.f : beta * 3.f) + sum_lanes(partial.data(), 0, parts, cols, j);
        CHECK(same_bits(dst[j], want), "sum_rows_final %lld×%lld col %lld: not the lanes' order", rows, cols, j);
      }
    }
  }
  for (long long n : {0LL, 1LL, 1000LL, 5000LL}) {
    auto x = normals(n), y = normals(n);
    unsigned blocks = 7;
    std::vector<double> partial(blocks), out(1);
    emu_launch(dml_dot_partial, dim3{blocks, 1, 1}, dim3{256, 1, 1}, partial.data(), (const float*)x.data(), (const float*)y.data(), n);
    emu_launch(dml_dot_final, dim3{1, 1, 1}, dim3{256, 1, 1}, out.data(), (const double*)partial.data(), (long long)blocks);
    double want = 0;
    for (long long i = 0; i < n; i++) want += (double)x[i] * (double)y[i];
    CHECK(close(out[0], want, 1e-12), "dot n=%lld: %.17g want %.17g", n, out[0], want);
  }
  // LARS: dml_sumsq2_partial (chunks of 1024, optim.NormChunk),
  // dml_lars_rate and dml_lars against kernels/optim's SumSquares,
  // LARSStep.Rate and larsAt written the same way here, bit for bit; a
  // tensor of zero weights takes trust 1.
  for (long long n : {1LL, 7LL, 1024LL, 1025LL, 5000LL}) {
    for (bool zero : {false, true}) {
      const long long chunk = 1024, parts = (n + chunk - 1) / chunk;
      auto w = normals(n), g = normals(n, 0.1f), v = normals(n, 0.01f);
      if (zero) std::fill(w.begin(), w.end(), 0.f);
      const double lr = 0.1, eta = 0.001, wd64 = 0.001;
      const float mu = 0.9f, wd = 1e-3f;
      std::vector<double> partial(2 * parts);
      std::vector<float> rate(1), ww = w, vv = v;
      emu_launch(dml_sumsq2_partial, G1, B1, partial.data(), (const float*)w.data(), (const float*)g.data(), n, chunk);
      emu_launch(dml_lars_rate, dim3{1, 1, 1}, dim3{1, 1, 1}, rate.data(), (const double*)partial.data(), parts, lr, eta, wd64);
      emu_launch(dml_lars, G1, B1, ww.data(), (const float*)g.data(), vv.data(), n, (const float*)rate.data(), mu, wd);
      double sw = 0, sg = 0;
      for (long long lo = 0; lo < n; lo += chunk) {
        double cw = 0, cg = 0;
        for (long long i = lo; i < std::min(lo + chunk, n); i++) cw += (double)w[i] * w[i], cg += (double)g[i] * g[i];
        sw += cw, sg += cg;
      }
      double trust = 1;
      if (sw > 0 && sg > 0) trust = eta * std::sqrt(sw) / (std::sqrt(sg) + wd64 * std::sqrt(sw));
      const float r = (float)(lr * trust);
      CHECK(same_bits(rate[0], r), "lars rate n=%lld zero=%d: %.9g want %.9g", n, zero, rate[0], r);
      if (zero) CHECK(r == 0.1f, "lars zero weights: rate %.9g, want lr", r);
      for (long long i = 0; i < n; i++) {
        float gi = g[i] + wd * w[i];
        float vi = mu * v[i] + r * gi;
        float want = w[i] - vi;
        CHECK(same_bits(vv[i], vi) && same_bits(ww[i], want), "lars n=%lld %lld", n, i);
      }
    }
  }
  for (long long n : {0LL, 1LL, 1000LL}) {
    for (long long bad : {-1LL, 0LL, 500LL, 999LL}) {
      if (bad >= n) continue;
      auto x = normals(n);
      if (bad >= 0) x[bad] = bad % 2 ? INFINITY : NaN;
      if (bad >= 0 && bad + 3 < n) x[bad + 3] = -INFINITY;
      std::vector<long long> first = {n};
      emu_launch(dml_nonfinite, G1, B1, first.data(), (const float*)x.data(), n);
      CHECK(first[0] == (bad < 0 ? n : bad), "nonfinite n=%lld bad=%lld got %lld", n, bad, first[0]);
    }
  }
}

using GemmFn = void (*)(long long, long long, long long, float, const float*, long long, const float*, long long, float,
                        float*, long long);

static void check_gemm(const char* name, GemmFn fn, int bm, int bn, bool ta, bool tb, long long m, long long n,
                       long long k, float alpha, float beta, bool misalign, bool clampGrid, double tol,
                       int skinny = 0) {
  const long long off = misalign ? 1 : 0;
  std::vector<float> abuf(m * k + off + 1), bbuf(k * n + off + 1), cbuf(m * n + 1);
  auto an = normals(m * k), bnv = normals(k * n), cn = normals(m * n);
  std::copy(an.begin(), an.end(), abuf.begin() + off);
  std::copy(bnv.begin(), bnv.end(), bbuf.begin() + off);
  if (beta == 0) std::fill(cn.begin(), cn.end(), NaN);
  std::copy(cn.begin(), cn.end(), cbuf.begin());
  cbuf[m * n] = 12345.f;  // sentinel just past C
  const float* A = abuf.data() + off;
  const float* B = bbuf.data() + off;
  long long lda = ta ? m : k, ldb = tb ? k : n;
  unsigned gx = (unsigned)((n + bn - 1) / bn), gy = (unsigned)((m + bm - 1) / bm);
  if (skinny) {  // 1-D grid over the wide side's tiles of W (ptx.PickGemm's Grid)
    const long long wide = skinny == 'n' ? m : n;
    const bool contig = skinny == 'n' ? ta : !tb;
    const long long w = contig ? 8 : 1;
    gx = (unsigned)((wide + w - 1) / w), gy = 1;
    gx = std::min(gx, 3u);  // the emulator runs a thread per CUDA thread: a grid-stride loop does the rest
  }
  if (clampGrid) gx = std::min(gx, 2u), gy = 1;
  if (m > 0 && n > 0) emu_launch(fn, dim3{gx, gy, 1}, dim3{256, 1, 1}, m, n, k, alpha, A, lda, B, ldb, beta, cbuf.data(), n);
  for (long long i = 0; i < m; i++)
    for (long long j = 0; j < n; j++) {
      double s = 0, mag = 0;
      if (k > 0 && alpha != 0)
        for (long long p = 0; p < k; p++) {
          double a = ta ? A[p * lda + i] : A[i * lda + p];
          double b = tb ? B[j * ldb + p] : B[p * ldb + j];
          s += a * b;
          mag += std::fabs(a * b);
        }
      double want = alpha * s + (beta == 0 ? 0 : beta * (double)cn[i * n + j]);
      mag = std::fabs(alpha) * mag + (beta == 0 ? 0 : std::fabs(beta * cn[i * n + j]));
      double got = cbuf[i * n + j];
      if (!(std::fabs(got - want) <= tol * (mag + 1e-30) + 1e-30)) {
        CHECK(false, "%s %c%c m=%lld n=%lld k=%lld alpha=%g beta=%g mis=%d clamp=%d C[%lld,%lld]=%g want %g", name,
              ta ? 't' : 'n', tb ? 't' : 'n', m, n, k, alpha, beta, misalign, clampGrid, i, j, got, want);
        return;
      }
    }
  CHECK(cbuf[m * n] == 12345.f, "%s wrote past C", name);
}

static void test_gemm() {
  struct V {
    const char* name;
    GemmFn f[4];
    int bm, bn;
    double tol;
    int skinny;
  } vs[] = {
      {"sgemm", {dml_sgemm_nn, dml_sgemm_nt, dml_sgemm_tn, dml_sgemm_tt}, 128, 128, 1e-5},
      {"sgemm64", {dml_sgemm64_nn, dml_sgemm64_nt, dml_sgemm64_tn, dml_sgemm64_tt}, 128, 64, 1e-5},
      {"tf32", {dml_sgemm_tf32_nn, dml_sgemm_tf32_nt, dml_sgemm_tf32_tn, dml_sgemm_tf32_tt}, 128, 128, 2e-3},
      {"skinnyn", {dml_sgemm_skinnyn_nn, dml_sgemm_skinnyn_nt, dml_sgemm_skinnyn_tn, dml_sgemm_skinnyn_tt}, 0, 0, 1e-5, 'n'},
      {"skinnym", {dml_sgemm_skinnym_nn, dml_sgemm_skinnym_nt, dml_sgemm_skinnym_tn, dml_sgemm_skinnym_tt}, 0, 0, 1e-5, 'm'},
  };
  struct S {
    long long m, n, k;
  } shapes[] = {{1, 1, 1}, {1, 1, 0}, {5, 7, 3}, {4, 8, 16}, {64, 64, 64}, {129, 130, 17}, {200, 70, 33}, {3, 300, 9}, {130, 1, 20},
               {40, 10, 600}, {10, 40, 600}, {17, 16, 1000}, {16, 33, 257}};
  for (auto& v : vs)
    for (int tr = 0; tr < 4; tr++)
      for (auto& s : shapes) {
        bool ta = tr & 2, tb = tr & 1;
        check_gemm(v.name, v.f[tr], v.bm, v.bn, ta, tb, s.m, s.n, s.k, 1.f, 0.f, false, false, v.tol, v.skinny);
        check_gemm(v.name, v.f[tr], v.bm, v.bn, ta, tb, s.m, s.n, s.k, 0.5f, 2.f, true, false, v.tol, v.skinny);
        if (s.m * s.n > 5000 || s.k >= 600)
          check_gemm(v.name, v.f[tr], v.bm, v.bn, ta, tb, s.m, s.n, s.k, -1.f, 1.f, false, true, v.tol, v.skinny);
      }
  for (auto& v : vs) {  // alpha == 0 and beta == 0 over a NaN C gives zeros; k == 0 gives beta·C
    check_gemm(v.name, v.f[0], v.bm, v.bn, false, false, 9, 9, 5, 0.f, 0.f, false, false, 0, v.skinny);
    check_gemm(v.name, v.f[3], v.bm, v.bn, true, true, 9, 9, 0, 3.f, 0.5f, false, false, 0, v.skinny);
  }
}

// ---- conv.cu, against the CPU backend's loops (kernels/cpu/conv.go, norm.go)
struct ConvShape {
  long long n, c, h, w, k, stride, pad;
};

static void test_conv() {
  const ConvShape shapes[] = {{1, 1, 28, 28, 5, 1, 2}, {2, 6, 14, 14, 5, 1, 0}, {2, 3, 8, 8, 3, 1, 1}, {1, 4, 9, 7, 3, 2, 1},
                              {3, 2, 8, 8, 1, 2, 0},   {1, 2, 5, 6, 3, 3, 2},   {1, 1, 1, 1, 1, 1, 0}};
  for (auto s : shapes) {
    const long long oh = (s.h + 2 * s.pad - s.k) / s.stride + 1, ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
    const long long p = oh * ow, img = s.c * s.h * s.w, rows = s.c * s.k * s.k;
    auto x = normals(s.n * img);
    x[0] = -0.f;
    // im2col: the CPU's definition
    std::vector<float> want(s.n * rows * p), cols(want.size(), 7.f);
    for (long long n = 0; n < s.n; n++)
      for (long long ci = 0; ci < s.c; ci++)
        for (long long ki = 0; ki < s.k; ki++)
          for (long long kj = 0; kj < s.k; kj++)
            for (long long oy = 0; oy < oh; oy++)
              for (long long ox = 0; ox < ow; ox++) {
                long long iy = oy * s.stride + ki - s.pad, ix = ox * s.stride + kj - s.pad;
                want[((ci * s.k + ki) * s.k + kj) * s.n * p + n * p + oy * ow + ox] =
                    iy >= 0 && iy < s.h && ix >= 0 && ix < s.w ? x[((n * s.c + ci) * s.h + iy) * s.w + ix] : 0.f;
              }
    emu_launch(dml_im2col, G1, B1, cols.data(), (const float*)x.data(), s.n, s.c, s.h, s.w, s.k, s.stride, s.pad, oh, ow);
    for (size_t i = 0; i < want.size(); i++) CHECK(same_bits(cols[i], want[i]), "im2col %lld,%lld k%lld s%lld p%lld at %zu", s.c, s.h, s.k, s.stride, s.pad, i);
    // col2im: the CPU's scatter, rows in order
    auto g = normals(want.size());
    std::vector<float> wdx(s.n * img, 0.f), dx(s.n * img, 7.f);
    for (long long n = 0; n < s.n; n++)
      for (long long ci = 0; ci < s.c; ci++)
        for (long long ki = 0; ki < s.k; ki++)
          for (long long kj = 0; kj < s.k; kj++)
            for (long long oy = 0; oy < oh; oy++)
              for (long long ox = 0; ox < ow; ox++) {
                long long iy = oy * s.stride + ki - s.pad, ix = ox * s.stride + kj - s.pad;
                if (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w)
                  wdx[((n * s.c + ci) * s.h + iy) * s.w + ix] += g[((ci * s.k + ki) * s.k + kj) * s.n * p + n * p + oy * ow + ox];
              }
    emu_launch(dml_col2im, G1, B1, dx.data(), (const float*)g.data(), s.n, s.c, s.h, s.w, s.k, s.stride, s.pad, oh, ow);
    for (size_t i = 0; i < wdx.size(); i++) CHECK(same_bits(dx[i], wdx[i]), "col2im %lld,%lld k%lld s%lld p%lld at %zu: %g want %g", s.c, s.h, s.k, s.stride, s.pad, i, dx[i], wdx[i]);
  }
  for (auto [a, b, inner] : std::vector<std::tuple<long long, long long, long long>>{{1, 1, 1}, {16, 3, 64}, {5, 7, 1}, {2, 9, 33}}) {
    auto src = normals(a * b * inner);
    std::vector<float> dst(src.size(), 7.f);
    emu_launch(dml_transpose01, G1, B1, dst.data(), (const float*)src.data(), a, b, inner);
    for (long long i = 0; i < a; i++)
      for (long long j = 0; j < b; j++)
        for (long long q = 0; q < inner; q++)
          CHECK(same_bits(dst[(j * a + i) * inner + q], src[(i * b + j) * inner + q]), "transpose01 %lld×%lld×%lld", a, b, inner);
  }
}

// the CPU's argmaxWindow
static long long cpu_window_argmax(const float* x, long long w, long long y0, long long x0, long long k) {
  long long best = -1;
  float bv = -INFINITY;
  for (long long i = y0; i < y0 + k; i++)
    for (long long j = x0; j < x0 + k; j++) {
      float v = x[i * w + j];
      if ((best < 0 && !std::isnan(v)) || v > bv) best = i * w + j, bv = v;
    }
  return best < 0 ? y0 * w + x0 : best;
}

static void test_pool() {
  struct P {
    long long planes, h, w, k, stride;
  } shapes[] = {{6, 28, 28, 2, 2}, {3, 7, 7, 3, 2}, {2, 5, 5, 3, 1}, {4, 8, 8, 8, 1}, {1, 5, 4, 2, 3}, {2, 1, 1, 1, 1}};
  for (auto s : shapes) {
    const long long oh = (s.h - s.k) / s.stride + 1, ow = (s.w - s.k) / s.stride + 1;
    const long long in = s.planes * s.h * s.w, out = s.planes * oh * ow;
    auto x = normals(in);
    for (long long i = 0; i < in; i += 5) x[i] = std::round(x[i]);  // ties
    if (in > 8) x[3] = NaN, x[4] = NaN, x[s.w] = NaN, x[s.w + 1] = NaN, x[1] = NaN;
    auto dy = normals(out);
    std::vector<float> y(out, 7), wy(out), ay(out, 7), way(out), dx(in, 7), wdx(in, 0), adx(in, 7), wadx(in, 0);
    const float inv = 1.f / (float)(s.k * s.k);
    for (long long pl = 0; pl < s.planes; pl++)
      for (long long oy = 0; oy < oh; oy++)
        for (long long ox = 0; ox < ow; ox++) {
          const float* xp = &x[pl * s.h * s.w];
          long long o = (pl * oh + oy) * ow + ox, b = cpu_window_argmax(xp, s.w, oy * s.stride, ox * s.stride, s.k);
          wy[o] = xp[b];
          wdx[pl * s.h * s.w + b] += dy[o];
          float sum = 0;
          for (long long i = oy * s.stride; i < oy * s.stride + s.k; i++)
            for (long long j = ox * s.stride; j < ox * s.stride + s.k; j++) sum += xp[i * s.w + j];
          way[o] = sum * inv;
          float gi = dy[o] * inv;
          for (long long i = oy * s.stride; i < oy * s.stride + s.k; i++)
            for (long long j = ox * s.stride; j < ox * s.stride + s.k; j++) wadx[pl * s.h * s.w + i * s.w + j] += gi;
        }
    emu_launch(dml_maxpool, G1, B1, y.data(), (const float*)x.data(), s.planes, s.h, s.w, s.k, s.stride, oh, ow);
    emu_launch(dml_maxpool_grad, G1, B1, dx.data(), (const float*)dy.data(), (const float*)x.data(), s.planes, s.h, s.w, s.k, s.stride, oh, ow);
    emu_launch(dml_avgpool, G1, B1, ay.data(), (const float*)x.data(), s.planes, s.h, s.w, s.k, s.stride, oh, ow);
    emu_launch(dml_avgpool_grad, G1, B1, adx.data(), (const float*)dy.data(), s.planes, s.h, s.w, s.k, s.stride, oh, ow);
    auto same = [](float a, float b) { return same_bits(a, b) || (std::isnan(a) && std::isnan(b)); };
    for (long long i = 0; i < out; i++) {
      CHECK(same(y[i], wy[i]), "maxpool k%lld s%lld at %lld: %g want %g", s.k, s.stride, i, y[i], wy[i]);
      CHECK(same(ay[i], way[i]), "avgpool k%lld s%lld at %lld: %g want %g", s.k, s.stride, i, ay[i], way[i]);
    }
    if (s.stride >= s.k) {  // disjoint windows: zeroed, then one thread per window; the gather's bits
      std::vector<float> ddx(in, 0.f);
      auto dy0 = dy;
      dy0[0] = -0.f;  // 0 + (−0) is +0, as the gather's sum
      std::vector<float> gdx(in, 7.f);
      emu_launch(dml_maxpool_grad, G1, B1, gdx.data(), (const float*)dy0.data(), (const float*)x.data(), s.planes, s.h, s.w, s.k, s.stride, oh, ow);
      emu_launch(dml_maxpool_grad_disjoint, G1, B1, ddx.data(), (const float*)dy0.data(), (const float*)x.data(), s.planes, s.h, s.w, s.k, s.stride, oh, ow);
      for (long long i = 0; i < in; i++)
        CHECK(same_bits(ddx[i], gdx[i]), "maxpool_grad_disjoint k%lld s%lld at %lld: %g want %g", s.k, s.stride, i, ddx[i], gdx[i]);
    }
    for (long long i = 0; i < in; i++) {
      CHECK(same_bits(dx[i], wdx[i]), "maxpool_grad k%lld s%lld at %lld: %g want %g", s.k, s.stride, i, dx[i], wdx[i]);
      CHECK(same_bits(adx[i], wadx[i]), "avgpool_grad k%lld s%lld at %lld: %g want %g", s.k, s.stride, i, adx[i], wadx[i]);
    }
  }
}

// batch norm against the CPU's float64 formulas (a sequential sum: the
// kernels' tree order may differ in the last bits of a float64).
static void test_batchnorm() {
  struct S {
    long long n, c, hw;
  } shapes[] = {{1, 1, 1}, {2, 3, 5}, {4, 16, 64}, {3, 7, 1}, {1, 2, 300}, {5, 3, 1000}};
  const float eps = 1e-5f, mom = 0.1f;
  for (auto s : shapes) {
    const long long all = s.n * s.c * s.hw, cnt = s.n * s.hw;
    auto x = normals(all, 2), dy = normals(all), g = normals(s.c), b = normals(s.c), rm = normals(s.c);
    for (long long i = 0; i < all; i++) x[i] += (float)((i / s.hw) % s.c);
    std::vector<float> rv(s.c, 1.5f), y(all, 7), mean(s.c), inv(s.c), rm2 = rm, rv2 = rv, yi(all, 7), dx(all, 7), dg(s.c), db(s.c);
    // Slices per channel: 1 to 4 by the shape (some empty where n·hw is smaller).
    const long long splits = 1 + (s.n + s.hw) % 4;
    std::vector<double> ss(2 * s.c), sums(2 * s.c), part(2 * s.c * splits, 7), gpart(2 * s.c * splits, 7);
    emu_launch(dml_bn_partial, dim3{3, 1, 1}, dim3{256, 1, 1}, part.data(), (const float*)x.data(), s.n, s.c, s.hw, splits);
    emu_launch(dml_bn_finish, G1, B1, ss.data(), mean.data(), inv.data(), rm2.data(), rv2.data(), (const double*)part.data(),
               (const float*)g.data(), (const float*)b.data(), s.n, s.c, s.hw, splits, eps, mom);
    emu_launch(dml_bn_apply, G1, B1, y.data(), (const float*)x.data(), (const double*)ss.data(), s.n, s.c, s.hw);
    emu_launch(dml_bn_grad_partial, dim3{3, 1, 1}, dim3{256, 1, 1}, gpart.data(), (const float*)dy.data(), (const float*)x.data(),
               (const float*)mean.data(), (const float*)inv.data(), s.n, s.c, s.hw, splits);
    emu_launch(dml_bn_grad_finish, G1, B1, sums.data(), dg.data(), db.data(), (const double*)gpart.data(), s.c, splits);
    auto dyy = dy;  // in place: dx aliases dy
    emu_launch(dml_bn_grad_apply, G1, B1, dyy.data(), (const float*)dyy.data(), (const float*)x.data(), (const float*)mean.data(),
               (const float*)inv.data(), (const float*)g.data(), (const double*)sums.data(), s.n, s.c, s.hw);
    std::vector<double> cs(2 * s.c);
    emu_launch(dml_bn_coef, G1, B1, cs.data(), (const float*)rm.data(), (const float*)rv.data(), (const float*)g.data(), (const float*)b.data(), s.c, eps);
    emu_launch(dml_bn_apply, G1, B1, yi.data(), (const float*)x.data(), (const double*)cs.data(), s.n, s.c, s.hw);
    auto at = [&](long long e, long long ch) { return ((e / s.hw) * s.c + ch) * s.hw + e % s.hw; };
    for (long long ch = 0; ch < s.c; ch++) {
      double sum = 0, sq = 0;
      for (long long e = 0; e < cnt; e++) sum += x[at(e, ch)];
      double mu = sum / cnt;
      for (long long e = 0; e < cnt; e++) sq += (x[at(e, ch)] - mu) * (x[at(e, ch)] - mu);
      double v = sq / cnt, iv = 1 / std::sqrt(v + eps), unb = cnt > 1 ? sq / (cnt - 1) : v;
      CHECK(close(mean[ch], mu, 1e-6) && close(inv[ch], iv, 1e-6), "bn stats ch %lld", ch);
      CHECK(close(rm2[ch], (1 - mom) * rm[ch] + mom * mu, 1e-6) && close(rv2[ch], (1 - mom) * rv[ch] + mom * unb, 1e-6), "bn running ch %lld", ch);
      double sdy = 0, sdyx = 0, infInv = 1 / std::sqrt((double)rv[ch] + eps);
      for (long long e = 0; e < cnt; e++) {
        double xh = (x[at(e, ch)] - mu) * iv;
        CHECK(close(y[at(e, ch)], g[ch] * xh + b[ch], 1e-5), "bn apply ch %lld e %lld: %g want %g", ch, e, y[at(e, ch)], g[ch] * xh + b[ch]);
        double wi = g[ch] * (x[at(e, ch)] - rm[ch]) * infInv + b[ch];
        CHECK(close(yi[at(e, ch)], wi, 1e-5), "bn infer ch %lld e %lld", ch, e);
        sdy += dy[at(e, ch)];
        sdyx += dy[at(e, ch)] * xh;
      }
      CHECK(close(db[ch], sdy, 1e-5) && close(dg[ch], sdyx, 1e-5), "bn dgamma/dbeta ch %lld", ch);
      for (long long e = 0; e < cnt; e++) {
        double xh = (x[at(e, ch)] - mu) * iv;
        double want = g[ch] * iv * (dy[at(e, ch)] - sdy / cnt - xh * sdyx / cnt);
        double bound = std::fabs(g[ch] * iv) * (std::fabs(dy[at(e, ch)]) + std::fabs(sdy) / cnt + std::fabs(xh * sdyx) / cnt);
        CHECK(std::fabs(dyy[at(e, ch)] - want) <= 1e-5 * (bound + 1e-30), "bn grad ch %lld e %lld: %g want %g", ch, e, dyy[at(e, ch)], want);
      }
    }
  }
}

// test_transformer: GELU (both forms, in place too) and layer norm with
// its gradient, against double formulas; one row far from 0 (mean 1e4).
static void test_transformer() {
  auto x = normals(500, 3);
  for (float v : {0.f, 10.f, -10.f, 40.f, -40.f, 1e4f, -1e4f}) x.push_back(v);
  const long long n = x.size();
  auto dy = normals(n);
  for (long long tf = 0; tf < 2; tf++) {
    std::vector<float> y(n, 7), dx(n, 7), yi = x, dyi = dy;
    emu_launch(dml_gelu, G1, B1, y.data(), (const float*)x.data(), n, tf);
    emu_launch(dml_gelu_grad, G1, B1, dx.data(), (const float*)dy.data(), (const float*)x.data(), n, tf);
    emu_launch(dml_gelu, G1, B1, yi.data(), (const float*)yi.data(), n, tf);
    emu_launch(dml_gelu_grad, G1, B1, dyi.data(), (const float*)dyi.data(), (const float*)x.data(), n, tf);
    for (long long i = 0; i < n; i++) {
      double v = x[i], want, dwant;
      if (tf) {
        double c = std::sqrt(2 / M_PI), t = std::tanh(c * (v + 0.044715 * v * v * v));
        want = 0.5 * v * (1 + t);
        dwant = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v);
      } else {
        want = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
        dwant = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-v * v / 2) / std::sqrt(2 * M_PI);
      }
      dwant *= dy[i];
      CHECK(close(y[i], want, 1e-6) && same_bits(yi[i], y[i]), "gelu %lld form %lld x %g: %g want %g", i, tf, v, y[i], want);
      CHECK(close(dx[i], dwant, 1e-6) && same_bits(dyi[i], dx[i]), "gelu grad %lld form %lld x %g: %g want %g", i, tf, v, dx[i], dwant);
    }
  }
  struct S {
    long long rows, cols;
  } shapes[] = {{1, 1}, {1, 7}, {5, 3}, {4, 300}, {6, 128}, {37, 48}};
  const float eps = 1e-5f;
  for (auto s : shapes) {
    const long long all = s.rows * s.cols;
    auto x = normals(all, 2), dy = normals(all), g = normals(s.cols), b = normals(s.cols);
    for (long long i = 0; i < all; i++) x[i] += (float)(i / s.cols);
    if (s.rows > 1)
      for (long long j = 0; j < s.cols; j++) x[s.cols + j] = 1e4f + (float)(j % 3) - 1;
    std::vector<float> y(all, 7), mean(s.rows, 7), inv(s.rows, 7), dg(s.cols, 7), db(s.cols, 7), dxx = dy;
    emu_launch(dml_layer_norm, dim3{2, 1, 1}, dim3{256, 1, 1}, y.data(), mean.data(), inv.data(), (const float*)x.data(),
               (const float*)g.data(), (const float*)b.data(), s.rows, s.cols, eps);
    // the order the kernel claims: 32 lanes, lane l adding columns l, l+32,
    // …, then the lanes in order (the same bits)
    for (long long r = 0; r < s.rows; r++) {
      const float* xs = x.data() + r * s.cols;
      double ls[32] = {}, lq[32] = {};
      for (long long j = 0; j < s.cols; j++) ls[j % 32] += (double)xs[j];
      double sum = ls[0];
      for (int l = 1; l < 32; l++) sum += ls[l];
      const double mu = sum / (double)s.cols;
      for (long long j = 0; j < s.cols; j++) lq[j % 32] += ((double)xs[j] - mu) * ((double)xs[j] - mu);
      double q = lq[0];
      for (int l = 1; l < 32; l++) q += lq[l];
      const double iv = 1.0 / std::sqrt(q / (double)s.cols + (double)eps);
      CHECK(same_bits(mean[r], (float)mu) && same_bits(inv[r], (float)iv), "layer norm row %lld stats: not the lanes' order", r);
      for (long long j = 0; j < s.cols; j++)
        CHECK(same_bits(y[r * s.cols + j], (float)(((double)xs[j] - mu) * iv * (double)g[j] + (double)b[j])),
              "layer norm row %lld col %lld: not the lanes' order", r, j);
    }
    // the column sums over 1, 2 and 3 slices of the rows (3 slices on a grid
    // of 2 in y: the grid-stride loop), the same within float64's rounding
    std::vector<std::vector<float>> sums;
    for (long long slices : {1LL, 2LL, 3LL}) {
      std::vector<double> part(2 * slices * s.cols, 9);
      const unsigned cx = (unsigned)((s.cols + 31) / 32);
      emu_launch(dml_layer_norm_grad_cols_partial, dim3{cx, 2, 1}, dim3{256, 1, 1}, part.data(), (const float*)dy.data(), (const float*)x.data(),
                 (const float*)mean.data(), (const float*)inv.data(), s.rows, s.cols, slices);
      emu_launch(dml_layer_norm_grad_cols_finish, dim3{cx, 1, 1}, dim3{256, 1, 1}, dg.data(), db.data(),
                 (const double*)part.data(), s.cols, slices);
      sums.push_back(dg);
      sums.push_back(db);
    }
    for (size_t k = 2; k < sums.size(); k++)
      for (long long j = 0; j < s.cols; j++)
        CHECK(close(sums[k][j], sums[k % 2][j], 1e-6), "layer norm column sums, slicing %zu col %lld: %g want %g", k / 2 + 1, j, sums[k][j], sums[k % 2][j]);
    // in place: dx aliases dy, after the column sums have read dy
    emu_launch(dml_layer_norm_grad_rows, dim3{2, 1, 1}, dim3{256, 1, 1}, dxx.data(), (const float*)dxx.data(), (const float*)x.data(),
               (const float*)mean.data(), (const float*)inv.data(), (const float*)g.data(), s.rows, s.cols);
    std::vector<double> sg(s.cols), sb(s.cols);
    for (long long r = 0; r < s.rows; r++) {
      double mu = 0, v = 0;
      for (long long j = 0; j < s.cols; j++) mu += x[r * s.cols + j];
      mu /= s.cols;
      for (long long j = 0; j < s.cols; j++) v += (x[r * s.cols + j] - mu) * (x[r * s.cols + j] - mu);
      double iv = 1 / std::sqrt(v / s.cols + eps), mg = 0, mgx = 0;
      CHECK(close(mean[r], mu, 1e-7) && close(inv[r], iv, 1e-6), "layer norm stats row %lld: %g %g want %g %g", r, mean[r], inv[r], mu, iv);
      for (long long j = 0; j < s.cols; j++) {
        long long p = r * s.cols + j;
        double xh = (x[p] - mu) * iv;
        CHECK(close(y[p], g[j] * xh + b[j], 1e-5), "layer norm row %lld col %lld: %g want %g", r, j, y[p], g[j] * xh + b[j]);
        sg[j] += dy[p] * xh;
        sb[j] += dy[p];
        mg += g[j] * dy[p];
        mgx += g[j] * dy[p] * xh;
      }
      mg /= s.cols;
      mgx /= s.cols;
      for (long long j = 0; j < s.cols; j++) {
        long long p = r * s.cols + j;
        double xh = (x[p] - mu) * iv, want = iv * (g[j] * dy[p] - mg - xh * mgx);
        double bound = iv * (std::fabs(g[j] * dy[p]) + std::fabs(mg) + std::fabs(xh * mgx)) + 1e-30;
        CHECK(std::fabs(dxx[p] - want) <= 1e-5 * bound, "layer norm grad row %lld col %lld: %g want %g", r, j, dxx[p], want);
      }
    }
    for (long long j = 0; j < s.cols; j++)
      CHECK(close(dg[j], sg[j], 1e-5 * s.rows) && close(db[j], sb[j], 1e-5 * s.rows), "layer norm dgamma/dbeta col %lld", j);
  }
}

// ref_dropout_bits: MurmurHash3's fmix32, as kernels.DropoutBits uses it.
static uint32_t ref_fmix(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

static void test_dropout() {
  const long long rows = 7, cols = 300;
  auto x = normals(rows * cols);
  std::vector<float> keys(rows);
  for (auto& k : keys) {
    uint32_t b = (uint32_t)rng();
    std::memcpy(&k, &b, 4);
  }
  for (float p : {0.f, 0.1f, 0.5f, 0.9f}) {
    const uint32_t th = (uint32_t)std::min(std::floor(std::ldexp((double)p, 32)), 4294967295.0);
    const float scale = (float)(1 / (1 - (double)p));
    std::vector<float> y(x.size(), 7), yi = x;
    emu_launch(dml_dropout, G1, B1, y.data(), (const float*)x.data(), (const float*)keys.data(), rows, cols, 5u, th, scale);
    emu_launch(dml_dropout, G1, B1, yi.data(), (const float*)yi.data(), (const float*)keys.data(), rows, cols, 5u, th, scale);
    long long dropped = 0;
    for (long long r = 0; r < rows; r++) {
      uint32_t key;
      std::memcpy(&key, &keys[r], 4);
      for (long long j = 0; j < cols; j++) {
        bool keep = ref_fmix(key ^ ref_fmix((uint32_t)j * 0x9e3779b9u + 5u)) >= th;
        float want = keep ? x[r * cols + j] * scale : 0.f;
        dropped += !keep;
        CHECK(same_bits(y[r * cols + j], want) && same_bits(yi[r * cols + j], want), "dropout p %g row %lld col %lld: %g want %g", p, r, j, y[r * cols + j], want);
      }
    }
    const double n = rows * cols, sd = std::sqrt(n * p * (1 - p));
    CHECK(std::fabs(dropped - p * n) <= 5 * sd + 0.5, "dropout p %g drops %lld of %g", p, dropped, n);
  }
}

// test_maxpool_pad: padded max pooling (−∞ padding) and its gradient
// against a double reference, on mostly negative inputs.
static void test_maxpool_pad() {
  struct S {
    long long planes, h, w, k, stride, pad;
  } shapes[] = {{2, 8, 8, 3, 2, 1}, {3, 7, 5, 3, 2, 1}, {1, 6, 6, 2, 2, 1}, {2, 5, 5, 5, 1, 2}};
  for (auto s : shapes) {
    const long long oh = (s.h + 2 * s.pad - s.k) / s.stride + 1, ow = (s.w + 2 * s.pad - s.k) / s.stride + 1;
    auto x = normals(s.planes * s.h * s.w);
    for (auto& v : x) v -= 3;
    auto dy = normals(s.planes * oh * ow);
    std::vector<float> y(dy.size(), 7), dx(x.size(), 7);
    emu_launch(dml_maxpool_pad, G1, B1, y.data(), (const float*)x.data(), s.planes, s.h, s.w, s.k, s.stride, s.pad, oh, ow);
    emu_launch(dml_maxpool_pad_grad, G1, B1, dx.data(), (const float*)dy.data(), (const float*)x.data(), s.planes, s.h, s.w, s.k, s.stride,
               s.pad, oh, ow);
    std::vector<double> want(x.size(), 0);
    for (long long p = 0; p < s.planes; p++)
      for (long long oy = 0; oy < oh; oy++)
        for (long long ox = 0; ox < ow; ox++) {
          long long best = -1;
          double bv = -INFINITY;
          for (long long i = oy * s.stride - s.pad; i < oy * s.stride - s.pad + s.k; i++)
            for (long long j = ox * s.stride - s.pad; j < ox * s.stride - s.pad + s.k; j++)
              if (i >= 0 && j >= 0 && i < s.h && j < s.w && x[(p * s.h + i) * s.w + j] > bv) {
                best = (p * s.h + i) * s.w + j;
                bv = x[best];
              }
          const long long o = (p * oh + oy) * ow + ox;
          CHECK(same_bits(y[o], x[best]), "maxpool pad plane %lld (%lld,%lld): %g want %g", p, oy, ox, y[o], x[best]);
          want[best] += dy[o];
        }
    for (size_t i = 0; i < x.size(); i++) CHECK(close(dx[i], want[i], 1e-6), "maxpool pad grad %zu: %g want %g", i, dx[i], want[i]);
  }
}

// test_lrn: local response normalisation and its gradient against double
// formulas from PyTorch's definition.
static void test_lrn() {
  struct S {
    long long n, c, hw, size;
    float alpha, beta, k;
  } shapes[] = {{2, 7, 5, 5, 1e-4f, 0.75f, 2}, {3, 6, 4, 4, 0.3f, 0.5f, 1}, {1, 3, 9, 5, 1, 0.75f, 1}};
  for (auto s : shapes) {
    const long long all = s.n * s.c * s.hw;
    auto x = normals(all, 3), dy = normals(all);
    std::vector<float> y(all, 7), sc(all, 7), dx(all, 7);
    emu_launch(dml_lrn, G1, B1, y.data(), sc.data(), (const float*)x.data(), s.n, s.c, s.hw, s.size, s.alpha, s.beta, s.k);
    emu_launch(dml_lrn_grad, G1, B1, dx.data(), (const float*)dy.data(), (const float*)x.data(), (const float*)sc.data(), s.n, s.c, s.hw,
               s.size, s.alpha, s.beta, s.k);
    auto at = [&](long long i, long long ch, long long p) { return (i * s.c + ch) * s.hw + p; };
    const double a = (double)s.alpha / s.size, b = s.beta;
    std::vector<double> ws(all);
    for (long long i = 0; i < s.n; i++)
      for (long long p = 0; p < s.hw; p++)
        for (long long ch = 0; ch < s.c; ch++) {
          double sum = 0;
          for (long long q = ch - s.size / 2; q <= ch + (s.size - 1) / 2; q++)
            if (q >= 0 && q < s.c) sum += (double)x[at(i, q, p)] * x[at(i, q, p)];
          ws[at(i, ch, p)] = s.k + a * sum;
          double wy = x[at(i, ch, p)] * std::pow(ws[at(i, ch, p)], -b);
          CHECK(close(sc[at(i, ch, p)], ws[at(i, ch, p)], 1e-6) && close(y[at(i, ch, p)], wy, 1e-6), "lrn %lld %lld %lld: %g want %g", i, ch, p,
                y[at(i, ch, p)], wy);
        }
    for (long long i = 0; i < s.n; i++)
      for (long long p = 0; p < s.hw; p++)
        for (long long j = 0; j < s.c; j++) {
          double sum = 0;
          for (long long ch = 0; ch < s.c; ch++)
            if (j >= ch - s.size / 2 && j <= ch + (s.size - 1) / 2) sum += (double)dy[at(i, ch, p)] * x[at(i, ch, p)] * std::pow(ws[at(i, ch, p)], -b - 1);
          double want = dy[at(i, j, p)] * std::pow(ws[at(i, j, p)], -b) - 2 * a * b * x[at(i, j, p)] * sum;
          CHECK(close(dx[at(i, j, p)], want, 1e-5), "lrn grad %lld %lld %lld: %g want %g", i, j, p, dx[at(i, j, p)], want);
        }
  }
}

// test_syncbn: SyncBatchNorm's kernels on one batch (count = n·hw): the
// sums, the normalisation from them, the gradient sums and input gradient
// against double formulas.
static void test_syncbn() {
  struct S {
    long long n, c, hw;
  } shapes[] = {{2, 3, 5}, {4, 16, 64}, {3, 2, 1}};
  const float eps = 1e-5f, mom = 0.1f;
  for (auto s : shapes) {
    const long long all = s.n * s.c * s.hw, cnt = s.n * s.hw, splits = 2;
    auto x = normals(all, 2), dy = normals(all), g = normals(s.c), b = normals(s.c);
    std::vector<double> part(2 * s.c * splits), ss(2 * s.c);
    std::vector<float> sums(2 * s.c, 7), gs(2 * s.c, 7), y(all, 7), mean(s.c), inv(s.c), rm(s.c, 0), rv(s.c, 1), dx(all, 7);
    emu_launch(dml_bn_partial, dim3{3, 1, 1}, dim3{256, 1, 1}, part.data(), (const float*)x.data(), s.n, s.c, s.hw, splits);
    emu_launch(dml_bn_sums_finish, G1, B1, sums.data(), (const double*)part.data(), s.c, splits);
    emu_launch(dml_bn_finish_sums, G1, B1, ss.data(), mean.data(), inv.data(), rm.data(), rv.data(), (const float*)sums.data(), (const float*)g.data(),
               (const float*)b.data(), cnt, s.c, eps, mom);
    emu_launch(dml_bn_apply, G1, B1, y.data(), (const float*)x.data(), (const double*)ss.data(), s.n, s.c, s.hw);
    emu_launch(dml_bn_grad_partial, dim3{3, 1, 1}, dim3{256, 1, 1}, part.data(), (const float*)dy.data(), (const float*)x.data(),
               (const float*)mean.data(), (const float*)inv.data(), s.n, s.c, s.hw, splits);
    emu_launch(dml_bn_sums_finish, G1, B1, gs.data(), (const double*)part.data(), s.c, splits);
    emu_launch(dml_bn_grad_input, G1, B1, dx.data(), (const float*)dy.data(), (const float*)x.data(), (const float*)mean.data(),
               (const float*)inv.data(), (const float*)g.data(), (const float*)gs.data(), cnt, s.n, s.c, s.hw);
    auto at = [&](long long e, long long ch) { return ((e / s.hw) * s.c + ch) * s.hw + e % s.hw; };
    for (long long ch = 0; ch < s.c; ch++) {
      double sx = 0, sq = 0;
      for (long long e = 0; e < cnt; e++) sx += x[at(e, ch)], sq += (double)x[at(e, ch)] * x[at(e, ch)];
      CHECK(close(sums[ch], sx, 1e-6) && close(sums[s.c + ch], sq, 1e-6), "syncbn sums ch %lld", ch);
      double mu = sx / cnt, v = 0;
      for (long long e = 0; e < cnt; e++) v += (x[at(e, ch)] - mu) * (x[at(e, ch)] - mu);
      v /= cnt;
      double iv = 1 / std::sqrt(v + eps), sdy = 0, sdyx = 0;
      CHECK(close(mean[ch], mu, 1e-5) && close(inv[ch], iv, 1e-4), "syncbn stats ch %lld", ch);
      for (long long e = 0; e < cnt; e++) {
        double xh = (x[at(e, ch)] - mu) * iv;
        CHECK(close(y[at(e, ch)], g[ch] * xh + b[ch], 1e-4), "syncbn y ch %lld e %lld: %g want %g", ch, e, y[at(e, ch)], g[ch] * xh + b[ch]);
        sdy += dy[at(e, ch)];
        sdyx += dy[at(e, ch)] * xh;
      }
      CHECK(close(gs[ch], sdy, 1e-4) && close(gs[s.c + ch], sdyx, 1e-4), "syncbn grad sums ch %lld", ch);
      for (long long e = 0; e < cnt; e++) {
        double xh = (x[at(e, ch)] - mu) * iv;
        double want = g[ch] * iv * (dy[at(e, ch)] - sdy / cnt - xh * sdyx / cnt);
        double bound = std::fabs(g[ch] * iv) * (std::fabs(dy[at(e, ch)]) + std::fabs(sdy) / cnt + std::fabs(xh * sdyx) / cnt);
        CHECK(std::fabs(dx[at(e, ch)] - want) <= 1e-4 * (bound + 1e-30), "syncbn dx ch %lld e %lld: %g want %g", ch, e, dx[at(e, ch)], want);
      }
    }
  }
}

// embedding_grad runs the embedding gradient's four kernels as
// cuda/sequence.go does: counts zeroed, count, offsets, place, then the
// sums.
static void embedding_grad(std::vector<float>& dt, const std::vector<float>& ids, const std::vector<float>& dy,
                           long long vocab, long long cols) {
  const long long n = ids.size(), blocks = (n + 255) / 256;
  std::vector<int> counts(std::max(1LL, blocks * vocab), 0), rank(std::max(1LL, n), -7), order(std::max(1LL, n), -7),
      start(vocab + 1, -7);
  if (blocks > 0)
    emu_launch(dml_embedding_count, dim3{(unsigned)blocks, 1, 1}, dim3{256, 1, 1}, counts.data(), rank.data(),
               ids.data(), n, vocab);
  emu_launch(dml_embedding_offsets, dim3{1, 1, 1}, dim3{256, 1, 1}, counts.data(), start.data(), blocks, vocab);
  emu_launch(dml_embedding_place, G1, B1, order.data(), (const int*)counts.data(), (const int*)rank.data(), ids.data(),
             n, vocab);
  emu_launch(dml_embedding_grad, G1, B1, dt.data(), (const int*)order.data(), (const int*)start.data(), dy.data(),
             vocab, cols);
}

// test_sequence: embeddings (rows copied, a repeated id summed in order
// as the CPU adds them, bit for bit; an id outside the table gives zeros)
// and causal attention with its three gradient kernels, against double
// loops, at scores of about 1e4 too (the softmax subtracts its maximum).
static void test_sequence() {
  const long long vocab = 7, cols = 5;
  auto table = normals(vocab * cols);
  std::vector<float> ids = {3, 0, 6, 3, 3, 1, 7, 2.5f};
  const long long n = ids.size();
  std::vector<float> y(n * cols, 9);
  emu_launch(dml_embedding, G1, B1, y.data(), (const float*)ids.data(), (const float*)table.data(), n, vocab, cols);
  auto dy = normals(n * cols);
  auto dt = normals(vocab * cols);
  std::vector<float> want = dt;
  for (long long r = 0; r < n; r++) {
    long long id = (long long)ids[r];
    bool ok = ids[r] >= 0 && ids[r] < vocab && (float)id == ids[r];
    for (long long j = 0; j < cols; j++) {
      CHECK(same_bits(y[r * cols + j], ok ? table[id * cols + j] : 0.f), "embedding row %lld col %lld", r, j);
      if (ok) want[id * cols + j] += dy[r * cols + j];
    }
  }
  embedding_grad(dt, ids, dy, vocab, cols);
  for (long long i = 0; i < vocab * cols; i++) CHECK(same_bits(dt[i], want[i]), "embedding grad %lld: %g want %g", i, dt[i], want[i]);
  // Over several blocks of 256 rows, many rows a token, ids outside the
  // table among them, and a table wider than a block of tokens.
  for (auto [rows, vocab2] : std::vector<std::pair<long long, long long>>{{600, 3}, {1000, 300}, {257, 1}, {0, 4}}) {
    std::mt19937 rng(rows);
    std::vector<float> ids2(rows);
    for (auto& f : ids2) f = rng() % 11 == 0 ? -1.f : (float)(rng() % vocab2);
    const long long c2 = 3;
    auto dy2 = normals(rows * c2), dt2 = normals(vocab2 * c2);
    std::vector<float> want2 = dt2;
    for (long long r = 0; r < rows; r++)
      if (ids2[r] >= 0)
        for (long long j = 0; j < c2; j++) want2[(long long)ids2[r] * c2 + j] += dy2[r * c2 + j];
    embedding_grad(dt2, ids2, dy2, vocab2, c2);
    for (long long i = 0; i < vocab2 * c2; i++)
      CHECK(same_bits(dt2[i], want2[i]), "embedding grad %lld rows, vocab %lld, %lld: %g want %g", rows, vocab2, i, dt2[i], want2[i]);
  }

  struct S {
    long long batch, seq, heads, width;
    double sigma;
  } shapes[] = {{1, 1, 1, 2, 1}, {2, 3, 1, 4, 1}, {2, 5, 3, 9, 1}, {3, 17, 4, 32, 1}, {1, 9, 2, 16, 300}, {1, 70, 1, 4, 1}};
  for (auto s : shapes) {
    const long long d = s.width / s.heads, ld = 3 * s.width;
    auto qkv = normals(s.batch * s.seq * ld, s.sigma);
    auto g = normals(s.batch * s.seq * s.width);
    std::vector<float> y(s.batch * s.seq * s.width, 7), p(s.batch * s.heads * s.seq * s.seq, 7), dq(qkv.size(), 7);
    emu_launch(dml_attention, G1, B1, y.data(), p.data(), (const float*)qkv.data(), s.batch, s.seq, s.heads, s.width);
    for (auto k : {dml_attention_grad_dot, dml_attention_grad_kv, dml_attention_grad_q})
      emu_launch(k, G1, B1, dq.data(), (const float*)g.data(), (const float*)qkv.data(), (const float*)p.data(), s.batch, s.seq,
                 s.heads, s.width);
    std::vector<double> rp(p.size()), ry(y.size()), rd(qkv.size());
    const double sc = 1 / std::sqrt((double)d);
    auto at = [&](long long b, long long t, long long part, long long h, long long e) { return (b * s.seq + t) * ld + part * s.width + h * d + e; };
    double scale = 0;
    for (float v : qkv) scale = std::max(scale, (double)std::fabs(v));
    for (long long b = 0; b < s.batch; b++)
      for (long long h = 0; h < s.heads; h++)
        for (long long i = 0; i < s.seq; i++) {
          double* pr = &rp[((b * s.heads + h) * s.seq + i) * s.seq];
          std::vector<double> sv(i + 1);
          double top = -INFINITY, sum = 0, dot = 0;
          for (long long j = 0; j <= i; j++) {
            for (long long e = 0; e < d; e++) sv[j] += (double)qkv[at(b, i, 0, h, e)] * qkv[at(b, j, 1, h, e)];
            sv[j] *= sc;
            top = std::max(top, sv[j]);
          }
          for (long long j = 0; j <= i; j++) sum += std::exp(sv[j] - top);
          std::vector<double> dp(i + 1);
          for (long long j = 0; j <= i; j++) {
            pr[j] = std::exp(sv[j] - top) / sum;
            for (long long e = 0; e < d; e++) {
              ry[(b * s.seq + i) * s.width + h * d + e] += pr[j] * qkv[at(b, j, 2, h, e)];
              dp[j] += (double)g[(b * s.seq + i) * s.width + h * d + e] * qkv[at(b, j, 2, h, e)];
            }
            dot += pr[j] * dp[j];
          }
          for (long long j = 0; j <= i; j++) {
            double ds = pr[j] * (dp[j] - dot) * sc;
            for (long long e = 0; e < d; e++) {
              rd[at(b, i, 0, h, e)] += ds * qkv[at(b, j, 1, h, e)];
              rd[at(b, j, 1, h, e)] += ds * qkv[at(b, i, 0, h, e)];
              rd[at(b, j, 2, h, e)] += pr[j] * g[(b * s.seq + i) * s.width + h * d + e];
            }
          }
        }
    const double tol = s.sigma > 1 ? 2e-3 : 2e-5;
    // The cuBLAS route's row kernels: the softmax over float32 scores, and
    // dS over float32 dP = dY·Vᵀ, each against the double loops' values.
    {
      const long long rows = s.batch * s.heads * s.seq;
      std::vector<float> sp(p.size(), 5), dsv(p.size(), 5);
      std::vector<double> rds(p.size()), rmag(p.size());
      for (long long b = 0; b < s.batch; b++)
        for (long long h = 0; h < s.heads; h++)
          for (long long i = 0; i < s.seq; i++) {
            const long long r = (b * s.heads + h) * s.seq + i;
            double dot = 0;
            std::vector<double> dp(s.seq);
            for (long long j = 0; j < s.seq; j++) {
              double sv = 0;
              for (long long e = 0; e < d; e++) {
                sv += (double)qkv[at(b, i, 0, h, e)] * qkv[at(b, j, 1, h, e)];
                dp[j] += (double)g[(b * s.seq + i) * s.width + h * d + e] * qkv[at(b, j, 2, h, e)];
              }
              sp[r * s.seq + j] = (float)(sv * sc);  // the masked half too, as the GEMM writes it
              dsv[r * s.seq + j] = (float)dp[j];
              if (j <= i) dot += rp[r * s.seq + j] * dp[j];
            }
            for (long long j = 0; j <= i; j++) {
              rds[r * s.seq + j] = rp[r * s.seq + j] * (dp[j] - dot);
              rmag[r * s.seq + j] = rp[r * s.seq + j] * (std::fabs(dp[j]) + std::fabs(dot));  // the terms' size
            }
          }
      std::vector<float> pf(p.size());
      for (size_t k = 0; k < p.size(); k++) pf[k] = (float)rp[k];
      const std::vector<float> scores = sp;
      emu_launch(dml_attention_softmax, dim3{2, 1, 1}, dim3{256, 1, 1}, sp.data(), rows, s.seq);
      // the order the kernel claims: 32 lanes, lane l adding j = l, l+32, …,
      // then the lanes in order (the same bits)
      for (long long r = 0; r < rows; r++) {
        const float* row = scores.data() + r * s.seq;
        const long long n = r % s.seq + 1;
        double top = -INFINITY, lanes[32] = {};
        for (long long j = 0; j < n; j++) top = std::fmax(top, (double)row[j]);
        for (long long j = 0; j < n; j++) lanes[j % 32] += std::exp((double)row[j] - top);
        double sum = lanes[0];
        for (int l = 1; l < 32; l++) sum += lanes[l];
        for (long long j = 0; j < n; j++)
          CHECK(same_bits(sp[r * s.seq + j], (float)(std::exp((double)row[j] - top) / sum)),
                "attention_softmax row %lld col %lld: not the lanes' order", r, j);
      }
      emu_launch(dml_attention_ds, dim3{2, 1, 1}, dim3{256, 1, 1}, dsv.data(), (const float*)pf.data(), rows, s.seq);
      for (size_t k = 0; k < p.size(); k++) {
        CHECK(std::fabs(sp[k] - rp[k]) <= tol * (1 + rp[k]), "attention_softmax %zu: %g want %g", k, sp[k], rp[k]);
        CHECK(std::fabs(dsv[k] - rds[k]) <= tol * rmag[k] + 1e-30, "attention_ds %zu: %g want %g", k, dsv[k], rds[k]);
        if (rp[k] == 0) CHECK(sp[k] == 0 && dsv[k] == 0, "attention row kernels: %zu above the diagonal not zero", k);
      }
    }
    for (size_t k = 0; k < p.size(); k++) CHECK(std::fabs(p[k] - rp[k]) <= tol * (1 + rp[k]), "attention probs %zu: %g want %g", k, p[k], rp[k]);
    for (size_t k = 0; k < y.size(); k++) CHECK(std::fabs(y[k] - ry[k]) <= tol * (std::fabs(ry[k]) + scale), "attention y %zu: %g want %g", k, y[k], ry[k]);
    for (size_t k = 0; k < dq.size(); k++)
      CHECK(std::fabs(dq[k] - rd[k]) <= tol * s.sigma * (std::fabs(rd[k]) + scale), "attention dqkv %zu: %g want %g", k, dq[k], rd[k]);
  }
}

int main() {
  test_elementwise();
  std::printf("emu: elementwise done (%d failures so far)\n", failures);
  test_loss();
  std::printf("emu: loss done (%d failures so far)\n", failures);
  test_reduce();
  std::printf("emu: reduce done (%d failures so far)\n", failures);
  test_gemm();
  std::printf("emu: gemm done (%d failures so far)\n", failures);
  test_conv();
  test_pool();
  test_batchnorm();
  test_maxpool_pad();
  test_lrn();
  test_syncbn();
  std::printf("emu: conv done (%d failures so far)\n", failures);
  test_transformer();
  test_dropout();
  test_sequence();
  std::printf("emu: transformer done (%d failures)\n", failures);
  if (failures) {
    std::printf("emu: FAIL (%d)\n", failures);
    return 1;
  }
  std::printf("emu: PASS\n");
  return 0;
}
