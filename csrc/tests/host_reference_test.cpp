// Host-only test of csrc/host_reference.hpp: the words, checksums and spot-check regions the
// bandwidth and shared-memory kernels are verified against. Built with a plain C++ compiler (no
// CUDA) by tests/test_host_reference.py, so CI checks the references without a GPU.
//
// It checks what can be checked from C++ alone (internal consistency: the parallel checksum equals
// the serial one, segment crossings, region bounds, mismatch counting) and prints the values the
// Python side recomputes independently (murmur3's finaliser, the fill and triad words, small
// checksums, the shared-memory thread sums) as one JSON object on stdout. Exit code 0 = every C++
// check passed; failures are printed on stderr, one line each.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "host_reference.hpp"

namespace ref = roofline::ref;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

// A plain loop over data_word: what sum_range and checksum must agree with.
std::uint32_t brute_sum(std::uint32_t seed, std::uint64_t lo, std::uint64_t hi) {
  std::uint32_t s = 0;
  for (std::uint64_t i = lo; i < hi; ++i) s += ref::data_word(seed, i);
  return s;
}

void check_checksums() {
  const std::uint32_t seed = ref::buffer_seed(12345u, 0);
  // Across a 2^32-word segment boundary, where the key changes.
  const std::uint64_t edge = 1ull << 32;
  check(ref::sum_range(seed, edge - 3000, edge + 5000) == brute_sum(seed, edge - 3000, edge + 5000),
        "sum_range across a segment boundary");
  // Large enough for the threaded path (>= 2^22 words), odd so the ranges split unevenly.
  const std::uint64_t n = (1ull << 22) + 12345;
  check(ref::checksum(seed, n) == ref::sum_range(seed, 0, n), "threaded checksum == serial sum");
  check(ref::checksum(seed, 1000) == brute_sum(seed, 0, 1000), "small checksum == brute sum");
  check(ref::checksum(seed, 0) == 0, "empty checksum is 0");
  // The memo gives the computed sum, first time and after, and keeps (seed, n) pairs apart.
  check(ref::checksum_memo(seed, n) == ref::checksum(seed, n), "memo, first call == checksum");
  check(ref::checksum_memo(seed, n) == ref::checksum(seed, n), "memo, repeated call == checksum");
  check(ref::checksum_memo(seed + 1, n) == ref::checksum(seed + 1, n), "memo keeps seeds apart");
  check(ref::checksum_memo(seed, n - 1) == ref::checksum(seed, n - 1), "memo keeps sizes apart");
  for (std::uint32_t k = 0; k < 2 * ref::kChecksumMemoSize; ++k)  // past the cap: still exact
    check(ref::checksum_memo(seed + k, 4096) == brute_sum(seed + k, 0, 4096), "memo past its cap");
}

void check_spot_regions() {
  const std::uint64_t n = 1ull << 24;
  const ref::SpotRegions r = ref::spot_regions(n, 7u);
  check(r.len == ref::kSpotRegionWords, "region length is 64 KiB");
  check(r.starts.size() == 2 + ref::kSpotRandomRegions, "first, last and 30 random regions");
  check(r.starts[0] == 0 && r.starts[1] == n - r.len, "first and last region at the buffer's ends");
  bool inside = true;
  for (auto s : r.starts) inside = inside && s + r.len <= n;
  check(inside, "every region inside the buffer");
  check(ref::spot_regions(n, 7u).starts == r.starts, "regions are a function of the seed");
  check(ref::spot_regions(n, 8u).starts != r.starts, "another seed picks other regions");
  const ref::SpotRegions small = ref::spot_regions(100, 7u);
  check(small.len == 100 && small.starts.size() == 2, "a buffer under one region is checked whole");
}

void check_compare() {
  std::vector<std::uint32_t> got(64);
  for (std::uint64_t k = 0; k < got.size(); ++k) got[k] = ref::fill_word(5u, 1000 + k);
  auto expected = [](std::uint64_t i) { return ref::fill_word(5u, i); };
  check(ref::compare_words(got.data(), 1000, got.size(), expected).count == 0, "matching words pass");
  got[17] = 0xffffffffu;  // a poisoned, never-written word
  got[40] ^= 1u;
  const ref::Mismatches m = ref::compare_words(got.data(), 1000, got.size(), expected);
  check(m.count == 2 && m.first == 1017, "two wrong words found, the first at its index");
}

void check_mix_layout() {
  const ref::MixLayout m = ref::mix_layout(4ull << 30, 4, 1, 256);
  check(m.src_vectors == 4 * m.unit_vectors && m.dst_vectors == m.unit_vectors, "4:1 layout");
  check(m.unit_vectors % 256 == 0 && m.src_vectors * 16 <= (4ull << 30), "whole chunks, within the bytes");
  check(m.src_vectors * 16 > (4ull << 30) - 4 * 256 * 16, "the larger buffer gets about the bytes asked");
  const ref::MixLayout w = ref::mix_layout(1 << 20, 1, 2, 1024);
  check(w.dst_vectors == 2 * w.src_vectors && w.dst_vectors * 16 <= (1u << 20), "1:2 layout");
  check(ref::mix_layout(1000, 1, 1, 1024).unit_vectors == 0, "too small for one chunk: zero");
}

