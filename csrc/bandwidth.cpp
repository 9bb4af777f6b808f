// The bandwidth family's shared host code: the pattern table, the configuration checks, grids,
// buffers and the timed loop every pattern runs through, and what this build can run. See
// bandwidth.hpp for the contract. The family is split by concern:
//   bandwidth_kernels.hpp    load/store flavours, instantiation lists, one dispatch for every family
//   bandwidth_common.hpp     the pattern table's row and the helpers below, which every pattern uses
//   bandwidth_fill.cu        the kernel that fills every pattern's sources with seeded data
//   bandwidth_hbm.cu         read, write, copy, triad (and the copy engines): run_bandwidth
//   bandwidth_l2.cu          the L2 read kernels: run_l2_read
//   bandwidth_mix.cu         the read:write mix kernel: run_mix
//   bandwidth_verify.hpp/.cpp seeds, expected words, checksum and spot checks, the fault
// This file and bandwidth_verify.cpp hold no kernel: they compile with the host files, beside
// nvcc's per-architecture passes over the .cu files, which would otherwise parse them once per
// architecture (issue 28).
//
// Data. Sources hold seeded hash values (never zeros: zeros draw less power and hide unwritten
// output). The hash is a pure function of (seed, word index), computed identically on host and
// device, so every result can be checked exactly:
//   read   : the kernel folds every 32-bit word into a sum mod 2^32, compared with the host's sum;
//   write  : words are a cheap index function (one multiply-add per word), spot-checked;
//   copy   : destination words must equal the source hash at the same index, spot-checked;
//   triad  : a = fma(s, c, b) on float32 values in [-1, 1); the host computes the same correctly
//            rounded fma (std::fmaf), so the comparison is bit-exact, spot-checked;
//   mix    : R read parts folded into a checksum and W write parts of write's words, both checked.
// Each pattern is one row of kPatterns (buffers, roles, check, expected words, kernels), so setting a
// pattern up and verifying it is the same code for every pattern.
// Destinations are poisoned (all bits set, a NaN as float) before every configuration, so an element
// the kernel did not write fails its check instead of passing with an earlier configuration's value.
#include "bandwidth.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bandwidth_common.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "host_clock.hpp"
#include "host_reference.hpp"
#include "timing.hpp"

