// The SIMT family's kernel as its host code (simt_host.cpp) sees it: the shape constants both sides
// use and two launch wrappers, defined with the kernel in simt.cu. The host code (plan, seeds,
// replay, verification) compiles with the host files, beside nvcc's per-architecture passes,
// instead of inside the CUDA unit where every pass would parse it again (issue 28).
#pragma once

#include <cuda_runtime.h>

namespace roofline {
namespace compute {
namespace simt {

inline constexpr int kChains = 8;
inline constexpr int kUnroll = 64;

// The kernel for T = float or double (instantiated in simt.cu), for cudaFuncGetAttributes and the
// occupancy query, and its launch on `s` (the caller checks the launch with CUDA_CHECK_LAUNCH).
template <typename T>
const void* fma_kernel_fn();
template <typename T>
void launch_fma_kernel(int grid, int block, cudaStream_t s, const T* seeds, T m, T a, long long iterations, T* out,
                       unsigned long long* probe);

}  // namespace simt
}  // namespace compute
}  // namespace roofline
