// The data and the host-side references of the bandwidth and shared-memory kernels: the seeded
// words the kernels read, the words they must write, the checksums they must produce, and which
// regions a spot check compares.
//
// One header for both sides so that host and device compute the same bits: under nvcc the word
// functions are __host__ __device__; under a plain C++ compiler (csrc/tests/host_reference_test.cpp,
// which CI builds with g++ and runs without a GPU) they are ordinary inline functions. Nothing here
// needs CUDA headers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__CUDACC__)
#define ROOFLINE_HD __host__ __device__ __forceinline__
#else
#define ROOFLINE_HD inline
#endif

namespace roofline {
namespace ref {

// murmur3's finaliser: a bijection on 32 bits with good avalanche, about 8 integer operations.
ROOFLINE_HD std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

// Key of the 2^32-word segment that word i lies in: lets the host hoist it out of its loops.
ROOFLINE_HD std::uint32_t segment_key(std::uint32_t seed, std::uint64_t i) {
  return mix32(seed + static_cast<std::uint32_t>(i >> 32) * 0x9e3779b9u);
}

// Source word i of a buffer filled with `seed`: never a constant, so zeros cannot pass for data.
ROOFLINE_HD std::uint32_t data_word(std::uint32_t seed, std::uint64_t i) {
  return mix32(static_cast<std::uint32_t>(i) ^ segment_key(seed, i));
}

// A float in [-1, 1) from the top 24 bits of the hash. Every step is exact in float32, so host and
// device produce the same bits.
ROOFLINE_HD float word_to_float(std::uint32_t h) {
  return static_cast<float>(h >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

// What the write (and mix) patterns store: one multiply per 16-byte vector and an add + xor per
// word, cheap enough that the store stream, not the arithmetic, limits the kernel; still
// index-dependent, so a store to the wrong place fails verification.
constexpr std::uint32_t kFillMul = 0x9e3779b1u;
ROOFLINE_HD std::uint32_t fill_word(std::uint32_t key, std::uint64_t i) {
  return (static_cast<std::uint32_t>(i) * kFillMul) ^ key;
}

constexpr float kTriadScalar = 1.5f;

// Distinct seeds for the buffers (and shared-memory blocks) of one measurement.
ROOFLINE_HD std::uint32_t buffer_seed(std::uint32_t seed, int buffer) {
  return mix32(seed ^ (0x632be5abu * static_cast<std::uint32_t>(buffer + 1)));
}

// Word i of the triad destination a = fma(s, c, b), as bits. std::fmaf is correctly rounded, as
// the device's __fmaf_rn is, so the comparison is bit-exact.
inline std::uint32_t triad_word(std::uint32_t seed_b, std::uint32_t seed_c, std::uint64_t i) {
  const float b = word_to_float(data_word(seed_b, i)), c = word_to_float(data_word(seed_c, i));
  const float a = std::fmaf(kTriadScalar, c, b);
  std::uint32_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  return bits;
}

// Sum mod 2^32 of data_word(seed, i) for i in [lo, hi): what a read kernel folds a buffer into.
inline std::uint32_t sum_range(std::uint32_t seed, std::uint64_t lo, std::uint64_t hi) {
  std::uint32_t s = 0;
  while (lo < hi) {
    const std::uint64_t seg_end = std::min(hi, ((lo >> 32) + 1) << 32);
    const std::uint32_t key = segment_key(seed, lo);
    const std::uint32_t base = static_cast<std::uint32_t>(lo);
    const std::uint64_t count = seg_end - lo;
    for (std::uint64_t t = 0; t < count; ++t) s += mix32((base + static_cast<std::uint32_t>(t)) ^ key);
    lo = seg_end;
  }
  return s;
}

// The same over [0, n) on all host cores: a 4 GiB buffer is 2^30 words, about a second on one core.
inline std::uint32_t checksum(std::uint32_t seed, std::uint64_t n) {
  unsigned nt = std::thread::hardware_concurrency();
  nt = std::max(1u, std::min(nt, 32u));
  if (n < (1ull << 22)) nt = 1;
  std::vector<std::uint32_t> part(nt, 0);
  std::vector<std::thread> threads;
  unsigned started = 0;
  try {
    for (unsigned t = 1; t < nt; ++t) {
      threads.emplace_back([&part, seed, n, nt, t] { part[t] = sum_range(seed, n * t / nt, n * (t + 1) / nt); });
      started = t;
    }
  } catch (const std::system_error&) {
    // No more threads to be had: the calling thread does the ranges that did not start.
  }
  std::uint32_t s = sum_range(seed, 0, n / nt);
  for (unsigned t = started + 1; t < nt; ++t) s += sum_range(seed, n * t / nt, n * (t + 1) / nt);
  for (auto& th : threads) th.join();
  for (unsigned t = 1; t <= started; ++t) s += part[t];
  return s;
}

// checksum(seed, n), remembered per (seed, n) for the life of the process. The sum is a pure
// function of its arguments, so a remembered value is exactly the recomputed one; what it saves is
// the host's pass over the words (a 4 GiB buffer takes ~0.1 s on 16 cores, ~1 s on one) on every
// call after the first. The sustained HBM phase calls the read pattern back to back for half a
// minute: without this, the card idled during each pass and the read figure was flattered.
// Up to kChecksumMemoSize entries (the calibration uses one buffer size and one seed).
constexpr std::size_t kChecksumMemoSize = 16;
inline std::uint32_t checksum_memo(std::uint32_t seed, std::uint64_t n) {
  static std::mutex mu;
  static std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint32_t> memo;
  const auto key = std::make_pair(seed, n);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = memo.find(key);
    if (it != memo.end()) return it->second;
  }
  const std::uint32_t s = checksum(seed, n);  // outside the lock: it takes a while
  std::lock_guard<std::mutex> lock(mu);
  if (memo.size() >= kChecksumMemoSize) memo.clear();
  memo.emplace(key, s);
  return s;
}

// Which words a spot check compares: the first and the last region (boundaries, the tail loop) and
// `random_regions` seeded-random ones, each `len` words (64 KiB, or the whole buffer if smaller).
struct SpotRegions {
  std::uint64_t len = 0;
  std::vector<std::uint64_t> starts;
};
constexpr std::uint64_t kSpotRegionWords = 16384;  // 64 KiB
constexpr int kSpotRandomRegions = 30;

inline SpotRegions spot_regions(std::uint64_t nwords, std::uint32_t seed) {
  SpotRegions r;
  r.len = std::min(kSpotRegionWords, nwords);
  r.starts.push_back(0);
  r.starts.push_back(nwords - r.len);
  std::mt19937_64 rng(0x5eed0000ull ^ seed);
  for (int k = 0; k < kSpotRandomRegions && nwords > r.len; ++k) r.starts.push_back(rng() % (nwords - r.len + 1));
  return r;
}

// Words of `got` (copied back from word `start` on) that differ from expected(start + k).
struct Mismatches {
  std::uint64_t count = 0;
  std::uint64_t first = 0;  // word index of the first difference (valid when count > 0)
};

template <typename Expected>
Mismatches compare_words(const std::uint32_t* got, std::uint64_t start, std::uint64_t len, Expected&& expected) {
  Mismatches m;
  for (std::uint64_t k = 0; k < len; ++k) {
    if (got[k] != expected(start + k)) {
      if (!m.count) m.first = start + k;
      ++m.count;
    }
  }
  return m;
}

// --- the read:write mix -----------------------------------------------------------------------
// A mix of R read parts to W write parts reads a source of R units and writes a destination of W
// units, where a unit is a whole number of the kernel's chunks (U x threads 16-byte vectors per
// read or write part). The larger of the two buffers gets (about) the requested bytes.
struct MixLayout {
  std::uint64_t unit_vectors = 0;  // 16-byte vectors per part
  std::uint64_t src_vectors = 0;   // R x unit
  std::uint64_t dst_vectors = 0;   // W x unit
};

// Zero unit_vectors when `bytes` is too small for one chunk per part.
inline MixLayout mix_layout(std::uint64_t bytes, int read_parts, int write_parts, std::uint64_t chunk_vectors) {
  MixLayout m;
  const std::uint64_t parts = static_cast<std::uint64_t>(std::max(read_parts, write_parts));
  if (parts == 0 || chunk_vectors == 0) return m;
  m.unit_vectors = bytes / 16 / parts / chunk_vectors * chunk_vectors;
  m.src_vectors = m.unit_vectors * static_cast<std::uint64_t>(read_parts);
  m.dst_vectors = m.unit_vectors * static_cast<std::uint64_t>(write_parts);
  return m;
}

// --- the L2 read kernel's spread order -------------------------------------------------------------
// Block b of `grid` walks virtual chunks [total x b / grid, total x (b + 1) / grid) of
// total = nchunks x passes, mapped into the working set mod nchunks: it starts at
// nchunks x frac(passes x b / grid), so g = gcd(passes, grid) blocks share each start and read the
// same chunks in step all launch. Such reads ran faster on an H200 than a working set of distinct
// reads can (10.1 TB/s at 18 MiB with g = 6, 9.0-9.3 with g = 1), so the host takes the passes
// nearest `want` that share no factor with the grid (the larger of two equally near).
inline std::uint64_t coprime_passes(std::uint64_t want, std::uint64_t grid) {
  if (want == 0) want = 1;
  for (std::uint64_t d = 0; d <= want + grid; ++d) {
    if (std::gcd(want + d, grid) == 1) return want + d;
    if (d < want && std::gcd(want - d, grid) == 1) return want - d;
  }
  return want;  // not reached: some p in [want, want + grid] is 1 mod grid
}

// Where block b's stretch starts in the working set (in chunks).
inline std::uint64_t spread_start(std::uint64_t nchunks, std::uint64_t passes, std::uint64_t grid, std::uint64_t b) {
  return nchunks * passes * b / grid % nchunks;
}

// --- shared memory ------------------------------------------------------------------------------
// Each block of the shared-memory kernel fills `words` 32-bit words with data_word(block_seed(b), i)
// and each of its `threads` threads reads the words of its lanes of every pass (stride: threads x
// width words), folding them into one sum mod 2^32. One thread's expected sum after `passes` passes:
ROOFLINE_HD std::uint32_t smem_block_seed(std::uint32_t seed, std::uint32_t block) {
  return buffer_seed(seed, static_cast<int>(block & 0x7fffffffu) + 16);
}

// Words per access: 4 (16-byte loads) or 1 (4-byte loads). Thread t reads words
// [(k x threads + t) x width, ... + width) for k in [0, words / (threads x width)).
inline std::uint32_t smem_thread_sum(std::uint32_t block_seed, std::uint32_t thread, std::uint32_t threads,
                                     std::uint32_t width, std::uint64_t words, std::uint64_t passes) {
  std::uint32_t s = 0;
  const std::uint64_t stride = static_cast<std::uint64_t>(threads) * width;
  for (std::uint64_t base = static_cast<std::uint64_t>(thread) * width; base < words; base += stride)
    for (std::uint32_t c = 0; c < width; ++c) s += data_word(block_seed, base + c);
  return s * static_cast<std::uint32_t>(passes);  // mod 2^32, like the kernel's additions
}

}  // namespace ref
}  // namespace roofline
