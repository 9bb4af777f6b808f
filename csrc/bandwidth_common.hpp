// The bandwidth family's shared host side: the pattern table's row and the helpers every pattern's
// run_* goes through to check its configurations, size its grids and buffers, fill them, and time
// and verify each configuration. Defined in bandwidth.cpp unless said otherwise.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bandwidth.hpp"
#include "bandwidth_kernels.hpp"
#include "bandwidth_verify.hpp"

namespace roofline {
namespace bw {

// ----------------------------------------------------------------------------------------------
// The pattern table. A row says what a pattern is: which buffers it fills and reads, whether it
// writes one, how its output is checked and against which words, and which kernels run it. Setting
// a pattern up, validating its configurations and verifying it read the row, never the pattern.

enum class Pattern { Read, Write, Copy, Triad, Mix, L2Read };

struct PatternSpec {
  Pattern id;
  const char* name;
  int sources;          // buffers 0 .. sources-1 are filled with seeded data and read once
  bool float_sources;   // they hold word_to_float bits (triad's operands)
  bool writes;          // buffer `sources` is the destination, written once
  bool copy_engines;    // "bulk" (cp.async.bulk) and "memcpy" may stand in for the kernel
  unsigned check;       // kChecksum | kSpotCheck
  std::uint32_t (*expected)(const Seeds&, std::uint64_t);  // spot check: destination word i
  Kernel (*kernel)(int unroll, Ld, St);                    // nullptr: chosen per mix ratio / L2 variant
  bool (*unroll_ok)(int);
  bool (*load_ok)(Ld);  // nullptr: no load flavour to check (write loads nothing; l2_read names variants)
  const char* load_rule;  // why a load flavour the row refuses is refused
};

const PatternSpec& spec_of(Pattern p);
// A streaming pattern (read, write, copy, triad) by name; the others have functions of their own.
const PatternSpec& parse_pattern(const std::string& name);
int buffers_of(const PatternSpec& p);

// The streaming patterns' kernels, the `kernel` of their rows (bandwidth_hbm.cu, with the kernels).
Kernel pick_read_kernel(int unroll, Ld l, St s);
Kernel pick_write_kernel(int unroll, Ld l, St s);
Kernel pick_copy_kernel(int unroll, Ld l, St s);
Kernel pick_triad_kernel(int unroll, Ld l, St s);

// Checks the arguments every pattern takes and each configuration against the pattern's row.
void validate_common(int reps, int warmup, const std::vector<BwConfig>& configs, const PatternSpec& p);
void check_free_memory(int device, std::size_t needed);
int sm_count_of(int device);

struct Grid {
  unsigned blocks = 0;
  int occupancy = 0;
  std::string skipped;  // why the configuration cannot run here, or empty
};

// One-shot: one block per chunk (at least one block for a buffer smaller than a chunk).
// Persistent: SMs x blocks_per_sm, capped at what occupancy allows, so every block is resident.
// A configuration that cannot run on this device comes back with `skipped` set, not as an error:
// one such configuration must not cost the others of a sweep their measurement.
Grid grid_for(int device, const Kernel& k, const BwConfig& c, int sms, std::uint64_t chunks);

// Fills `nwords` words at `p` with seeded data (word_to_float bits when `as_float`), on stream `s`.
void fill_data(std::uint32_t* p, std::uint64_t nwords, std::uint32_t seed, bool as_float, int sms,
               cudaStream_t s);

// The fields every result of one configuration shares.
BwResult result_shell(const PatternSpec& p, const BwConfig& c, const Grid& g, int sms, int warmup,
                      std::uint32_t seed);

// Poisons the outputs, times the configuration, stamps the end of the timed loop and verifies.
void time_and_verify(const PatternSpec& p, const Kernel& k, const Grid& g, const BwConfig& c,
                     const LaunchArgs& args, std::size_t dst_bytes, std::size_t partial_bytes, int warmup,
                     int reps, cudaStream_t stream, CheckInputs in, BwResult& r);

// The largest grid any configuration can use: it sizes the per-block partial sums.
template <typename OneShot>
std::uint64_t max_grid(const std::vector<BwConfig>& configs, int sms, OneShot&& one_shot) {
  std::uint64_t blocks = 1;
  for (const auto& c : configs) {
    const std::uint64_t persistent = static_cast<std::uint64_t>(sms) * c.blocks_per_sm;
    blocks = std::max(blocks, c.blocks_per_sm > 0 ? persistent : one_shot(c));
  }
  return std::min<std::uint64_t>(blocks, INT_MAX);
}

}  // namespace bw
}  // namespace roofline
