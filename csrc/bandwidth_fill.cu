// The bandwidth family's data fill: every pattern's source buffers hold seeded hash values
// (bandwidth.cpp says why), written on the device by this kernel. The rest of the family's host
// code is in bandwidth.cpp (bandwidth_common.hpp declares fill_data there).
#include <cuda_runtime.h>

#include <cstdint>

#include "bandwidth_common.hpp"
#include "cuda_check.hpp"

namespace roofline {
namespace bw {
namespace {

// Fills n words with data_word (as_float = 0) or word_to_float(data_word) bits (as_float = 1).
__global__ void fill_data_kernel(std::uint32_t* __restrict__ p, std::uint64_t n, std::uint32_t seed,
                                 int as_float) {
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t h = data_word(seed, i);
    p[i] = as_float ? __float_as_uint(word_to_float(h)) : h;
  }
}

}  // namespace

void fill_data(std::uint32_t* p, std::uint64_t nwords, std::uint32_t seed, bool as_float, int sms,
               cudaStream_t s) {
  fill_data_kernel<<<static_cast<unsigned>(sms) * 8, 256, 0, s>>>(p, nwords, seed, as_float ? 1 : 0);
  CUDA_CHECK_LAUNCH();
}

}  // namespace bw
}  // namespace roofline
