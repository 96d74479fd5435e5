// cuda_emu.h: just enough of CUDA to run the kernels of kernels/cu on the
// host, one std::thread per CUDA thread and a std::barrier per block, so
// `make kernels-emu` can check their index arithmetic, bounds and results
// on a machine without a GPU. Blocks run one after another, so __shared__
// becomes `static`. It checks logic, not speed, memory-model corners or
// the real tensor-core instruction (the mma emulation follows the PTX ISA's
// m16n8k8 TF32 fragment layout).
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#define DML_EMULATE 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline std::barrier<>* emu_bar;
inline std::mutex emu_atomic_mu;

inline void __syncthreads() { emu_bar->arrive_and_wait(); }
[[noreturn]] inline void __trap() {
  std::fprintf(stderr, "emu: __trap (bad launch configuration)\n");
  std::abort();
}

struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline float __ldg(const float* p) { return *p; }
inline float4 __ldg(const float4* p) { return *p; }

inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline float __uint_as_float(uint32_t i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
inline uint32_t __float_as_uint(float f) {
  uint32_t i;
  std::memcpy(&i, &f, 4);
  return i;
}
using std::exp;
using std::fabs;
using std::isfinite;
using std::log;
using std::log1p;
using std::truncf;
inline long long atomicMin(long long* p, long long v) {
  std::lock_guard<std::mutex> g(emu_atomic_mu);
  long long old = *p;
  if (v < old) *p = v;
  return old;
}

// emu_launch runs kernel<<<grid, block>>>(args...).
template <typename... P, typename... A>
void emu_launch(void (*k)(P...), dim3 grid, dim3 block, A... args) {
  gridDim = grid;
  blockDim = block;
  const unsigned nt = block.x * block.y * block.z;
  for (unsigned by = 0; by < grid.y; by++)
    for (unsigned bx = 0; bx < grid.x; bx++) {
      std::barrier<> bar(nt);
      emu_bar = &bar;
      std::vector<std::thread> ts;
      ts.reserve(nt);
      for (unsigned t = 0; t < nt; t++)
        ts.emplace_back([&, t] {
          blockIdx = dim3{bx, by, 1};
          threadIdx = dim3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
          k(static_cast<P>(args)...);
        });
      for (auto& t : ts) t.join();
    }
}
