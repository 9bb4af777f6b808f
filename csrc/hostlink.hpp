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

namespace roofline {

// Deliberate faults, so tests can prove that verification fails loudly. Never used to measure.
enum class HostLinkFault {
  None,
  Short,     // every copy moves 15/16 of the buffer: the tail keeps its poison (h2d fails first)
  ShortD2H,  // only the device-to-host copies are short, so the host-side comparison is what fails
};
HostLinkFault parse_hostlink_fault(const std::string& name);

struct HostLinkVerification {
  std::string method;             // "checksum" (h2d, on the device) or "compare" (d2h, on the host)
  std::size_t checked_words = 0;  // 32-bit words covered: all of them, both directions
  std::uint32_t expected = 0;     // h2d: sum mod 2^32 the host computed while filling
  std::uint32_t observed = 0;     // h2d: sum mod 2^32 of what the device received
  std::uint64_t mismatches = 0;   // d2h: words that differ from the seeded values (0, or it throws)
};

struct HostLinkResult {
  std::string direction;  // "h2d" | "d2h"
  std::size_t bytes = 0;  // bytes per copy (one copy per timed repetition)
  int warmup = 0;
  std::uint32_t seed = 0;
  TimingStats timing;
  HostLinkVerification verification;
};

// Times `reps` copies of `bytes` (a positive multiple of 16) host-to-device and then
// device-to-host on CUDA device `device`, after `warmup` untimed ones each, and verifies every word
// that arrived. Throws std::invalid_argument for bad arguments, CudaError for CUDA failures (a
// failed pinned allocation included) and VerificationError for wrong data.
std::vector<HostLinkResult> run_hostlink(int device, std::size_t bytes, int reps, int warmup,
                                         std::uint32_t seed, HostLinkFault fault = HostLinkFault::None);

}  // namespace roofline
