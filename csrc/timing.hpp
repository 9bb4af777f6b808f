// Timing with CUDA events: warm-up, repetitions, statistics.
//
// One event pair per repetition around a single launch (or a fixed batch of launches) so the
// per-repetition spread is visible; the caller chooses work per launch large enough (>= ~1 ms) that
// event resolution (~0.5 us) and launch gaps do not matter.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "device.hpp"

namespace roofline {

struct TimingStats {
  std::vector<double> ms;  // one entry per timed repetition, in launch order
  double median_ms = 0, best_ms = 0, mean_ms = 0, worst_ms = 0;
  double cv = 0;  // coefficient of variation (stddev / mean) over the repetitions
};

inline TimingStats summarize(std::vector<double> ms) {
  TimingStats t;
  t.ms = ms;
  if (ms.empty()) return t;
  std::vector<double> s = ms;
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  t.median_ms = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  t.best_ms = s.front();
  t.worst_ms = s.back();
  t.mean_ms = std::accumulate(s.begin(), s.end(), 0.0) / n;
  double var = 0;
  for (double v : s) var += (v - t.mean_ms) * (v - t.mean_ms);
  t.cv = n > 1 ? std::sqrt(var / (n - 1)) / t.mean_ms : 0.0;
  return t;
}

// Runs `launch(stream)` `warmup` times untimed (module load, clock ramp-up, caches), then `reps`
// times each bracketed by events. `launch` must check its own launch errors (CUDA_CHECK_LAUNCH).
template <typename Launch>
TimingStats time_launches(cudaStream_t stream, int warmup, int reps, Launch&& launch) {
  for (int i = 0; i < warmup; ++i) launch(stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<EventPair> events(static_cast<std::size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    events[i].record_start(stream);
    launch(stream);
    events[i].record_stop(stream);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  ms.reserve(reps);
  for (auto& e : events) ms.push_back(e.elapsed_ms());
  return summarize(std::move(ms));
}

}  // namespace roofline
