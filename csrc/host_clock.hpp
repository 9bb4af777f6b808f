// The host clock the native core stamps its timed loops with, so Python can place each timed
// repetition on the telemetry sampler's timeline (both read std::chrono::steady_clock).
#pragma once

#include <chrono>

namespace roofline {

// Seconds on std::chrono::steady_clock (the clock TelemetrySampler's t0 comes from).
inline double steady_clock_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace roofline
