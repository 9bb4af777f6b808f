// SIMT arithmetic roof: FP32 and FP64 fused multiply-add on the CUDA cores.
//
// Each thread runs kChains independent FMA chains, v = v * m + a, unrolled kUnroll deep inside
// the loop, so the loop's own instructions are under 1% of the issue slots and each scheduler
// always has an independent FMA ready (8 chains x 16 resident warps per scheduler hide the ~4-cycle
// FMA latency many times over). m = 1 - 2^-12 and a = 2^-12 keep every chain near its fixed point 1:
// no overflow, no denormals, no value the compiler could predict (m and a are kernel arguments).
// The chains are folded into one value per thread and written out, so nothing is dead code; the
// host replays the same recurrence with std::fma (IEEE fused, like FFMA/DFMA) to verify.
#include <cuda_runtime.h>

#include "compute_device.hpp"
#include "simt_launch.hpp"

namespace roofline {
namespace compute {
namespace simt {
namespace {

template <typename T>
__device__ __forceinline__ T fused(T x, T y, T z);
template <>
__device__ __forceinline__ float fused<float>(float x, float y, float z) { return fmaf(x, y, z); }
template <>
__device__ __forceinline__ double fused<double>(double x, double y, double z) { return fma(x, y, z); }

template <typename T>
__global__ void __launch_bounds__(1024) fma_kernel(const T* __restrict__ seeds, T m, T a, long long iterations,
                                                   T* __restrict__ out, unsigned long long* __restrict__ probe) {
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  ClockProbe clk;
  if (threadIdx.x == 0) probe_start(clk);
  T v[kChains];
#pragma unroll
  for (int j = 0; j < kChains; ++j) v[j] = seeds[tid * kChains + j];
  for (long long it = 0; it < iterations; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int j = 0; j < kChains; ++j) v[j] = fused(v[j], m, a);
    }
  }
  T s = v[0];
#pragma unroll
  for (int j = 1; j < kChains; ++j) s = s + v[j];
  out[tid] = s;
  if (threadIdx.x == 0) probe_stop(clk, probe);
}

}  // namespace

template <typename T>
const void* fma_kernel_fn() {
  return reinterpret_cast<const void*>(fma_kernel<T>);
}

template <typename T>
void launch_fma_kernel(int grid, int block, cudaStream_t s, const T* seeds, T m, T a, long long iterations, T* out,
                       unsigned long long* probe) {
  fma_kernel<T><<<grid, block, 0, s>>>(seeds, m, a, iterations, out, probe);
}

template const void* fma_kernel_fn<float>();
template const void* fma_kernel_fn<double>();
template void launch_fma_kernel<float>(int, int, cudaStream_t, const float*, float, float, long long, float*,
                                       unsigned long long*);
template void launch_fma_kernel<double>(int, int, cudaStream_t, const double*, double, double, long long, double*,
                                        unsigned long long*);

}  // namespace simt
}  // namespace compute
}  // namespace roofline
