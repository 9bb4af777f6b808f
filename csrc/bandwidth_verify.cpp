// Verification of the bandwidth family (bandwidth_verify.hpp): the seeds and expected words, the
// checksum and spot checks every pattern's row asks for, and the deliberate fault. bandwidth.cpp's
// header says what each pattern's check compares.
#include "bandwidth_verify.hpp"

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bandwidth_common.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "host_reference.hpp"

namespace roofline {
namespace bw {

Seeds seeds_of(std::uint32_t seed) {
  Seeds s;
  s.run = seed;
  s.src[0] = buffer_seed(seed, 0);
  s.src[1] = buffer_seed(seed, 1);
  s.fill_key = buffer_seed(seed, 7);
  return s;
}

std::uint32_t expect_fill(const Seeds& s, std::uint64_t i) { return ref::fill_word(s.fill_key, i); }
std::uint32_t expect_copy(const Seeds& s, std::uint64_t i) { return data_word(s.src[0], i); }
std::uint32_t expect_triad(const Seeds& s, std::uint64_t i) { return ref::triad_word(s.src[0], s.src[1], i); }

namespace {

// Copies the spot-check regions of the destination back and compares every word in them with
// `expected(i)`; returns the words compared.
template <typename Expected>
std::size_t spot_check(cudaStream_t s, const std::uint32_t* dev, std::uint64_t nwords, std::uint32_t seed,
                       const char* pattern, Expected&& expected) {
  const ref::SpotRegions regions = ref::spot_regions(nwords, seed);
  const std::uint64_t len = regions.len;
  std::vector<std::uint32_t> host(len);
  std::size_t checked = 0;
  for (std::uint64_t start : regions.starts) {
    download(s, host.data(), dev + start, len * sizeof(std::uint32_t));
    const ref::Mismatches bad = ref::compare_words(host.data(), start, len, expected);
    ROOFLINE_VERIFY(bad.count == 0, pattern << ": " << bad.count << " of " << len << " words from word " << start
                                            << " differ from the host's values; first at word " << bad.first
                                            << ": expected 0x" << std::hex << expected(bad.first) << ", got 0x"
                                            << host[bad.first - start] << std::dec
                                            << " (0xffffffff = never written)");
    checked += len;
  }
  return checked;
}

std::uint32_t device_checksum(cudaStream_t stream, const std::uint32_t* partials, unsigned blocks) {
  std::vector<std::uint32_t> host(blocks);
  download(stream, host.data(), partials, blocks * sizeof(std::uint32_t));
  std::uint32_t s = 0;
  for (std::uint32_t v : host) s += v;
  return s;
}

}  // namespace

std::uint64_t apply_fault(std::uint64_t nvec, Fault fault) {
  return fault == Fault::Short ? nvec - nvec / 16 : nvec;
}

void verify(cudaStream_t s, const PatternSpec& p, const CheckInputs& in, Verification& v) {
  if (p.check & kChecksum) {
    v.method = "checksum";
    v.checked = static_cast<long long>(in.read_words);
    v.expected = in.expected_sum;
    v.observed = device_checksum(s, in.partials, in.blocks);
    ROOFLINE_VERIFY(v.observed == v.expected, p.name << ": kernel checksum 0x" << std::hex << v.observed
                                                     << " != host checksum 0x" << v.expected << std::dec
                                                     << " over " << in.read_words << " words");
  }
  if (p.check & kSpotCheck) {
    v.checked += static_cast<long long>(spot_check(s, in.dst, in.dst_words, in.seeds.run, p.name,
                                                   [&](std::uint64_t i) { return p.expected(in.seeds, i); }));
    v.method = v.method.empty() ? "spot-check" : v.method + "+spot-check";
  }
  v.passed = true;  // every failed comparison above threw
}

}  // namespace bw
}  // namespace roofline
