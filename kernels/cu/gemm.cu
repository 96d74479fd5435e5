// gemm.cu: fp32 SGEMM, C = alpha·op(A)·op(B) + beta·C, row-major, all four
// transposes (ABI.md). Tiled through shared memory and register-blocked:
// a block computes a BM×BN tile of C with 256 threads, each thread a TM×TN
// sub-tile held in registers, the K dimension in steps of BK. Global loads
// are float4 where the operand's alignment and leading dimension allow; the
// next K-step's tile is loaded into registers while the current one is
// multiplied from shared memory, and stored into the second of two shared
// memory stages, so each K-step needs one barrier.
//
// Correct for any m, n, k ≥ 0: loads outside the matrices read as zero,
// stores outside C are skipped, k == 0 or alpha == 0 gives C = beta·C
// without reading A or B, beta == 0 never reads C. Every C element's k-sum
// is one chain of fused multiply-adds in k order: deterministic.
//
// Grid: (min(ceil(n/BN), 65535·k), min(ceil(m/BM), 65535)) — the kernel loops
// over tiles with grid strides, so a smaller grid is also correct.
#include "common.cuh"
#include "gemm_tile.cuh"

// Per-thread sub-tile: TM = 4·SM rows, TN = 4·SN columns, in SM (SN) groups
// of 4 consecutive rows (columns) BM/SM (BN/SN) apart, so that the float4
// shared-memory reads of a warp are conflict-free.
template <int BM, int BN, int BK, int SM, int SN, int PAD, bool TA, bool TB>
__device__ __forceinline__ void dml_sgemm(long long M, long long N, long long K, float alpha,
                                          const float* __restrict__ A, long long lda,
                                          const float* __restrict__ B, long long ldb, float beta,
                                          float* __restrict__ C, long long ldc) {
  constexpr int TM = 4 * SM, TN = 4 * SN;
  constexpr int TX = BN / TN, TY = BM / TM;  // threads along n and m
  constexpr int THREADS = TX * TY;
  static_assert(BM % (4 * SM) == 0 && BN % (4 * SN) == 0, "bad split");
  static_assert((BM / SM) / 4 == TY && (BN / SN) / 4 == TX, "groups must tile the block");
  // Two stages: the block multiplies from one while it stores the next
  // K-step (already in registers) into the other; one barrier per K-step.
  __shared__ __align__(16) float As[2][BK][BM + PAD];
  __shared__ __align__(16) float Bs[2][BK][BN + PAD];
  if (blockDim.x != THREADS) __trap();

  const int tid = threadIdx.x;
  const int tx = tid % TX, ty = tid / TX;
  const bool useAB = K > 0 && alpha != 0.f;
  const bool vecA = dml_vec_ok(A, lda), vecB = dml_vec_ok(B, ldb);
  const long long tilesM = (M + BM - 1) / BM, tilesN = (N + BN - 1) / BN;

  // op(A) is M×K: stored K×M (k-major) when transposed. op(B) is K×N:
  // stored K×N (k-major) when not transposed.
  DmlTile<BK, BM, PAD, THREADS, TA> ta;
  DmlTile<BK, BN, PAD, THREADS, !TB> tb;

  for (long long bm = blockIdx.y; bm < tilesM; bm += gridDim.y) {
    for (long long bn = blockIdx.x; bn < tilesN; bn += gridDim.x) {
      const long long m0 = bm * BM, n0 = bn * BN;
      float acc[TM][TN];
#pragma unroll
      for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = 0.f;

      if (useAB) {
        ta.setup(A, lda, K, M, m0, vecA);
        tb.setup(B, ldb, K, N, n0, vecB);
        ta.load();
        tb.load();
        ta.store(As[0], DmlIdentity());
        tb.store(Bs[0], DmlIdentity());
        __syncthreads();
        int cur = 0;
        for (long long k0 = 0; k0 < K; k0 += BK) {
          const bool more = k0 + BK < K;
          if (more) {  // the next K-step's loads overlap this step's arithmetic
            ta.load();
            tb.load();
          }
#pragma unroll
          for (int kk = 0; kk < BK; kk++) {
            float a[TM], b[TN];
#pragma unroll
            for (int s = 0; s < SM; s++) {
              const float4 v = *reinterpret_cast<const float4*>(&As[cur][kk][s * (BM / SM) + ty * 4]);
              a[4 * s + 0] = v.x;
              a[4 * s + 1] = v.y;
              a[4 * s + 2] = v.z;
              a[4 * s + 3] = v.w;
            }
#pragma unroll
            for (int s = 0; s < SN; s++) {
              const float4 v = *reinterpret_cast<const float4*>(&Bs[cur][kk][s * (BN / SN) + tx * 4]);
              b[4 * s + 0] = v.x;
              b[4 * s + 1] = v.y;
              b[4 * s + 2] = v.z;
              b[4 * s + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < TM; i++)
#pragma unroll
              for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
          }
          if (more) {  // the other stage was last read before the previous barrier
            ta.store(As[cur ^ 1], DmlIdentity());
            tb.store(Bs[cur ^ 1], DmlIdentity());
          }
          __syncthreads();  // the stores are visible; nobody still reads stage cur
          cur ^= 1;
        }
      }

#pragma unroll
      for (int i = 0; i < TM; i++) {
        const long long r = m0 + (i / 4) * (BM / SM) + ty * 4 + (i % 4);
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; j++) {
          const long long c = n0 + (j / 4) * (BN / SN) + tx * 4 + (j % 4);
          if (c >= N) continue;
          float* p = C + r * ldc + c;
          const float ab = useAB ? alpha * acc[i][j] : 0.f;
          *p = beta == 0.f ? ab : ab + beta * *p;
        }
      }
    }
  }
}

// The launch constants (kernels/ptx/abi.go mirrors them):
//   dml_sgemm_{nn,nt,tn,tt}:   128×128 tiles, 256 threads, 8×8 per thread, BK 8
//   dml_sgemm64_{nn,nt,tn,tt}:  64×64 tiles, 256 threads, 4×4 per thread, BK 16
#define DML_SGEMM_PARAMS                                                                 \
  long long m, long long n, long long k, float alpha, const float *__restrict__ A,      \
      long long lda, const float *__restrict__ B, long long ldb, float beta,            \
      float *__restrict__ C, long long ldc
#define DML_SGEMM_ARGS m, n, k, alpha, A, lda, B, ldb, beta, C, ldc

#define DML_SGEMM_128(name, ta, tb)                                      \
  extern "C" __global__ void __launch_bounds__(256) name(DML_SGEMM_PARAMS) { \
    dml_sgemm<128, 128, 8, 2, 2, 4, ta, tb>(DML_SGEMM_ARGS);              \
  }
#define DML_SGEMM_64(name, ta, tb)                                       \
  extern "C" __global__ void __launch_bounds__(256) name(DML_SGEMM_PARAMS) { \
    dml_sgemm<64, 64, 16, 1, 1, 4, ta, tb>(DML_SGEMM_ARGS);               \
  }

DML_SGEMM_128(dml_sgemm_nn, false, false)
DML_SGEMM_128(dml_sgemm_nt, false, true)
DML_SGEMM_128(dml_sgemm_tn, true, false)
DML_SGEMM_128(dml_sgemm_tt, true, true)
DML_SGEMM_64(dml_sgemm64_nn, false, false)
DML_SGEMM_64(dml_sgemm64_nt, false, true)
DML_SGEMM_64(dml_sgemm64_tn, true, false)
DML_SGEMM_64(dml_sgemm64_tt, true, true)