void check_smem_sums() {
  // The thread sums over a whole block add up to passes x the block's sum of words.
  const std::uint32_t key = ref::smem_block_seed(99u, 3);
  const std::uint32_t threads = 256, width = 4;
  const std::uint64_t words = 256ull * 8 * 4, passes = 3;
  std::uint32_t total = 0;
  for (std::uint32_t t = 0; t < threads; ++t) total += ref::smem_thread_sum(key, t, threads, width, words, passes);
  check(total == static_cast<std::uint32_t>(passes) * brute_sum(key, 0, words), "thread sums cover the buffer");
  std::uint32_t total1 = 0;
  for (std::uint32_t t = 0; t < threads; ++t) total1 += ref::smem_thread_sum(key, t, threads, 1, words / 4, 1);
  check(total1 == brute_sum(key, 0, words / 4), "4-byte loads cover the buffer");
  check(ref::smem_block_seed(99u, 3) != ref::smem_block_seed(99u, 4), "blocks get distinct seeds");
}

void print_values() {
  std::printf("{\"mix32\": [");
  const std::uint32_t xs[] = {0u, 1u, 2u, 0xdeadbeefu, 0xffffffffu, 12345u};
  for (int k = 0; k < 6; ++k) std::printf("%s[%u, %u]", k ? ", " : "", xs[k], ref::mix32(xs[k]));
  const std::uint32_t seed = 12345u;
  const std::uint32_t s0 = ref::buffer_seed(seed, 0), s1 = ref::buffer_seed(seed, 1), key = ref::buffer_seed(seed, 7);
  std::printf("], \"seeds\": [%u, %u, %u]", s0, s1, key);
  const std::uint64_t idx[] = {0, 1, 2, 1000, (1ull << 32) - 1, 1ull << 32, (1ull << 32) + 77};
  std::printf(", \"words\": [");
  for (int k = 0; k < 7; ++k)
    std::printf("%s[%llu, %u, %u, %u]", k ? ", " : "", static_cast<unsigned long long>(idx[k]), ref::data_word(s0, idx[k]),
                ref::fill_word(key, idx[k]), ref::triad_word(s0, s1, idx[k]));
  std::printf("], \"checksum_100000\": %u", ref::checksum(s0, 100000));
  const std::uint32_t bkey = ref::smem_block_seed(seed, 5);
  std::printf(", \"smem_block_seed_5\": %u, \"smem_thread_sums\": [", bkey);
  for (std::uint32_t t = 0; t < 4; ++t)
    std::printf("%s%u", t ? ", " : "", ref::smem_thread_sum(bkey, t * 37, 256, 4, 256ull * 8 * 4, 1000));
  std::printf("]}\n");
}

}  // namespace

// coprime_passes: coprime with the grid, nearest the wish; and then every block of a grid no larger
// than the working set starts at its own chunk (what "no two blocks read in step" rests on).
void check_coprime_passes() {
  for (std::uint64_t grid : {264ull, 1056ull, 528ull, 132ull, 1ull}) {
    for (std::uint64_t want = 1; want <= 300; ++want) {
      const std::uint64_t p = ref::coprime_passes(want, grid);
      check(std::gcd(p, grid) == 1, "coprime_passes(" + std::to_string(want) + ", " + std::to_string(grid) +
                                        ") = " + std::to_string(p) + " shares a factor with the grid");
      const std::uint64_t dist = p > want ? p - want : want - p;
      for (std::uint64_t q = want > dist ? want - dist + 1 : 1; q < want + dist; ++q)
        check(std::gcd(q, grid) != 1, "coprime_passes(" + std::to_string(want) + ", " + std::to_string(grid) +
                                          ") = " + std::to_string(p) + " but " + std::to_string(q) + " is nearer");
    }
  }
  for (std::uint64_t nchunks : {1408ull, 1152ull, 4096ull}) {  // 22, 18, 64 MiB of 16 KiB chunks
    const std::uint64_t grid = 1056, p = ref::coprime_passes(93, grid);
    std::vector<std::uint64_t> starts;
    for (std::uint64_t b = 0; b < grid; ++b) starts.push_back(ref::spread_start(nchunks, p, grid, b));
    std::sort(starts.begin(), starts.end());
    check(std::adjacent_find(starts.begin(), starts.end()) == starts.end(),
          "spread starts repeat with coprime passes at " + std::to_string(nchunks) + " chunks");
    std::vector<std::uint64_t> shared;  // and the old choice, 93 passes (gcd 3), does repeat them
    for (std::uint64_t b = 0; b < grid; ++b) shared.push_back(ref::spread_start(nchunks, 93, grid, b));
    std::sort(shared.begin(), shared.end());
    check(std::unique(shared.begin(), shared.end()) - shared.begin() == static_cast<long>(grid / 3),
          "93 passes over a 1056-block grid should give 352 distinct starts");
  }
}

int main() {
  check_checksums();
  check_spot_regions();
  check_compare();
  check_mix_layout();
  check_smem_sums();
  check_coprime_passes();
  print_values();
  if (failures) std::fprintf(stderr, "%d host reference check(s) failed\n", failures);
  return failures ? 1 : 0;
}
