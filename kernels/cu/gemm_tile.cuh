// gemm_tile.cuh: global→shared tile loading shared by gemm.cu and gemm_tf32.cu.
#pragma once
#include <stdint.h>

// DmlTile loads, K-step by K-step, the BK×BMN tiles of op(X) that start at
// (k0, base) into shared memory S[BK][BMN + PAD], stored k-major:
// S[kk][x] = op(X)[k0+kk][base+x] for the B operand (op(B) is K×N), and
// S[kk][x] = op(A)[base+x][k0+kk] for A (op(A) is M×K) — either way x runs
// over the M or N side, kk over K.
//
// KMAJOR: X is stored with K as its row index (K×MN, ld ≥ MN): Aᵀ stored
// k×m, or B stored k×n; 4 consecutive x are contiguous in memory.
// !KMAJOR: X is stored MN×K (ld ≥ K): A stored m×k, or Bᵀ stored n×k;
// 4 consecutive kk are contiguous.
// Elements outside the matrix load as 0, so partial tiles add nothing.
//
// Each thread loads LOADS float4s per tile. setup() fixes, per float4, the
// coordinate that does not move along K (checked once per C tile) and a
// pointer; load() reads the tile at the current K-step and advances the
// pointers by one step, so the K loop does no 64-bit index multiplication.
template <int BK, int BMN, int PAD, int THREADS, bool KMAJOR>
struct DmlTile {
  static constexpr int VECS = BK * BMN / 4;  // float4s per tile
  static constexpr int LOADS = VECS / THREADS;
  static_assert(VECS % THREADS == 0, "tile must split evenly over the threads");
  static_assert(BK % 4 == 0 && BMN % 4 == 0, "tile sides must be multiples of 4");
  static_assert((BMN + PAD) % 4 == 0, "rows of S must stay 16-byte aligned");
  float4 reg[LOADS];
  const float* p[LOADS];  // element (moving, fixed) of this float4 at the current step
  long long kpos[LOADS];  // its K coordinate (row for KMAJOR, column otherwise)
  int nfix[LOADS];        // KMAJOR: elements of the 4 inside MN; else 4 if its row is inside MN, 0 if not
  long long K, step;
  bool vec;

  // kk and x of float4 number l of this thread.
  __device__ __forceinline__ static void coords(int l, int& kk, int& x) {
    const int e = threadIdx.x + l * THREADS;
    if (KMAJOR) {
      kk = e / (BMN / 4);
      x = (e % (BMN / 4)) * 4;
    } else {
      x = e / (BK / 4);
      kk = (e % (BK / 4)) * 4;
    }
  }

  // setup positions the loader at K-step 0 of the tile column/row base.
  __device__ __forceinline__ void setup(const float* __restrict__ X, long long ld, long long K_,
                                        long long MN, long long base, bool vec_) {
    K = K_;
    vec = vec_;
    step = KMAJOR ? BK * ld : BK;
#pragma unroll
    for (int l = 0; l < LOADS; l++) {
      int kk, x;
      coords(l, kk, x);
      kpos[l] = kk;
      if (KMAJOR) {
        const long long c = base + x;
        const long long left = MN - c;
        nfix[l] = left >= 4 ? 4 : (left > 0 ? (int)left : 0);
        p[l] = X + (long long)kk * ld + c;
      } else {
        const long long r = base + x;
        nfix[l] = r < MN ? 4 : 0;
        p[l] = X + r * ld + kk;
      }
    }
  }

  // load reads the tile at the current K-step into registers and advances.
  __device__ __forceinline__ void load() {
#pragma unroll
    for (int l = 0; l < LOADS; l++) {
      int n;  // how many of the 4 elements are inside the matrix
      if (KMAJOR) {
        n = kpos[l] < K ? nfix[l] : 0;
      } else {
        const long long left = K - kpos[l];
        n = nfix[l] == 0 ? 0 : (left >= 4 ? 4 : (left > 0 ? (int)left : 0));
      }
      const float* q = p[l];
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (n == 4 && vec) {
        v = __ldg(reinterpret_cast<const float4*>(q));
      } else {
        if (n > 0) v.x = __ldg(q);
        if (n > 1) v.y = __ldg(q + 1);
        if (n > 2) v.z = __ldg(q + 2);
        if (n > 3) v.w = __ldg(q + 3);
      }
      reg[l] = v;
      p[l] += step;
      kpos[l] += BK;
    }
  }

  // store writes the loaded registers into S, through f (identity, or the
  // TF32 rounding).
  template <typename F>
  __device__ __forceinline__ void store(float (*S)[BMN + PAD], F f) const {
#pragma unroll
    for (int l = 0; l < LOADS; l++) {
      int kk, x;
      coords(l, kk, x);
      const float4 v = reg[l];
      if (KMAJOR) {
        *reinterpret_cast<float4*>(&S[kk][x]) = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
      } else {
        S[kk + 0][x] = f(v.x);
        S[kk + 1][x] = f(v.y);
        S[kk + 2][x] = f(v.z);
        S[kk + 3][x] = f(v.w);
      }
    }
  }
};

struct DmlIdentity {
  __device__ __forceinline__ float operator()(float v) const { return v; }
};

// dml_vec_ok: can X be read with aligned float4 loads along its rows?
__device__ __forceinline__ bool dml_vec_ok(const float* X, long long ld) {
  return (ld % 4) == 0 && (reinterpret_cast<uintptr_t>(X) & 15) == 0;
}
