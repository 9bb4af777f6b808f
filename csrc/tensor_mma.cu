// Tensor-core roof through the portable warp-level path, mma.sync (Turing and later).
//
// Every warp keeps two A and two B fragments in registers (random data, loaded once) and
// kAcc independent accumulators; each loop trip issues kUnroll x kAcc MMAs with no other work, so
// the tensor pipe always has independent instructions and the loop costs a handful of issue slots.
// On Hopper this path tops out near two thirds of the tensor rate (the full rate needs wgmma, see
// tensor_wgmma.cu); on Turing, Ampere, Ada and Blackwell it is the roof we can reach portably.
//
// Verification proves the fragment layouts: the host draws matrices, packs them into per-lane
// registers using the layout the PTX ISA documents, computes D = A*B itself, and maps D back to
// the lanes with the documented accumulator layout. A wrong layout or a dead loop fails.
//
// This file holds the kernel; the host side (fragment packing, reference, verification, the
// measurement) is tensor_mma_host.cpp, the instruction structs tensor_mma_ops.hpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "compute_device.hpp"
#include "tensor_mma_ops.hpp"

namespace roofline {
namespace compute {
namespace mma {

namespace {
using namespace ops;

// Fragments: [A set 0..1][register][lane], then [B set 0..1][register][lane]; the same for every warp.
template <class Op>
__global__ void __launch_bounds__(kThreads) mma_kernel(const uint32_t* __restrict__ frags, long long iterations,
                                                       typename Op::Acc* __restrict__ out, int* __restrict__ status,
                                                       unsigned long long* __restrict__ probe) {
  if constexpr (ROOFLINE_ARCH >= Op::kMinArch) {
    ClockProbe clk;
    if (threadIdx.x == 0) probe_start(clk);
    const int lane = threadIdx.x & 31;
    uint32_t a[2][Op::kA], b[2][Op::kB];
#pragma unroll
    for (int x = 0; x < 2; ++x) {
#pragma unroll
      for (int r = 0; r < Op::kA; ++r) a[x][r] = frags[(x * Op::kA + r) * 32 + lane];
#pragma unroll
      for (int r = 0; r < Op::kB; ++r) b[x][r] = frags[(2 * Op::kA + x * Op::kB + r) * 32 + lane];
    }
    // Accumulator j starts at j: two accumulators fed the same fragments would otherwise hold equal
    // values from start to end, and the compiler may keep one of them and drop the other's MMAs.
    typename Op::Acc c[kAcc][Op::kC];
#pragma unroll
    for (int j = 0; j < kAcc; ++j)
#pragma unroll
      for (int r = 0; r < Op::kC; ++r) c[j][r] = static_cast<typename Op::Acc>(j);
    for (long long it = 0; it < iterations; ++it) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int j = 0; j < kAcc; ++j) Op::run(c[j], a[j & 1], b[(j >> 1) & 1]);
      }
    }
    const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
#pragma unroll
    for (int j = 0; j < kAcc; ++j)
#pragma unroll
      for (int r = 0; r < Op::kC; ++r) out[((warp * kAcc + j) * Op::kC + r) * 32 + lane] = c[j][r];
    if (threadIdx.x == 0) probe_stop(clk, probe);
  } else {
    if (threadIdx.x == 0 && blockIdx.x == 0) *status = kStatusNotCompiled;
  }
}

}  // namespace

template <class Op>
const void* mma_kernel_fn() {
  return reinterpret_cast<const void*>(mma_kernel<Op>);
}

template <class Op>
void launch_mma_kernel(int grid, int block, cudaStream_t s, const uint32_t* frags, long long iterations,
                       typename Op::Acc* out, int* status, unsigned long long* probe) {
  mma_kernel<Op><<<grid, block, 0, s>>>(frags, iterations, out, status, probe);
}

// Every instruction's kernel, for the host side to launch.
#define ROOFLINE_MMA_KERNEL(Op)                                                                          \
  template const void* mma_kernel_fn<ops::Op>();                                                         \
  template void launch_mma_kernel<ops::Op>(int, int, cudaStream_t, const uint32_t*, long long, ops::Op::Acc*, \
                                           int*, unsigned long long*);
ROOFLINE_MMA_KERNEL(F16_m16n8k16)
ROOFLINE_MMA_KERNEL(BF16_m16n8k16)
ROOFLINE_MMA_KERNEL(TF32_m16n8k8)
ROOFLINE_MMA_KERNEL(E4M3_m16n8k32)
ROOFLINE_MMA_KERNEL(S8_m16n8k32)
ROOFLINE_MMA_KERNEL(F16_m16n8k8)
ROOFLINE_MMA_KERNEL(S8_m8n8k16)
#undef ROOFLINE_MMA_KERNEL

}  // namespace mma
}  // namespace compute
}  // namespace roofline
