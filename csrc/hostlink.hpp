// Host-link bandwidth: pinned host <-> device copies (cudaMemcpyAsync from/to cudaMallocHost
// memory), timed with CUDA events, with every copied word verified.
//
// The core only measures: it allocates, fills with seeded data, times the copies it is asked for
// and verifies what arrived. Which size, how many repetitions, the link's theoretical rate and what
// counts as healthy are policy and live in Python (python/roofline_ext/measure/hostlink.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "timing.hpp"
#include "verification.hpp"

namespace roofline {

struct HostLinkResult {
  std::string direction;  // "h2d" | "d2h"
  std::size_t bytes = 0;  // bytes per copy (one copy per timed repetition)
  int warmup = 0;
  std::uint32_t seed = 0;
  TimingStats timing;
  // verification.hpp: h2d "checksum" (the host's and the device's sums), d2h "compare" (every word
  // on the host); checked counts 32-bit words, all of them in both directions.
  Verification verification;
};

// Times `reps` copies of `bytes` (a positive multiple of 16) host-to-device and then
// device-to-host on CUDA device `device`, after `warmup` untimed ones each, and verifies every word
// that arrived. Throws std::invalid_argument for bad arguments, CudaError for CUDA failures (a
// failed pinned allocation included) and VerificationError for wrong data. `fault`: None, Short or
// ShortD2H (verification.hpp, Family::HostLink), for tests of the verification only.
std::vector<HostLinkResult> run_hostlink(int device, std::size_t bytes, int reps, int warmup,
                                         std::uint32_t seed, Fault fault = Fault::None);

}  // namespace roofline
