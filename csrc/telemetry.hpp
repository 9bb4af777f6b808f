// A background thread that reads NVML every few tens of milliseconds while a measurement runs,
// so every measured figure carries the clocks, power, temperature and clock-event reasons it was
// reached at. Summaries (median, which reasons) are policy and live in Python.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nvml.hpp"

namespace roofline {

class TelemetrySampler {
 public:
  // Identifies the GPU by PCI bus id (what CUDA and NVML agree on, whatever CUDA_VISIBLE_DEVICES
  // does to indices). Throws NvmlError when NVML cannot serve that device.
  TelemetrySampler(const std::string& pci_bus_id, double interval_ms);
  ~TelemetrySampler();  // stops the thread; never throws
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;

  void start();
  // Joins the thread (taking one last sample so even a short run has a reading after the work).
  std::vector<nvml::Sample> stop();
  bool running() const { return running_.load(); }

 private:
  void loop();

  nvml::Device device_;
  std::chrono::duration<double, std::milli> interval_;
  std::atomic<bool> running_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  std::thread thread_;
  std::vector<nvml::Sample> samples_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace roofline
