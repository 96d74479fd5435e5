// gemm_tf32.cu: SGEMM on the tensor cores with TF32 inputs (compute
// capability ≥ 8.0; compiled only for compute_80, see mk/cuda.mk). Same
// contract as gemm.cu (ABI.md) except precision: A and B are rounded to TF32
// (10-bit mantissa, cvt.rna) and multiplied by mma.sync.m16n8k8 with fp32
// accumulation, so results differ from fp32 by about 1e-3 relative. Only
// used under an explicit --precision tf32.
//
// Block: 128×128 tile of C, 256 threads = 8 warps as 2 (m) × 4 (n), each
// warp a 64×32 sub-tile = 4×4 mma tiles of 16×8; K in steps of 16 (two k8
// mma steps). Operands are rounded to TF32 once, when stored to shared
// memory. Per-element k-sums run in a fixed order: deterministic.
#include "common.cuh"
#include "gemm_tile.cuh"

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800

#ifndef DML_EMULATE
struct DmlToTF32 {
  __device__ __forceinline__ float operator()(float v) const {
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(v));
    return __uint_as_float(r);
  }
};

// d += a·b for one warp's 16×8×8 tile. Fragments (PTX ISA, mma.m16n8k8 .tf32),
// g = lane/4, t = lane%4: a0 = A[g][t], a1 = A[g+8][t], a2 = A[g][t+4],
// a3 = A[g+8][t+4]; b0 = B[t][g], b1 = B[t+4][g]; d0 = D[g][2t],
// d1 = D[g][2t+1], d2 = D[g+8][2t], d3 = D[g+8][2t+1].
__device__ __forceinline__ void dml_mma_tf32(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#else
#include "emu/tf32_emu.h"  // host emulation of the two instructions (make kernels-emu)
#endif

template <bool TA, bool TB>
__device__ __forceinline__ void dml_sgemm_tf32(long long M, long long N, long long K, float alpha,
                                               const float* __restrict__ A, long long lda,
                                               const float* __restrict__ B, long long ldb,
                                               float beta, float* __restrict__ C, long long ldc) {
  constexpr int BM = 128, BN = 128, BK = 16, PAD = 8, THREADS = 256;
  constexpr int WM = 64, WN = 32;        // warp tile
  constexpr int MI = WM / 16, NI = WN / 8;  // mma tiles per warp
  // PAD 8: a fragment read S[ks + t][base + g] (t = lane%4, g = lane/4) hits
  // bank 8t + g: the 32 lanes hit 32 different banks.
  __shared__ __align__(16) float As[2][BK][BM + PAD];  // two stages, as in gemm.cu
  __shared__ __align__(16) float Bs[2][BK][BN + PAD];
  if (blockDim.x != THREADS) __trap();

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int wm = (warp / 4) * WM, wn = (warp % 4) * WN;
  const bool useAB = K > 0 && alpha != 0.f;
  const bool vecA = dml_vec_ok(A, lda), vecB = dml_vec_ok(B, ldb);
  const long long tilesM = (M + BM - 1) / BM, tilesN = (N + BN - 1) / BN;
  DmlTile<BK, BM, PAD, THREADS, TA> ta;
  DmlTile<BK, BN, PAD, THREADS, !TB> tb;

  for (long long bm = blockIdx.y; bm < tilesM; bm += gridDim.y) {
    for (long long bn = blockIdx.x; bn < tilesN; bn += gridDim.x) {
      const long long m0 = bm * BM, n0 = bn * BN;
      float acc[MI][NI][4];
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
          for (int q = 0; q < 4; q++) acc[i][j][q] = 0.f;

      if (useAB) {
        ta.setup(A, lda, K, M, m0, vecA);
        tb.setup(B, ldb, K, N, n0, vecB);
        ta.load();
        tb.load();
        ta.store(As[0], DmlToTF32());
        tb.store(Bs[0], DmlToTF32());
        __syncthreads();
        int cur = 0;
        for (long long k0 = 0; k0 < K; k0 += BK) {
          const bool more = k0 + BK < K;
          if (more) {
            ta.load();
            tb.load();
          }
#pragma unroll
          for (int ks = 0; ks < BK; ks += 8) {
            uint32_t a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; i++) {
              const int r = wm + i * 16 + g;
              a[i][0] = __float_as_uint(As[cur][ks + t][r]);
              a[i][1] = __float_as_uint(As[cur][ks + t][r + 8]);
              a[i][2] = __float_as_uint(As[cur][ks + t + 4][r]);
              a[i][3] = __float_as_uint(As[cur][ks + t + 4][r + 8]);
            }
#pragma unroll
            for (int j = 0; j < NI; j++) {
              const int c = wn + j * 8 + g;
              b[j][0] = __float_as_uint(Bs[cur][ks + t][c]);
              b[j][1] = __float_as_uint(Bs[cur][ks + t + 4][c]);
            }
#pragma unroll
            for (int i = 0; i < MI; i++)
#pragma unroll
              for (int j = 0; j < NI; j++) dml_mma_tf32(acc[i][j], a[i], b[j]);
          }
          if (more) {
            ta.store(As[cur ^ 1], DmlToTF32());
            tb.store(Bs[cur ^ 1], DmlToTF32());
          }
          __syncthreads();
          cur ^= 1;
        }
      }

      // Accumulator q of mma tile (i, j) is C row wm+16i+g+8·(q/2),
      // column wn+8j+2t+(q%2).
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
          for (int q = 0; q < 4; q++) {
            const long long r = m0 + wm + i * 16 + g + (q / 2) * 8;
            const long long c = n0 + wn + j * 8 + t * 2 + (q % 2);
            if (r >= M || c >= N) continue;
            float* p = C + r * ldc + c;
            const float ab = useAB ? alpha * acc[i][j][q] : 0.f;
            *p = beta == 0.f ? ab : ab + beta * *p;
          }
    }
  }
}

#define DML_TF32_PARAMS                                                                  \
  long long m, long long n, long long k, float alpha, const float *__restrict__ A,      \
      long long lda, const float *__restrict__ B, long long ldb, float beta,            \
      float *__restrict__ C, long long ldc
#define DML_TF32(name, ta, tb)                                                  \
  extern "C" __global__ void __launch_bounds__(256) name(DML_TF32_PARAMS) {     \
    dml_sgemm_tf32<ta, tb>(m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);       \
  }

DML_TF32(dml_sgemm_tf32_nn, false, false)
DML_TF32(dml_sgemm_tf32_nt, false, true)
DML_TF32(dml_sgemm_tf32_tn, true, false)
DML_TF32(dml_sgemm_tf32_tt, true, true)

#endif  // __CUDA_ARCH__ >= 800
