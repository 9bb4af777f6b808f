#include "telemetry.hpp"

namespace roofline {

TelemetrySampler::TelemetrySampler(const std::string& pci_bus_id, double interval_ms)
    : device_(nvml::handle_by_pci_bus_id(pci_bus_id)), interval_(interval_ms) {
  if (interval_ms <= 0) throw CoreError("telemetry interval must be positive");
}

TelemetrySampler::~TelemetrySampler() {
  try {
    if (running_) stop();
  } catch (...) {
    // Destructors never throw; a failed join here has nowhere to report to.
  }
}

void TelemetrySampler::start() {
  if (running_) throw CoreError("telemetry sampler already running");
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = false;
    samples_.clear();
  }
  t0_ = std::chrono::steady_clock::now();
  running_ = true;
  thread_ = std::thread([this] { loop(); });
}

void TelemetrySampler::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    lock.unlock();
    nvml::Sample s = nvml::sample(device_);
    s.t_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    lock.lock();
    samples_.push_back(s);
    // wait_for instead of sleep so stop() does not wait a whole interval.
    if (cv_.wait_for(lock, interval_, [this] { return stop_requested_; })) break;
  }
}

std::vector<nvml::Sample> TelemetrySampler::stop() {
  if (!running_) throw CoreError("telemetry sampler is not running");
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  running_ = false;
  nvml::Sample last = nvml::sample(device_);
  last.t_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  std::lock_guard<std::mutex> lock(mu_);
  samples_.push_back(last);
  return samples_;
}

}  // namespace roofline
