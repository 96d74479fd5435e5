// gemm.cu: fp32 SGEMM, C = alpha·op(A)·op(B) + beta·C, row-major, all four
// transposes (ABI.md). Tiled through shared memory and register-blocked:
// a block computes a BM×BN tile of C with 256 threads, each thread a TM×TN
// sub-tile held in registers, the K dimension in steps of BK. Global loads
// are float4 where the operand's alignment and leading dimension allow; the
// next K-step's tile is loaded into registers while the current one is
// multiplied from shared memory. STAGES = 2 stores it into a second shared
// memory stage (one barrier per K-step); STAGES = 1 stores it after a
// barrier into the one stage (two barriers per K-step, half the shared
// memory). On the H200, one stage with BK 16 was faster (RESULTS.md).
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
template <int BM, int BN, int BK, int SM, int SN, int PAD, int STAGES, bool WARPTILE, bool TA, bool TB>
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
  static_assert(STAGES == 1 || STAGES == 2, "one or two shared-memory stages");
  __shared__ __align__(16) float As[STAGES][BK][BM + PAD];
  __shared__ __align__(16) float Bs[STAGES][BK][BN + PAD];
  if (blockDim.x != THREADS) __trap();

  const int tid = threadIdx.x;
  // WARPTILE: a warp's 32 threads cover 8 (ty) × 4 (tx) sub-tiles, so its
  // fragment reads per K-step are 8 distinct float4s of A and 4 of B (one
  // shared-memory wavefront each) instead of 2 of A and 16 of B.
  static_assert(!WARPTILE || (TX % 4 == 0 && TY % 8 == 0), "warp tiles need TX % 4 == 0, TY % 8 == 0");
  const int lane = tid % 32, warp = tid / 32;
  const int tx = WARPTILE ? (warp % (TX / 4)) * 4 + lane % 4 : tid % TX;
  const int ty = WARPTILE ? (warp / (TX / 4)) * 8 + lane / 4 : tid / TX;
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
        if (STAGES == 2) {
          ta.store(As[0], DmlIdentity());
          tb.store(Bs[0], DmlIdentity());
          __syncthreads();
        }
        int cur = 0;
        for (long long k0 = 0; k0 < K; k0 += BK) {
          const bool more = k0 + BK < K;
          if (STAGES == 1) {  // one stage: store, barrier, compute, barrier
            ta.store(As[0], DmlIdentity());
            tb.store(Bs[0], DmlIdentity());
            __syncthreads();
          }
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
          if (STAGES == 2 && more) {  // the other stage was last read before the previous barrier
            ta.store(As[cur ^ 1], DmlIdentity());
            tb.store(Bs[cur ^ 1], DmlIdentity());
          }
          __syncthreads();  // two stages: the stores are visible; one: nobody still reads As/Bs
          if (STAGES == 2) cur ^= 1;
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
//   dml_sgemm_{nn,nt,tn,tt}:   128×128 tiles, 256 threads, 8×8 per thread in
//                              warp tiles, BK 16, one shared-memory stage
//   dml_sgemm64_{nn,nt,tn,tt}: 128×64 tiles, 256 threads, 8×4 per thread,
//                              BK 16, one stage (≤ 128 registers: two blocks
//                              per SM), for products with few 128×128 tiles
// The DML_G128_* macros are the large kernel's tuning knobs (K-step, blocks
// per SM for __launch_bounds__, shared-memory stages, tile width, warp
// tiles); the defaults are what the H200 measured fastest at 4096³ (bench/gpu/
// RESULTS.md, "SGEMM variants"); bench/gpu/gemm-variants.sh builds and times
// the others.
#ifndef DML_G128_BK
#define DML_G128_BK 16
#endif
#ifndef DML_G128_MINB
#define DML_G128_MINB 1
#endif
#ifndef DML_G128_STAGES
#define DML_G128_STAGES 1
#endif
#ifndef DML_G128_BN
#define DML_G128_BN 128
#endif
#ifndef DML_G128_WARP
#define DML_G128_WARP true
#endif
#define DML_SGEMM_PARAMS                                                                 \
  long long m, long long n, long long k, float alpha, const float *__restrict__ A,      \
      long long lda, const float *__restrict__ B, long long ldb, float beta,            \
      float *__restrict__ C, long long ldc
#define DML_SGEMM_ARGS m, n, k, alpha, A, lda, B, ldb, beta, C, ldc

#define DML_SGEMM_128(name, ta, tb)                                                      \
  extern "C" __global__ void __launch_bounds__(256, DML_G128_MINB) name(DML_SGEMM_PARAMS) { \
    dml_sgemm<128, DML_G128_BN, DML_G128_BK, 2, DML_G128_BN / 64, 4, DML_G128_STAGES, DML_G128_WARP, ta, tb>( \
        DML_SGEMM_ARGS);                                                                 \
  }
// The 128×64 kernel says (256, 1) like the timed variant s1bn64 did: plain
// (256) lets ptxas pick 127 registers instead of 147, another code.
#define DML_SGEMM_64(name, ta, tb)                                       \
  extern "C" __global__ void __launch_bounds__(256, 1) name(DML_SGEMM_PARAMS) { \
    dml_sgemm<128, 64, 16, 2, 1, 4, 1, false, ta, tb>(DML_SGEMM_ARGS);            \
  }

DML_SGEMM_128(dml_sgemm_nn, false, false)
DML_SGEMM_128(dml_sgemm_nt, false, true)
DML_SGEMM_128(dml_sgemm_tn, true, false)
DML_SGEMM_128(dml_sgemm_tt, true, true)
DML_SGEMM_64(dml_sgemm64_nn, false, false)
DML_SGEMM_64(dml_sgemm64_nt, false, true)
DML_SGEMM_64(dml_sgemm64_tn, true, false)
DML_SGEMM_64(dml_sgemm64_tt, true, true)

// ---- skinny products: one side of C at most DML_SKINNY (16) wide --------------
//
// C = alpha·op(A)·op(B) + beta·C where one of m, n is small and k is large
// (an MLP's last layer: h·Wᵀ with 10 columns, dzᵀ·h with 10 rows). The tiled
// kernels give such a product a handful of blocks; these split K over the
// threads of a block instead. "Wide" is the large side of C (m when WIDEM),
// "skinny" the small one. Each block owns W wide indices and every skinny
// index (looping over chunks of DML_SKINNY); its 256 threads are W × G
// (G = 256/W K-groups): thread (w, g) sums k = g, g+G, g+2G, … for its
// wide index and each skinny index, then the G partial sums are combined
// by a fixed binary tree in shared memory. W = 8 when the wide side is
// contiguous in memory (8 floats: one 32-byte sector per K-row), W = 1
// when K is (the 256 threads read 256 consecutive k).
//
// Deterministic: each C element is the same fmaf chains and the same tree
// for a given shape. Correct for any shape (any m, n ≥ 1, k ≥ 0, any
// leading dimensions); fast when the skinny side is ≤ 16. Grid: (min(ceil(
// wide/W), 65535·k), 1), block 256; the kernel loops over the wide tiles
// with a grid stride, so any grid ≥ 1 is correct.
#define DML_SKINNY 16
template <bool WIDEM, bool TA, bool TB>
__device__ __forceinline__ void dml_sgemm_skinny(long long M, long long N, long long K, float alpha,
                                                 const float* __restrict__ A, long long lda,
                                                 const float* __restrict__ B, long long ldb,
                                                 float beta, float* __restrict__ C, long long ldc) {
  // Is the wide operand contiguous along the wide side? A (wide = m) is
  // when stored k×m (TA); B (wide = n) when stored k×n (!TB).
  constexpr bool WIDECONTIG = WIDEM ? TA : !TB;
  constexpr int W = WIDECONTIG ? 8 : 1;
  constexpr int G = 256 / W;
  __shared__ float part[G][W][DML_SKINNY + 1];
  if (blockDim.x != 256) __trap();
  const int w = threadIdx.x % W, g = threadIdx.x / W;
  const long long wide = WIDEM ? M : N, skinny = WIDEM ? N : M;
  const bool useAB = K > 0 && alpha != 0.f;
  const long long tiles = (wide + W - 1) / W;
  for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
    const long long wi = t * W + w;  // this thread's wide index
    for (long long s0 = 0; s0 < skinny; s0 += DML_SKINNY) {
      const int sn = (int)(skinny - s0 < DML_SKINNY ? skinny - s0 : DML_SKINNY);
      float acc[DML_SKINNY];
#pragma unroll
      for (int s = 0; s < DML_SKINNY; s++) acc[s] = 0.f;
      if (useAB && wi < wide) {
#pragma unroll 4
        for (long long k = g; k < K; k += G) {
          // x = the wide operand at (wi, k); y(s) = the skinny one at (k, s0+s).
          const float x = WIDEM ? (TA ? __ldg(A + k * lda + wi) : __ldg(A + wi * lda + k))
                                : (TB ? __ldg(B + wi * ldb + k) : __ldg(B + k * ldb + wi));
#pragma unroll
          for (int s = 0; s < DML_SKINNY; s++) {
            if (s < sn) {
              const long long si = s0 + s;
              const float y = WIDEM ? (TB ? __ldg(B + si * ldb + k) : __ldg(B + k * ldb + si))
                                    : (TA ? __ldg(A + k * lda + si) : __ldg(A + si * lda + k));
              // C[wi][si] (WIDEM) or C[si][wi]: op(A)[row][k]·op(B)[k][col] in both.
              acc[s] = WIDEM ? fmaf(x, y, acc[s]) : fmaf(y, x, acc[s]);
            }
          }
        }
      }
#pragma unroll
      for (int s = 0; s < DML_SKINNY; s++) part[g][w][s] = acc[s];
      __syncthreads();
      for (int h = G / 2; h > 0; h >>= 1) {  // fixed tree over the K-groups
        if (g < h) {
#pragma unroll
          for (int s = 0; s < DML_SKINNY; s++) part[g][w][s] += part[g + h][w][s];
        }
        __syncthreads();
      }
      // The W·sn results, spread over the threads.
      for (int o = threadIdx.x; o < W * sn; o += 256) {
        const int ow = o % W, os = o / W;
        const long long owi = t * W + ow;
        if (owi < wide) {
          const long long r = WIDEM ? owi : s0 + os, c = WIDEM ? s0 + os : owi;
          float* p = C + r * ldc + c;
          const float ab = useAB ? alpha * part[0][ow][os] : 0.f;
          *p = beta == 0.f ? ab : ab + beta * *p;
        }
      }
      __syncthreads();  // part is reused by the next chunk
    }
  }
}

