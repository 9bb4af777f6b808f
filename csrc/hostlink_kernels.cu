// The host link's two kernels (hostlink.cpp says what each check does with them): the device's fill
// of the seeded words (d2h) and its sum of the words it received (h2d).
#include "hostlink_kernels.hpp"

namespace roofline {
namespace {

using link::link_word;

__global__ void fill_kernel(std::uint32_t* __restrict__ p, std::uint64_t n, std::uint32_t seed) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    p[i] = link_word(seed, i);
}

// Sum mod 2^32 of every word: per-thread sums, folded per warp, one atomicAdd per warp (unsigned
// addition wraps, so the order of the additions cannot change the result).
__global__ void sum_kernel(const uint4* __restrict__ p, std::uint64_t nvec, std::uint32_t* __restrict__ out) {
  std::uint32_t s = 0;
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < nvec;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    s += (v.x + v.y) + (v.z + v.w);
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, s);
}

}  // namespace

namespace link {

void launch_fill(int grid, int threads, cudaStream_t s, std::uint32_t* p, std::uint64_t n, std::uint32_t seed) {
  fill_kernel<<<grid, threads, 0, s>>>(p, n, seed);
}

void launch_sum(int grid, int threads, cudaStream_t s, const uint4* p, std::uint64_t nvec, std::uint32_t* out) {
  sum_kernel<<<grid, threads, 0, s>>>(p, nvec, out);
}

}  // namespace link
}  // namespace roofline
