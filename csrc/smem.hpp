// Shared-memory (L1) read bandwidth: each block fills a shared buffer with seeded words and its
// threads read it over and over with conflict-free 16-byte (or 4-byte) loads, folding every word
// into a per-thread sum that the host recomputes exactly. The kernel counts its own SM clock per
// launch (clock64 cycles over %globaltimer nanoseconds), so Python can put the figure against
// SMs x bytes per clock x the clock the kernel ran at.
//
// The core only measures; which configurations, the ceiling and the fraction are Python's
// (python/roofline_ext/measure/smem.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "timing.hpp"
#include "verification.hpp"

namespace roofline {

struct SmemConfig {
  int threads = 256;       // threads per block: 256, 512 or 1024 (compiled in)
  int width = 16;          // bytes per load: 16 (ld.shared.v4.u32) or 4 (ld.shared.u32)
  int vectors = 8;         // loads per thread per pass over the block's buffer: 8 or 16
  int blocks_per_sm = 0;   // 0: as many as fit; > 0: at most this many (capped by occupancy)
};

struct SmemResult {
  SmemConfig config;
  int grid = 0;                 // blocks launched: SMs x resident blocks per SM (one wave)
  int blocks_per_sm = 0;        // resident blocks per SM actually used
  int occupancy_blocks_per_sm = 0;
  int sm_count = 0;
  std::size_t smem_bytes_per_block = 0;  // the buffer each block reads: threads x vectors x width
  long long passes = 0;         // reads of the whole buffer per launch
  std::size_t bytes_per_launch = 0;      // grid x buffer x passes
  int warmup = 0;
  std::uint32_t seed = 0;
  TimingStats timing;
  // Per timed launch, the SM clock the kernel counted (sum of cycles over sum of nanoseconds over
  // its CTAs), in MHz; 0 where the timer did not advance.
  std::vector<double> kernel_clock_mhz;
  double timed_end_s = 0;       // steady_clock_s() right after the timed loop (see BwResult)
  // verification.hpp: "per-thread checksum", every thread's sum compared with the host's (checked
  // counts threads); a skipped configuration keeps the method and nothing else.
  Verification verification;
  std::string skipped;          // why the configuration cannot run here, or empty
};

// Times every configuration in `configs`: `passes` reads of each block's buffer per launch, or (0)
// as many as make one launch last about `target_ms`. Throws std::invalid_argument for bad
// arguments, CudaError for CUDA failures, VerificationError when any thread's sum is wrong.
// `fault`: None or Short (verification.hpp, Family::SharedMemory), for tests of the verification.
std::vector<SmemResult> run_smem(int device, int reps, int warmup, double target_ms, long long passes,
                                 const std::vector<SmemConfig>& configs, std::uint32_t seed,
                                 Fault fault = Fault::None);

// What this build can run: {"threads": [...], "widths": [...], "vectors": [...]}.
std::vector<int> smem_threads();
std::vector<int> smem_widths();
std::vector<int> smem_vectors();

}  // namespace roofline
