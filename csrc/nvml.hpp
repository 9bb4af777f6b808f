// NVML, loaded with dlopen("libnvidia-ml.so.1") at first use: never linked (the module must import
// where no driver is installed) and never touched at import time.
//
// There is no nvml.h on the build machines, so the few types and constants used are declared here,
// with the ABI of the versioned (_v2/_v3) entry points.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "errors.hpp"

namespace roofline::nvml {

using Device = struct nvmlDevice_st*;

// Clock-event ("throttle") reason bits, as NVML defines them.
struct ReasonBit {
  std::uint64_t bit;
  const char* name;
};
const std::vector<ReasonBit>& reason_bits();
std::vector<std::string> reason_names(std::uint64_t mask);

struct SystemInfo {
  std::string driver_version;
  int cuda_driver_version = 0;  // e.g. 13000
  unsigned device_count = 0;
};

// Everything `roofline-ext info` shows that NVML knows. Fields NVML does not support on a device
// (e.g. power on some boards, ECC on GeForce) are empty optionals, never invented values.
struct DeviceInfo {
  unsigned index = 0;  // NVML's index: NOT the CUDA index (CUDA_VISIBLE_DEVICES reorders those)
  std::string name, uuid, pci_bus_id;
  int cc_major = 0, cc_minor = 0;
  std::optional<unsigned> architecture;  // nvmlDeviceArchitecture_t
  std::optional<unsigned> cuda_cores;
  std::optional<unsigned> memory_bus_width_bits;
  std::optional<std::uint64_t> memory_total, memory_free, memory_used;
  std::optional<unsigned> max_sm_clock_mhz, max_mem_clock_mhz, max_graphics_clock_mhz;
  std::optional<unsigned> sm_clock_mhz, mem_clock_mhz;
  std::optional<unsigned> power_limit_mw, enforced_power_limit_mw, power_draw_mw;
  std::optional<unsigned> temperature_c;
  std::optional<unsigned> mig_current, mig_pending;
  std::optional<unsigned> ecc_current, ecc_pending;
  std::optional<std::uint64_t> clock_event_reasons;
  std::optional<unsigned> compute_processes;  // processes holding a compute context now
  std::optional<unsigned> pcie_gen, pcie_width;
};

// One telemetry reading; fields NVML refused are empty.
struct Sample {
  double t_s = 0;  // seconds since the sampler started
  std::optional<unsigned> sm_clock_mhz, mem_clock_mhz, power_mw, temperature_c;
  std::optional<std::uint64_t> reasons;
};

// Memory of one device as nvmlDeviceGetMemoryInfo reports it (device-wide: every process's
// allocations and contexts count as used). Needs no CUDA context, unlike cudaMemGetInfo.
struct MemoryInfo {
  std::uint64_t total = 0, free = 0, used = 0;
};

// What explains a slow or failing card beyond clocks: memory errors, retired/remapped memory, the
// PCIe link against its maximum, temperature thresholds, and who else computes on it. Each field
// is empty where the board, the driver or the permissions do not report it.
struct HealthInfo {
  // ECC error counters (nvmlDeviceGetTotalEccErrors): volatile since the last driver load,
  // aggregate over the board's life.
  std::optional<std::uint64_t> ecc_corrected_volatile, ecc_uncorrected_volatile;
  std::optional<std::uint64_t> ecc_corrected_aggregate, ecc_uncorrected_aggregate;
  // Page retirement (up to Volta/Turing): pages retired for double-bit errors and for repeated
  // single-bit errors, and whether a retirement waits for the next reset.
  std::optional<unsigned> retired_pages_dbe, retired_pages_sbe;
  std::optional<bool> retired_pages_pending;
  // Row remapping (Ampere and later): rows remapped for correctable / uncorrectable errors, a remap
  // pending the next reset, and whether a remap failed (the bank had no spare row left).
  std::optional<unsigned> remapped_rows_correctable, remapped_rows_uncorrectable;
  std::optional<bool> remap_pending, remap_failure;
  // PCIe: current link, the most the link can train to (GPU and slot together), the GPU's own
  // maximum, and the replay counter (link-level retransmissions, a sign of a marginal link).
  std::optional<unsigned> pcie_gen, pcie_width, pcie_max_gen, pcie_max_width, pcie_gpu_max_gen;
  std::optional<unsigned> pcie_replay_counter;
  // NVLink-C2C (Grace Hopper / Grace Blackwell): whether the host link is C2C rather than PCIe.
  std::optional<bool> c2c_enabled;
  std::optional<unsigned> temperature_c, temperature_slowdown_c, temperature_shutdown_c;
  std::optional<unsigned> temperature_gpu_max_c;
  // Processes holding a compute context now, with the device memory each uses (bytes; empty when
  // the driver hides it, e.g. inside some containers).
  struct Process {
    unsigned pid = 0;
    std::optional<std::uint64_t> used_bytes;
  };
  std::optional<std::vector<Process>> compute_processes;
  // nvmlDeviceGetUtilizationRates: percent of NVML's last sample period (1/6 s to 1 s) in which a
  // kernel ran / device memory was busy, whoever's. Read before this process uses the GPU, it says
  // whether someone else does, even one whose process a container hides from the list above.
  std::optional<unsigned> utilization_gpu_pct, utilization_memory_pct;
};

// Loads the library and calls nvmlInit_v2 once; throws NvmlError (code -1 when the library itself
// could not be loaded) with the reason.
void ensure_initialized();
SystemInfo system_info();
std::vector<DeviceInfo> devices();
Device handle_by_index(unsigned index);
Device handle_by_pci_bus_id(const std::string& bus_id);
// The device with this UUID ("GPU-..." or, for a MIG instance, "MIG-..."); nullopt when NVML knows
// no such device or lacks the entry point. Throws NvmlError only when NVML itself is unusable.
std::optional<Device> find_by_uuid(const std::string& uuid);
// nullopt when the device does not report its memory (or the entry point is missing).
std::optional<MemoryInfo> memory_info(Device d);
// nvmlDeviceGetMigMode's current mode (1 = enabled); nullopt when unsupported.
std::optional<unsigned> mig_mode(Device d);
DeviceInfo device_info(Device d, unsigned index);
// Never throws for an unsupported query (that field stays empty); throws NvmlError only when NVML
// itself is unusable.
HealthInfo health_info(Device d);
Sample sample(Device d);

}  // namespace roofline::nvml