namespace roofline {
namespace bw {

Ld parse_load(const std::string& name) {
  for (const auto& n : kLoadNames)
    if (name == n.name) {
      if (!has_load(n.ld)) throw std::invalid_argument("load flavour '" + name + "' is not compiled into this build");
      return n.ld;
    }
  throw std::invalid_argument("unknown load flavour '" + name + "'");
}

St parse_store(const std::string& name) {
  for (const auto& n : kStoreNames)
    if (name == n.name) {
      if (!has_store(n.st)) throw std::invalid_argument("store flavour '" + name + "' is not compiled into this build");
      return n.st;
    }
  throw std::invalid_argument("unknown store flavour '" + name + "'");
}

namespace {

// ----------------------------------------------------------------------------------------------
// The pattern table: one row (PatternSpec, bandwidth_common.hpp) per pattern.

const PatternSpec kPatterns[] = {
    {Pattern::Read, "read", 1, false, false, false, kChecksum, nullptr, &pick_read_kernel,
     &ReadTraits::unroll_ok, &ReadTraits::load_ok, "is not compiled into this build"},
    {Pattern::Write, "write", 0, false, true, false, kSpotCheck, &expect_fill, &pick_write_kernel,
     &WriteTraits::unroll_ok, nullptr, ""},
    {Pattern::Copy, "copy", 1, false, true, true, kSpotCheck, &expect_copy, &pick_copy_kernel,
     &StreamTraits::unroll_ok, &StreamTraits::load_ok, "is not compiled for copy/triad in this build"},
    {Pattern::Triad, "triad", 2, true, true, false, kSpotCheck, &expect_triad, &pick_triad_kernel,
     &StreamTraits::unroll_ok, &StreamTraits::load_ok, "is not compiled for copy/triad in this build"},
    {Pattern::Mix, "mix", 1, false, true, false, kChecksum | kSpotCheck, &expect_fill, nullptr,
     &MixTraits::unroll_ok, &MixTraits::load_ok, "is not compiled for the mix kernel in this build"},
    // The L2 read's "load" names a variant (kL2Variants), checked by parse_l2_variant; its kernels
    // come from l2_kernel (both in bandwidth_l2.cu).
    {Pattern::L2Read, "l2_read", 1, false, false, false, kChecksum, nullptr, nullptr, &has_unroll, nullptr, ""},
};

// The streaming patterns a caller may name (mix and l2_read have functions of their own).
constexpr Pattern kStreaming[] = {Pattern::Read, Pattern::Write, Pattern::Copy, Pattern::Triad};

}  // namespace

const PatternSpec& spec_of(Pattern p) {
  for (const auto& s : kPatterns)
    if (s.id == p) return s;
  throw std::logic_error("pattern missing from kPatterns");
}

const PatternSpec& parse_pattern(const std::string& name) {
  for (Pattern p : kStreaming)
    if (name == spec_of(p).name) return spec_of(p);
  throw std::invalid_argument("unknown bandwidth pattern '" + name + "' (read, write, copy, triad)");
}

int buffers_of(const PatternSpec& p) { return p.sources + (p.writes ? 1 : 0); }

namespace {

// ----------------------------------------------------------------------------------------------
// Host side.

void validate_copy_engine(const BwConfig& c, const PatternSpec& p) {
  if (!p.copy_engines)
    throw std::invalid_argument("load '" + c.load + "' exists for the copy pattern only");
  if (is_memcpy(c)) return;
  if (c.threads != 32) throw std::invalid_argument("load 'bulk' is driven by one warp: threads must be 32");
  if (c.unroll < 1 || c.unroll > static_cast<int>(kMaxBulkStages))
    throw std::invalid_argument("load 'bulk': unroll is the number of stages, 1 to " + std::to_string(kMaxBulkStages));
  if (c.bulk_bytes < 16 || c.bulk_bytes % 16 || c.bulk_bytes > (1 << 20))
    throw std::invalid_argument("load 'bulk': bulk_bytes must be a multiple of 16 up to 1 MiB");
}

}  // namespace

void validate_common(int reps, int warmup, const std::vector<BwConfig>& configs, const PatternSpec& p) {
  if (reps < 1) throw std::invalid_argument("reps must be at least 1");
  if (warmup < 0) throw std::invalid_argument("warmup must not be negative");
  if (configs.empty()) throw std::invalid_argument("no configurations given");
  for (const auto& c : configs) {
    if (c.threads < 32 || c.threads > 1024 || c.threads % 32)
      throw std::invalid_argument("threads must be a multiple of 32 in [32, 1024], got " + std::to_string(c.threads));
    if (c.blocks_per_sm < 0) throw std::invalid_argument("blocks_per_sm must not be negative");
    if (is_memcpy(c) || is_bulk(c)) {
      validate_copy_engine(c, p);
      continue;
    }
    if (!p.unroll_ok(c.unroll))
      throw std::invalid_argument(std::string(p.name) + ": unroll " + std::to_string(c.unroll) +
                                  " is not compiled into this build");
    parse_store(c.store);
    if (!p.load_ok) continue;  // the pattern loads nothing: the load flavour is ignored
    if (!p.load_ok(parse_load(c.load)))
      throw std::invalid_argument(std::string(p.name) + ": load flavour '" + c.load + "' " + p.load_rule);
  }
}

void check_free_memory(int device, std::size_t needed) {
  std::size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (needed > free_b) {
    std::ostringstream s;
    s << "bandwidth measurement needs " << needed << " bytes of device memory but device " << device
      << " has " << free_b << " free of " << total_b << "; ask for smaller buffers";
    throw CoreError(s.str());
  }
}

int sm_count_of(int device) {
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

Grid grid_for(int device, const Kernel& k, const BwConfig& c, int sms, std::uint64_t chunks) {
  Grid g;
  if (is_memcpy(c)) return g;  // the driver picks its own grid
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (c.load == "nc_na_l2pf256" && major < 8) {
    g.skipped = "the L2::256B prefetch hint needs compute capability 8.0 or newer";
    return g;
  }
  if (is_bulk(c)) {
    int optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (major < 9) {
      g.skipped = "the copy engine (cp.async.bulk) needs compute capability 9.0 or newer";
      return g;
    }
    if (k.smem > static_cast<std::size_t>(optin)) {
      g.skipped = "ring of " + std::to_string(k.smem) + " bytes exceeds the " + std::to_string(optin) +
                  " bytes of shared memory a block may have";
      return g;
    }
    CUDA_CHECK(cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(k.smem)));
  }
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&g.occupancy, k.fn, c.threads, k.smem));
  if (g.occupancy < 1) {
    g.skipped = "no block of " + std::to_string(c.threads) + " threads at unroll " + std::to_string(c.unroll) +
                " fits on an SM (registers or shared memory)";
    return g;
  }
  std::uint64_t blocks = c.blocks_per_sm > 0
                             ? static_cast<std::uint64_t>(sms) * std::min(c.blocks_per_sm, g.occupancy)
                             : std::max<std::uint64_t>(chunks, 1);
  g.blocks = static_cast<unsigned>(std::min<std::uint64_t>(blocks, INT_MAX));
  return g;
}

