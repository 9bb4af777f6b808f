// Tensor-core roof on Hopper through wgmma.mma_async (sm_90a), the only path that reaches the
// full tensor rate there (mma.sync tops out near two thirds of it).
//
// A throughput microbenchmark, not a GEMM: each CTA copies operand tiles of random data into shared
// memory once, and then each of its warpgroups issues m64nNk* wgmmas (N = 256, the largest; 224 for
// INT8, whose largest shape that is) into one register accumulator set, kMmasPerGroup per commit
// group, keeping one group in flight while it issues the next. No global memory traffic and no
// barriers in the loop: only the tensor cores and the operand reads that feed them.
//
// Two operand sources (KernelConfig::a_from_registers):
//   SS: A and B both from shared memory through matrix descriptors;
//   RS: A from registers (per-warp fragments, loaded once), B from shared memory. This saves the
//       A reads from shared memory (a fifth of the operand traffic at N = 256).
// Two shared-memory layouts (KernelConfig::swizzle), both K-major with 128 bytes of K per row:
//   0:   canonical no-swizzle: 8-row x 16-byte core matrices of 128 contiguous bytes, element
//        (row, k_byte) at (row / 8) * SBO + (k_byte / 16) * LBO + (row % 8) * 16 + k_byte % 16,
//        LBO = 128 (next core matrix along K), SBO = 1024 (next 8 rows); a K slice (32 bytes) is
//        two core matrices, so slice s starts at 256 * s;
//   128: 128-byte swizzle: row r at 128 * r, its 16-byte chunk c stored at chunk c ^ (r % 8), 8-row
//        atoms of 1024 bytes (SBO; LBO unused), tiles 1024-byte aligned; slice s starts at 32 * s and
//        the hardware applies the XOR to the address it computes.
// One instruction's K slice is always 32 bytes: 16 f16/bf16, 8 tf32, 32 e4m3/s8 elements.
// Default: RS, 128-byte swizzle, 2 warpgroups. On an H200 (2026-11-30) every combination reached
// 98-100% of the tensor rate at the clock the SMs counted; RS reads a fifth less shared memory,
// draws less power and so ran FP16/FP8 1-3% faster under the 700 W cap. The SASS is one HGMMA
// (QGMMA for e4m3, IGMMA for s8) after another, a WARPGROUP.DEPBAR per group, no spills.
// The descriptor (PTX ISA, "Matrix Descriptor Format"): start address, LBO and SBO in 16-byte units
// at bits 0, 16 and 32; the swizzle mode in bits 62-63 (0 none, 1 = 128 B).
//
// Verification runs the same kernel for one loop trip and compares every accumulator of every
// warpgroup of every CTA with the host's exact product, mapped through the documented accumulator
// layout; a wrong descriptor, layout or fragment, or a dead loop, fails.
//
// This file holds the kernel; the host side (layouts, tiles, fragments, reference, verification,
// the measurement) is tensor_wgmma_host.cpp, the instruction structs tensor_wgmma_ops.hpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "compute_device.hpp"
#include "tensor_wgmma_ops.hpp"

namespace roofline {
namespace compute {
namespace wgmma {
namespace {
using namespace ops;

// The kernel's parameter type: KernelArgs under the name (and in the namespace) the kernel has
// always been compiled with, so its symbol stays what profiles and earlier builds show.
struct Args : KernelArgs {};

template <class Op, bool kRegA>
__global__ void __launch_bounds__(max_warpgroups<kRegA>() * 128, 1) wgmma_kernel(const __grid_constant__ Args args) {
#if ROOFLINE_WGMMA_COMPILED
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* smem = smem_raw + ((kAlign - (raw & (kAlign - 1))) & (kAlign - 1));
  const int warpgroups = blockDim.x / 128;
  const int words = (args.b_bytes + warpgroups * args.a_bytes) / 16;
  uint4* s16 = reinterpret_cast<uint4*>(smem);
  for (int i = threadIdx.x; i < words; i += blockDim.x) s16[i] = args.image[i];
  // The tensor cores read shared memory through the async proxy: make the generic-proxy stores
  // above visible to it before the barrier.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  ClockProbe probe;
  if (threadIdx.x == 0) probe_start(probe);

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t b_addr = base, a_addr = base + args.b_bytes + wg * args.a_bytes;
  uint64_t da[kSteps], db[kSteps];
  uint32_t af[kSteps][4];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    db[s] = args.desc_b | (((b_addr + s * args.step_bytes) & 0x3FFFF) >> 4);
    if constexpr (kRegA) {
#pragma unroll
      for (int r = 0; r < 4; ++r) af[s][r] = args.a_frags[((wg * kSteps + s) * 4 + r) * 128 + t];
    } else {
      da[s] = args.desc_a | (((a_addr + s * args.step_bytes) & 0x3FFFF) >> 4);
    }
  }

  typename Op::Acc d[Op::kRegs];
#pragma unroll
  for (int i = 0; i < Op::kRegs; ++i) d[i] = 0;
  fence();  // orders the register writes above (accumulators, A fragments) before the first wgmma
  for (long long it = 0; it < args.iterations; ++it) {
#pragma unroll
    for (int j = 0; j < kMmasPerGroup; ++j) {
      if constexpr (kRegA) Op::run_rs(d, af[j % kSteps], db[j % kSteps]);
      else Op::run(d, da[j % kSteps], db[j % kSteps]);
    }
    commit();
    wait<1>();  // one group stays in flight while the next is issued
  }
  wait<0>();
  if (threadIdx.x == 0) probe_stop(probe, args.probe);

  typename Op::Acc* out = static_cast<typename Op::Acc*>(args.out);
  const long long slot = static_cast<long long>(blockIdx.x) * warpgroups + wg;
#pragma unroll
  for (int i = 0; i < Op::kRegs; ++i) out[(slot * Op::kRegs + i) * 128 + t] = d[i];
#else
  if (threadIdx.x == 0 && blockIdx.x == 0) *args.status = kStatusNotCompiled;
#endif
}

}  // namespace

namespace ops {

template <class Op>
const void* wgmma_kernel_fn(bool reg_a) {
  return reg_a ? reinterpret_cast<const void*>(wgmma_kernel<Op, true>)
               : reinterpret_cast<const void*>(wgmma_kernel<Op, false>);
}

template <class Op>
void launch_wgmma_kernel(bool reg_a, int grid, int block, int smem, cudaStream_t s, const KernelArgs& args) {
  Args a;
  static_cast<KernelArgs&>(a) = args;
  if (reg_a) wgmma_kernel<Op, true><<<grid, block, smem, s>>>(a);
  else wgmma_kernel<Op, false><<<grid, block, smem, s>>>(a);
}

// Every instruction's two kernels, for the host side to launch.
#define ROOFLINE_WGMMA_KERNEL(Op)                                       \
  template const void* wgmma_kernel_fn<ops::Op>(bool);                  \
  template void launch_wgmma_kernel<ops::Op>(bool, int, int, int, cudaStream_t, const KernelArgs&);
ROOFLINE_WGMMA_KERNEL(F16)
ROOFLINE_WGMMA_KERNEL(BF16)
ROOFLINE_WGMMA_KERNEL(TF32)
ROOFLINE_WGMMA_KERNEL(E4M3)
ROOFLINE_WGMMA_KERNEL(S8)
#undef ROOFLINE_WGMMA_KERNEL

}  // namespace ops
}  // namespace wgmma
}  // namespace compute
}  // namespace roofline
