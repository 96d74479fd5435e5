// gemm_tile.cuh: global→shared tile loading shared by gemm.cu and gemm_tf32.cu.
#pragma once
#include <stdint.h>

// dml_load4 returns the 4 consecutive elements X[r·ld + c … c+3] of an
// R×Cc row-major matrix, zero where (r, c+q) is outside it. vec says X and
// ld allow an aligned float4 load at (r, c) (the callers keep c a multiple
// of 4); the float4 is used only when all 4 elements are inside.
__device__ __forceinline__ float4 dml_load4(const float* __restrict__ X, long long ld, long long r,
                                            long long c, long long R, long long Cc, bool vec) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  if (r < R) {
    const float* p = X + r * ld + c;
    if (vec && c + 3 < Cc) {
      v = __ldg(reinterpret_cast<const float4*>(p));
    } else {
      if (c < Cc) v.x = __ldg(p);
      if (c + 1 < Cc) v.y = __ldg(p + 1);
      if (c + 2 < Cc) v.z = __ldg(p + 2);
      if (c + 3 < Cc) v.w = __ldg(p + 3);
    }
  }
  return v;
}

// DmlTile loads the BK×BMN tile of op(X) that starts at (k0, base) into
// shared memory S[BK][BMN + PAD], stored k-major: S[kk][x] = op(X)[k0+kk][base+x]
// for the B operand (op(B) is K×N), and S[kk][x] = op(A)[base+x][k0+kk] for
// A (op(A) is M×K) — either way x runs over the M or N side, kk over K.
//
// KMAJOR: X is stored with K as its row index (K×MN, ld ≥ MN): Aᵀ stored
// k×m, or B stored k×n; 4 consecutive x are contiguous in memory.
// !KMAJOR: X is stored MN×K (ld ≥ K): A stored m×k, or Bᵀ stored n×k;
// 4 consecutive kk are contiguous.
// Elements outside the matrix load as 0, so partial tiles add nothing.
template <int BK, int BMN, int PAD, int THREADS, bool KMAJOR>
struct DmlTile {
  static constexpr int VECS = BK * BMN / 4;  // float4s per tile
  static constexpr int LOADS = VECS / THREADS;
  static_assert(VECS % THREADS == 0, "tile must split evenly over the threads");
  static_assert(BK % 4 == 0 && BMN % 4 == 0, "tile sides must be multiples of 4");
  static_assert((BMN + PAD) % 4 == 0, "rows of S must stay 16-byte aligned");
  float4 reg[LOADS];

  __device__ __forceinline__ void load(const float* __restrict__ X, long long ld, long long K,
                                       long long MN, long long k0, long long base, bool vec) {
#pragma unroll
    for (int l = 0; l < LOADS; l++) {
      const int e = threadIdx.x + l * THREADS;
      if (KMAJOR) {
        const int kk = e / (BMN / 4), x = (e % (BMN / 4)) * 4;
        reg[l] = dml_load4(X, ld, k0 + kk, base + x, K, MN, vec);
      } else {
        const int x = e / (BK / 4), kk = (e % (BK / 4)) * 4;
        reg[l] = dml_load4(X, ld, base + x, k0 + kk, MN, K, vec);
      }
    }
  }

  // store writes the loaded registers into S, through f (identity, or the
  // TF32 rounding).
  template <typename F>
  __device__ __forceinline__ void store(float (*S)[BMN + PAD], F f) const {
#pragma unroll
    for (int l = 0; l < LOADS; l++) {
      const int e = threadIdx.x + l * THREADS;
      const float4 v = reg[l];
      if (KMAJOR) {
        const int kk = e / (BMN / 4), x = (e % (BMN / 4)) * 4;
        *reinterpret_cast<float4*>(&S[kk][x]) = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
      } else {
        const int x = e / (BK / 4), kk = (e % (BK / 4)) * 4;
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