// dml_sgemm_skinnyn_*: n is the skinny side (wide = m); dml_sgemm_skinnym_*:
// m is. kernels/ptx/abi.go: SkinnyMax, SkinnyThreads; PickGemm chooses them.
// __launch_bounds__(256) without a minimum-blocks count is what the H200
// timed (64–94 registers on sm_90). On sm_70 it lets ptxas cap the tn
// variants at 80 registers and spill 32 bytes (kernels-check reports it);
// (256, 1) would remove that but changes the sm_90 code (95–126 registers),
// untimed, so it stays as measured.
#define DML_SGEMM_SKINNY(name, widem, ta, tb)                           \
  extern "C" __global__ void __launch_bounds__(256) name(DML_SGEMM_PARAMS) { \
    dml_sgemm_skinny<widem, ta, tb>(DML_SGEMM_ARGS);                      \
  }
DML_SGEMM_SKINNY(dml_sgemm_skinnyn_nn, true, false, false)
DML_SGEMM_SKINNY(dml_sgemm_skinnyn_nt, true, false, true)
DML_SGEMM_SKINNY(dml_sgemm_skinnyn_tn, true, true, false)
DML_SGEMM_SKINNY(dml_sgemm_skinnyn_tt, true, true, true)
DML_SGEMM_SKINNY(dml_sgemm_skinnym_nn, false, false, false)
DML_SGEMM_SKINNY(dml_sgemm_skinnym_nt, false, false, true)
DML_SGEMM_SKINNY(dml_sgemm_skinnym_tn, false, true, false)
DML_SGEMM_SKINNY(dml_sgemm_skinnym_tt, false, true, true)
