// Achievable memory bandwidth: streaming kernels (read, write, copy, triad) over device memory, a
// read:write mix kernel (R read parts to W write parts, the envelope between read and write), and a
// read kernel over working sets that fit in L2.
//
// The core only measures: it allocates, fills with seeded data, times each configuration it is
// given on the same buffers, verifies every result, and returns plain structs. Which sizes, which
// configurations and which figure counts as "the peak" is policy and lives in Python
// (python/roofline_ext/measure/bandwidth.py).
//
// The implementation is split by concern over bandwidth*.cu and bandwidth*.cpp; bandwidth.cpp's header lists the files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "timing.hpp"
#include "verification.hpp"

namespace roofline {

// One launch configuration of a bandwidth kernel.
struct BwConfig {
  int threads = 256;       // threads per block
  int unroll = 8;          // independent 16-byte vectors in flight per thread (per stream)
  int blocks_per_sm = 0;   // 0: one-shot grid, one chunk of threads*unroll vectors per block;
                           // >0: persistent grid-stride grid of SMs x this (capped by occupancy)
  std::string load = "nc_na";   // load flavour, see bandwidth_load_flavours()
  std::string store = "plain";  // store flavour, see bandwidth_store_flavours()
  // load "bulk" (copy only, sm_90+): the copy engine (cp.async.bulk) moves `bulk_bytes` per transfer
  // through a ring of `unroll` shared-memory stages; one thread per block drives it and `threads`
  // must be 32.
  // load "memcpy" (copy only): cudaMemcpyAsync device-to-device, what libraries call for a
  // contiguous copy; the other fields are ignored.
  int bulk_bytes = 0;
};

struct BwResult {
  std::string pattern;          // "read" | "write" | "copy" | "triad" | "mix" | "l2_read"
  std::size_t buffer_bytes = 0;   // bytes of each buffer (the working set for l2_read; the larger
                                  // of source and destination for mix)
  int buffers = 0;                // buffers the pattern touches
  std::size_t bytes_per_launch = 0;  // counted traffic: read N, write N, copy 2N, triad 3N,
                                     // mix R + W units, l2_read passes x working set
  std::size_t read_bytes_per_launch = 0;   // the part of bytes_per_launch that is read
  std::size_t write_bytes_per_launch = 0;  // and the part that is written
  int read_parts = 0, write_parts = 0;     // mix: the ratio R:W (other patterns: their own)
  int passes = 1;                 // l2_read: reads of the working set per launch
  BwConfig config;
  int grid = 0;                   // blocks launched
  int occupancy_blocks_per_sm = 0;  // what cudaOccupancyMaxActiveBlocksPerMultiprocessor allows
  int sm_count = 0;
  int warmup = 0;
  std::uint32_t seed = 0;
  TimingStats timing;
  // steady_clock_s() right after the timed loop's final synchronisation: with the repetition times
  // (back to back on the stream) it places every repetition on the telemetry timeline.
  double timed_end_s = 0;
  Verification verification;  // verification.hpp; a skipped configuration keeps the defaults
  // Non-empty when the configuration cannot run on this device (e.g. no block fits on an SM at
  // this register use, or the copy engine needs sm_90): nothing was timed for it.
  std::string skipped;
};

// Measures `pattern` ("read", "write", "copy", "triad") over buffers of `buffer_bytes` each (a
// multiple of 16) for every configuration in `configs`, on one allocation filled once.
// Throws std::invalid_argument for bad arguments, CudaError for CUDA failures and
// VerificationError when any configuration produced wrong output. `fault` (every entry point here):
// None or Short (verification.hpp, Family::Bandwidth), for tests of the verification only.
std::vector<BwResult> run_bandwidth(int device, const std::string& pattern, std::size_t buffer_bytes,
                                    int reps, int warmup, const std::vector<BwConfig>& configs,
                                    std::uint32_t seed, Fault fault = Fault::None);

// Reads a working set of `working_set_bytes` (meant to fit in L2) `passes` times per launch, with
// `passes` chosen so one launch moves about `target_bytes_per_launch`. Every variant loads with
// ld.global.cg, which never caches in L1, so each figure is L2 (or, past its size, HBM) traffic;
// a configuration's `load` names the variant's access order: "cg" (grid-stride), "cg_spread"
// (contiguous stretch per block), "cg_pipe" (grid-stride, next chunk's loads in flight while the
// current one is folded). See bandwidth_l2.cu's kernels.
// `shared_starts`: keep the passes nearest the target even when the spread order's blocks then
// share start points (to measure what shared reads do; host_reference.hpp, coprime_passes).
std::vector<BwResult> run_l2_read(int device, std::size_t working_set_bytes,
                                  std::size_t target_bytes_per_launch, int reps, int warmup,
                                  const std::vector<BwConfig>& configs, std::uint32_t seed,
                                  Fault fault = Fault::None, bool shared_starts = false);

// The configuration run_l2_read's callers get when they name none (BwConfig's default load,
// nc_na, is not an L2 variant).
BwConfig l2_default_config();

// Reads R parts and writes W parts per chunk (read_parts:write_parts, each 1..4, not both zero:
// read-only and write-only are the read and write patterns), the source and destination sized
// R and W units so that the larger is about `buffer_bytes`. Every configuration is verified: the
// kernel folds every word it read into a checksum the host recomputes, and its stores are
// spot-checked like the write pattern's.
std::vector<BwResult> run_mix(int device, int read_parts, int write_parts, std::size_t buffer_bytes, int reps,
                              int warmup, const std::vector<BwConfig>& configs, std::uint32_t seed,
                              Fault fault = Fault::None);

// What this build can run: the values each BwConfig field accepts.
std::vector<int> bandwidth_unrolls(const std::string& pattern = "read");  // or "mix"
std::vector<std::string> bandwidth_load_flavours(const std::string& pattern);  // or "l2_read", "mix"
std::vector<std::string> bandwidth_store_flavours();
std::vector<std::string> bandwidth_patterns();
// The read:write ratios the mix kernel is compiled for, as {R, W} pairs.
std::vector<std::vector<int>> bandwidth_mix_ratios();

}  // namespace roofline
