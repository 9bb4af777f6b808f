// Verification of the bandwidth family, shared by its translation units: how a pattern's output is checked, the seeds its expected words come from, what checking
// one configuration needs, and the deliberate fault. What a result reports of its check
// (Verification) and the fault type (Fault) are every family's, in verification.hpp; the
// definitions are in bandwidth_verify.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "bandwidth.hpp"

namespace roofline {
namespace bw {

struct PatternSpec;  // bandwidth_common.hpp

// How a pattern's output is checked (a bit set: the mix does both).
constexpr unsigned kChecksum = 1;   // the kernel folded every word it read; the host's sum must match
constexpr unsigned kSpotCheck = 2;  // regions of the destination must hold the expected words

// Seeds of one measurement's buffers and the key of its stores: what expected words come from.
struct Seeds {
  std::uint32_t run = 0;          // the measurement's seed (picks the spot-check regions)
  std::uint32_t src[2] = {0, 0};  // per source buffer
  std::uint32_t fill_key = 0;     // write / mix stores
};

Seeds seeds_of(std::uint32_t seed);

// The word a pattern's destination must hold at index i (the pattern table's spot-check references):
// write's (and the mix's) stores, copy's source, triad's fma.
std::uint32_t expect_fill(const Seeds& s, std::uint64_t i);
std::uint32_t expect_copy(const Seeds& s, std::uint64_t i);
std::uint32_t expect_triad(const Seeds& s, std::uint64_t i);

// What verifying one configuration needs besides the pattern's row.
struct CheckInputs {
  const std::uint32_t* partials = nullptr;  // checksum: the per-block sums the kernel wrote
  unsigned blocks = 0;
  std::uint64_t read_words = 0;             // checksum: words the kernel should have folded
  std::uint32_t expected_sum = 0;           // checksum: the host's sum of them (mod 2^32)
  const std::uint32_t* dst = nullptr;       // spot check: the destination
  std::uint64_t dst_words = 0;
  Seeds seeds;
};

// Checks the output the timed launches left, as the pattern's row says; raises VerificationError.
// The read-backs are queued on the stream that ran the launches, so they follow the last of them.
void verify(cudaStream_t s, const PatternSpec& p, const CheckInputs& in, Verification& v);

// The vectors a streaming pattern's kernel covers under `fault` (mix and l2_read cut whole chunks).
std::uint64_t apply_fault(std::uint64_t nvec, Fault fault);

}  // namespace bw
}  // namespace roofline
