// tf32_emu.h: host emulation of cvt.rna.tf32.f32 and the warp-wide
// mma.sync.m16n8k8 TF32 for cuda_emu.h (included by gemm_tf32.cu under
// DML_EMULATE only). The fragment layout is the PTX ISA's, as documented
// at dml_mma_tf32 in gemm_tf32.cu.
#pragma once

struct DmlToTF32 {
  float operator()(float v) const {
    uint32_t u = __float_as_uint(v);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;  // nearest, ties away
    return __uint_as_float(u);
  }
};

// Every thread of the block calls it together (the GEMM calls it uniformly);
// lanes exchange fragments through static (block-shared) arrays.
inline void dml_mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  static uint32_t fa[32][32][4], fb[32][32][2];
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  for (int q = 0; q < 4; q++) fa[w][l][q] = a[q];
  for (int q = 0; q < 2; q++) fb[w][l][q] = b[q];
  __syncthreads();
  const int g = l / 4, t = l % 4;
  for (int q = 0; q < 4; q++) {
    const int row = g + 8 * (q / 2), col = 2 * t + q % 2;
    float s = d[q];
    for (int k = 0; k < 8; k++) {
      const float av = __uint_as_float(fa[w][(row % 8) * 4 + k % 4][(row >= 8 ? 1 : 0) + (k >= 4 ? 2 : 0)]);
      const float bv = __uint_as_float(fb[w][col * 4 + k % 4][k >= 4 ? 1 : 0]);
      s += av * bv;
    }
    d[q] = s;
  }
  __syncthreads();
}