namespace {

void poison(void* p, std::size_t bytes, cudaStream_t s) {
  // All bits set: a NaN as float32 and no hash value's likely twin; unwritten words then fail.
  fill(s, p, 0xff, bytes);
}

}  // namespace

BwResult result_shell(const PatternSpec& p, const BwConfig& c, const Grid& g, int sms, int warmup,
                      std::uint32_t seed) {
  BwResult r;
  r.pattern = p.name;
  r.config = c;
  r.grid = static_cast<int>(g.blocks);
  r.occupancy_blocks_per_sm = g.occupancy;
  r.sm_count = sms;
  r.warmup = warmup;
  r.seed = seed;
  r.skipped = g.skipped;
  return r;
}

void time_and_verify(const PatternSpec& p, const Kernel& k, const Grid& g, const BwConfig& c,
                     const LaunchArgs& args, std::size_t dst_bytes, std::size_t partial_bytes, int warmup,
                     int reps, cudaStream_t stream, CheckInputs in, BwResult& r) {
  if (args.dst && dst_bytes) poison(args.dst, dst_bytes, stream);
  if (args.partials && partial_bytes) poison(args.partials, partial_bytes, stream);
  r.timing = time_launches(stream, warmup, reps, [&](cudaStream_t s) {
    k.launch(g.blocks, static_cast<unsigned>(c.threads), k.smem, s, args);
    CUDA_CHECK_LAUNCH();
  });
  r.timed_end_s = steady_clock_s();
  in.blocks = g.blocks;
  verify(stream, p, in, r.verification);
}

}  // namespace bw

using namespace bw;

std::vector<int> bandwidth_unrolls(const std::string& pattern) {
  if (pattern == "mix") return {std::begin(kMixUnrolls), std::end(kMixUnrolls)};
  return {std::begin(kUnrolls), std::end(kUnrolls)};
}

std::vector<std::string> bandwidth_load_flavours(const std::string& pattern) {
  const PatternSpec& p = pattern == "l2_read" ? spec_of(Pattern::L2Read)
                         : pattern == "mix"   ? spec_of(Pattern::Mix)
                                              : parse_pattern(pattern);
  std::vector<std::string> v;
  if (p.id == Pattern::L2Read) {
    for (const auto& n : kL2Variants) v.emplace_back(n.name);
    return v;
  }
  if (!p.load_ok) return v;  // loads nothing
  for (const auto& n : kLoadNames)
    if (has_load(n.ld) && p.load_ok(n.ld)) v.emplace_back(n.name);
  if (p.copy_engines) {
    v.emplace_back("bulk");    // the copy engine through shared memory; see BwConfig
    v.emplace_back("memcpy");  // the driver's cudaMemcpyAsync
  }
  return v;
}

std::vector<std::string> bandwidth_store_flavours() {
  std::vector<std::string> v;
  for (const auto& n : kStoreNames)
    if (has_store(n.st)) v.emplace_back(n.name);
  return v;
}

std::vector<std::string> bandwidth_patterns() {
  std::vector<std::string> v;
  for (Pattern p : kStreaming) v.emplace_back(spec_of(p).name);
  return v;
}

}  // namespace roofline
