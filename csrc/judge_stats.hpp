// The judge's two passes over a candidate's output on the GPU (python/roofline_ext/judge/):
//   compare_stats: every statistic the strict comparison needs from two equal-length arrays, in one
//                  read of each (the torch path took a float64 copy, a temporary per product and a
//                  host round trip per statistic: 56 ms for 1.6 G fp32 elements on an H200);
//   checksum:      a position-dependent 64-bit checksum of raw bytes, the judge's digest of the
//                  tensors it holds (its inputs' pristine copies, the reference's weights).
// Both run on the caller's stream (torch's current stream) and wait for that stream only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace roofline {

// Sums over the elements of a (the reference) and b (the candidate), accumulated in float64.
// Elements where either value is NaN or Inf are only counted (nonfinite): the caller then takes
// its exact elementwise path, which also checks where they are.
struct CompareStats {
  std::uint64_t n = 0;
  double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0, sdd = 0;  // sum of a, b, a^2, b^2, ab, (b-a)^2
  double max_abs = 0;                                         // max |b - a|
  double b_min = 0, b_max = 0;
  std::uint64_t bad = 0;        // elements with |b - a| > tol + tol * |a|
  std::uint64_t nonfinite = 0;  // elements where a or b is NaN/Inf (the sums skip them)
};

// dtype: "float32", "float64", "float16" or "bfloat16". Pointers are device pointers of `device`.
CompareStats compare_stats(std::uintptr_t a, std::uintptr_t b, std::size_t n, const std::string& dtype,
                           double tol, std::uintptr_t stream, int device);

// Sum over 32-bit words w_i of mix64(w_i, i) mod 2^64 (the tail of fewer than 4 bytes as one
// zero-padded word): any changed word changes it, and so does moving one, with overwhelming odds.
std::uint64_t checksum(std::uintptr_t ptr, std::size_t bytes, std::uintptr_t stream, int device);

}  // namespace roofline
