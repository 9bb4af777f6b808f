// The host link's device side as hostlink.cpp sees it: the word hash both sides compute and the
// launches of the two kernels in hostlink_kernels.cu (the caller checks them with CUDA_CHECK_LAUNCH).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace roofline {
namespace link {

// A 32-bit integer hash (xorshift-multiply rounds): host and device compute the same bits.
__host__ __device__ __forceinline__ std::uint32_t link_word(std::uint32_t seed, std::uint64_t i) {
  std::uint32_t x = static_cast<std::uint32_t>(i) * 0x9e3779b1u + seed +
                    static_cast<std::uint32_t>(i >> 32) * 0x85ebca77u;
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Fills n words at p with link_word(seed, i), on stream s.
void launch_fill(int grid, int threads, cudaStream_t s, std::uint32_t* p, std::uint64_t n, std::uint32_t seed);
// Adds every word of nvec 16-byte vectors at p into *out (mod 2^32), on stream s.
void launch_sum(int grid, int threads, cudaStream_t s, const uint4* p, std::uint64_t nvec, std::uint32_t* out);

}  // namespace link
}  // namespace roofline
