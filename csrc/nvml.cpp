// NVML through dlopen. Follows nvidia-ml-py's approach: load lazily under a lock, resolve the
// versioned symbols, map each return code to its name.
#include "nvml.hpp"

#include <dlfcn.h>

#include <mutex>
#include <sstream>

namespace roofline::nvml {
namespace {

using Return = int;  // nvmlReturn_t
constexpr Return kSuccess = 0;
constexpr Return kInsufficientSize = 7;

// nvmlMemory_t (v1 layout, which nvmlDeviceGetMemoryInfo takes).
struct Memory {
  unsigned long long total, free, used;
};
// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it.
struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

enum ClockType : int { kGraphics = 0, kSm = 1, kMem = 2 };

// nvmlUtilization_t: percent of the last sample period (1/6 s to 1 s) in which a kernel ran, and in
// which device memory was read or written.
struct Utilization {
  unsigned gpu, memory;
};

struct Api {
  void* lib = nullptr;
  Return (*init)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*driver_version)(char*, unsigned) = nullptr;
  Return (*cuda_driver_version)(int*) = nullptr;
  Return (*count)(unsigned*) = nullptr;
  Return (*by_index)(unsigned, Device*) = nullptr;
  Return (*by_pci)(const char*, Device*) = nullptr;
  Return (*by_uuid)(const char*, Device*) = nullptr;
  Return (*name)(Device, char*, unsigned) = nullptr;
  Return (*uuid)(Device, char*, unsigned) = nullptr;
  Return (*pci)(Device, PciInfo*) = nullptr;
  Return (*cc)(Device, int*, int*) = nullptr;
  Return (*arch)(Device, unsigned*) = nullptr;
  Return (*cores)(Device, unsigned*) = nullptr;
  Return (*bus_width)(Device, unsigned*) = nullptr;
  Return (*memory)(Device, Memory*) = nullptr;
  Return (*max_clock)(Device, int, unsigned*) = nullptr;
  Return (*clock)(Device, int, unsigned*) = nullptr;
  Return (*power_limit)(Device, unsigned*) = nullptr;
  Return (*enforced_limit)(Device, unsigned*) = nullptr;
  Return (*power)(Device, unsigned*) = nullptr;
  Return (*temperature)(Device, int, unsigned*) = nullptr;
  Return (*mig)(Device, unsigned*, unsigned*) = nullptr;
  Return (*ecc)(Device, unsigned*, unsigned*) = nullptr;
  Return (*reasons)(Device, unsigned long long*) = nullptr;
  Return (*procs)(Device, unsigned*, void*) = nullptr;
  Return (*pcie_gen)(Device, unsigned*) = nullptr;
  Return (*pcie_width)(Device, unsigned*) = nullptr;
  // Health (health_info): every one optional, older drivers and boards lack some.
  Return (*ecc_errors)(Device, int, int, unsigned long long*) = nullptr;
  Return (*retired_pages)(Device, int, unsigned*, unsigned long long*) = nullptr;
  Return (*retired_pending)(Device, int*) = nullptr;
  Return (*remapped_rows)(Device, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  Return (*pcie_max_gen)(Device, unsigned*) = nullptr;
  Return (*pcie_max_width)(Device, unsigned*) = nullptr;
  Return (*pcie_gpu_max_gen)(Device, unsigned*) = nullptr;
  Return (*pcie_replays)(Device, unsigned*) = nullptr;
  Return (*c2c_mode)(Device, unsigned*) = nullptr;  // nvmlC2cModeInfo_v1_t is one unsigned
  Return (*temp_threshold)(Device, int, unsigned*) = nullptr;
  Return (*utilization)(Device, Utilization*) = nullptr;
};

// nvmlProcessInfo_t as the _v2 and _v3 process queries fill it (the only ones resolved below).
struct ProcessInfo {
  unsigned pid;
  unsigned long long used_gpu_memory;
  unsigned gpu_instance_id, compute_instance_id;
};
// NVML_VALUE_NOT_AVAILABLE for an unsigned long long: the driver hides the process's memory.
constexpr unsigned long long kValueNotAvailable = ~0ull;

const char* return_name(Return r) {
  switch (r) {
    case 0: return "NVML_SUCCESS";
    case 1: return "NVML_ERROR_UNINITIALIZED";
    case 2: return "NVML_ERROR_INVALID_ARGUMENT";
    case 3: return "NVML_ERROR_NOT_SUPPORTED";
    case 4: return "NVML_ERROR_NO_PERMISSION";
    case 6: return "NVML_ERROR_NOT_FOUND";
    case 7: return "NVML_ERROR_INSUFFICIENT_SIZE";
    case 9: return "NVML_ERROR_DRIVER_NOT_LOADED";
    case 12: return "NVML_ERROR_LIBRARY_NOT_FOUND";
    case 13: return "NVML_ERROR_FUNCTION_NOT_FOUND";
    case 15: return "NVML_ERROR_GPU_IS_LOST";
    case 18: return "NVML_ERROR_LIB_RM_VERSION_MISMATCH";
    case 999: return "NVML_ERROR_UNKNOWN";
    default: return "NVML_ERROR";
  }
}

std::once_flag g_once;
Api g_api;
// Set when loading or nvmlInit failed; rethrown on every later use so the reason is never lost.
std::optional<NvmlError> g_failure;

template <typename F>
void resolve(void* lib, F& fn, std::initializer_list<const char*> names) {
  // Newest versioned name first: the unversioned symbols keep old ABIs for old binaries.
  for (const char* n : names) {
    if (void* p = dlsym(lib, n)) {
      fn = reinterpret_cast<F>(p);
      return;
    }
  }
}

void load() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    g_failure.emplace(-1, "NVML_LIBRARY_NOT_LOADED",
                      std::string("cannot load libnvidia-ml.so.1 (no NVIDIA driver installed?): ") +
                          (e ? e : "unknown dlopen error"));
    return;
  }
  Api& a = g_api;
  a.lib = lib;
  resolve(lib, a.init, {"nvmlInit_v2", "nvmlInit"});
  resolve(lib, a.error_string, {"nvmlErrorString"});
  resolve(lib, a.driver_version, {"nvmlSystemGetDriverVersion"});
  resolve(lib, a.cuda_driver_version, {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  resolve(lib, a.count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  resolve(lib, a.by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  resolve(lib, a.by_pci, {"nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByPciBusId"});
  resolve(lib, a.by_uuid, {"nvmlDeviceGetHandleByUUID"});
  resolve(lib, a.name, {"nvmlDeviceGetName"});
  resolve(lib, a.uuid, {"nvmlDeviceGetUUID"});
  resolve(lib, a.pci, {"nvmlDeviceGetPciInfo_v3"});
  resolve(lib, a.cc, {"nvmlDeviceGetCudaComputeCapability"});
  resolve(lib, a.arch, {"nvmlDeviceGetArchitecture"});
  resolve(lib, a.cores, {"nvmlDeviceGetNumGpuCores"});
  resolve(lib, a.bus_width, {"nvmlDeviceGetMemoryBusWidth"});
  resolve(lib, a.memory, {"nvmlDeviceGetMemoryInfo"});
  resolve(lib, a.max_clock, {"nvmlDeviceGetMaxClockInfo"});
  resolve(lib, a.clock, {"nvmlDeviceGetClockInfo"});
  resolve(lib, a.power_limit, {"nvmlDeviceGetPowerManagementLimit"});
  resolve(lib, a.enforced_limit, {"nvmlDeviceGetEnforcedPowerLimit"});
  resolve(lib, a.power, {"nvmlDeviceGetPowerUsage"});
  resolve(lib, a.temperature, {"nvmlDeviceGetTemperature"});
  resolve(lib, a.mig, {"nvmlDeviceGetMigMode"});
  resolve(lib, a.ecc, {"nvmlDeviceGetEccMode"});
  // Renamed from "throttle" to "clocks event" reasons in recent drivers; same bits.
  resolve(lib, a.reasons, {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  resolve(lib, a.procs, {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  resolve(lib, a.pcie_gen, {"nvmlDeviceGetCurrPcieLinkGeneration"});
  resolve(lib, a.pcie_width, {"nvmlDeviceGetCurrPcieLinkWidth"});
  resolve(lib, a.ecc_errors, {"nvmlDeviceGetTotalEccErrors"});
  resolve(lib, a.retired_pages, {"nvmlDeviceGetRetiredPages"});
  resolve(lib, a.retired_pending, {"nvmlDeviceGetRetiredPagesPendingStatus"});
  resolve(lib, a.remapped_rows, {"nvmlDeviceGetRemappedRows"});
  resolve(lib, a.pcie_max_gen, {"nvmlDeviceGetMaxPcieLinkGeneration"});
  resolve(lib, a.pcie_max_width, {"nvmlDeviceGetMaxPcieLinkWidth"});
  resolve(lib, a.pcie_gpu_max_gen, {"nvmlDeviceGetGpuMaxPcieLinkGeneration"});
  resolve(lib, a.pcie_replays, {"nvmlDeviceGetPcieReplayCounter"});
  resolve(lib, a.c2c_mode, {"nvmlDeviceGetC2cModeInfoV"});
  resolve(lib, a.temp_threshold, {"nvmlDeviceGetTemperatureThreshold"});
  resolve(lib, a.utilization, {"nvmlDeviceGetUtilizationRates"});
  if (!a.init || !a.count || !a.by_index || !a.name || !a.uuid || !a.pci || !a.error_string) {
    g_failure.emplace(13, "NVML_ERROR_FUNCTION_NOT_FOUND",
                      "libnvidia-ml.so.1 lacks required entry points (driver too old?)");
    return;
  }
  Return r = a.init();
  if (r != kSuccess) {
    std::ostringstream s;
    s << "nvmlInit_v2 failed: " << return_name(r) << " (" << r << "): " << a.error_string(r);
    g_failure.emplace(r, return_name(r), s.str());
  }
}

void check(Return r, const char* file, int line, const char* expr) {
  if (r == kSuccess) return;
  std::ostringstream s;
  s << "NVML error " << return_name(r) << " (" << r << "): "
    << (g_api.error_string ? g_api.error_string(r) : "") << " at " << where(file, line, expr);
  throw NvmlError(r, return_name(r), s.str());
}
#define NVML_CHECK(expr) check((expr), __FILE__, __LINE__, #expr)

// Optional queries: a missing entry point or NOT_SUPPORTED/NO_PERMISSION means "unknown", not failure.
template <typename T, typename Fn, typename... Args>
std::optional<T> query(Fn fn, Device d, Args... args) {
  if (!fn) return std::nullopt;
  T v{};
  if (fn(d, args..., &v) != kSuccess) return std::nullopt;
  return v;
}

}  // namespace

const std::vector<ReasonBit>& reason_bits() {
  static const std::vector<ReasonBit> bits = {
      {0x1ull, "gpu_idle"},
      {0x2ull, "applications_clocks_setting"},
      {0x4ull, "sw_power_cap"},
      {0x8ull, "hw_slowdown"},
      {0x10ull, "sync_boost"},
      {0x20ull, "sw_thermal_slowdown"},
      {0x40ull, "hw_thermal_slowdown"},
      {0x80ull, "hw_power_brake_slowdown"},
      {0x100ull, "display_clock_setting"},
  };
  return bits;
}

std::vector<std::string> reason_names(std::uint64_t mask) {
  std::vector<std::string> out;
  std::uint64_t known = 0;
  for (const auto& b : reason_bits()) {
    known |= b.bit;
    if (mask & b.bit) out.emplace_back(b.name);
  }
  if (mask & ~known) {
    std::ostringstream s;
    s << "unknown_0x" << std::hex << (mask & ~known);
    out.push_back(s.str());
  }
  return out;
}

void ensure_initialized() {
  std::call_once(g_once, load);
  if (g_failure) throw *g_failure;
}

SystemInfo system_info() {
  ensure_initialized();
  SystemInfo s;
  char buf[96] = {0};
  if (g_api.driver_version && g_api.driver_version(buf, sizeof buf) == kSuccess) s.driver_version = buf;
  if (g_api.cuda_driver_version) (void)g_api.cuda_driver_version(&s.cuda_driver_version);
  NVML_CHECK(g_api.count(&s.device_count));
  return s;
}

Device handle_by_index(unsigned index) {
  ensure_initialized();
  Device d = nullptr;
  NVML_CHECK(g_api.by_index(index, &d));
  return d;
}

Device handle_by_pci_bus_id(const std::string& bus_id) {
  ensure_initialized();
  if (!g_api.by_pci) throw NvmlError(13, "NVML_ERROR_FUNCTION_NOT_FOUND", "nvmlDeviceGetHandleByPciBusId_v2 missing");
  Device d = nullptr;
  NVML_CHECK(g_api.by_pci(bus_id.c_str(), &d));
  return d;
}

std::optional<Device> find_by_uuid(const std::string& uuid) {
  ensure_initialized();
  if (!g_api.by_uuid) return std::nullopt;
  Device d = nullptr;
  if (g_api.by_uuid(uuid.c_str(), &d) != kSuccess) return std::nullopt;
  return d;
}

std::optional<MemoryInfo> memory_info(Device d) {
  ensure_initialized();
  auto m = query<Memory>(g_api.memory, d);
  if (!m) return std::nullopt;
  MemoryInfo r;
  r.total = m->total;
  r.free = m->free;
  r.used = m->used;
  return r;
}

std::optional<unsigned> mig_mode(Device d) {
  ensure_initialized();
  if (!g_api.mig) return std::nullopt;
  unsigned cur = 0, pend = 0;
  if (g_api.mig(d, &cur, &pend) != kSuccess) return std::nullopt;
  return cur;
}

DeviceInfo device_info(Device d, unsigned index) {
  ensure_initialized();
  const Api& a = g_api;
  DeviceInfo r;
  r.index = index;
  char buf[128] = {0};
  NVML_CHECK(a.name(d, buf, sizeof buf));
  r.name = buf;
  NVML_CHECK(a.uuid(d, buf, sizeof buf));
  r.uuid = buf;
  PciInfo pci{};
  NVML_CHECK(a.pci(d, &pci));
  r.pci_bus_id = pci.bus_id;
  if (a.cc) NVML_CHECK(a.cc(d, &r.cc_major, &r.cc_minor));
  r.architecture = query<unsigned>(a.arch, d);
  r.cuda_cores = query<unsigned>(a.cores, d);
  r.memory_bus_width_bits = query<unsigned>(a.bus_width, d);
  if (auto m = memory_info(d)) {
    r.memory_total = m->total;
    r.memory_free = m->free;
    r.memory_used = m->used;
  }
  r.max_sm_clock_mhz = query<unsigned>(a.max_clock, d, int(kSm));
  r.max_mem_clock_mhz = query<unsigned>(a.max_clock, d, int(kMem));
  r.max_graphics_clock_mhz = query<unsigned>(a.max_clock, d, int(kGraphics));
  r.sm_clock_mhz = query<unsigned>(a.clock, d, int(kSm));
  r.mem_clock_mhz = query<unsigned>(a.clock, d, int(kMem));
  r.power_limit_mw = query<unsigned>(a.power_limit, d);
  r.enforced_power_limit_mw = query<unsigned>(a.enforced_limit, d);
  r.power_draw_mw = query<unsigned>(a.power, d);
  r.temperature_c = query<unsigned>(a.temperature, d, 0 /* NVML_TEMPERATURE_GPU */);
  if (a.mig) {
    unsigned cur = 0, pend = 0;
    if (a.mig(d, &cur, &pend) == kSuccess) {
      r.mig_current = cur;
      r.mig_pending = pend;
    }
  }
  if (a.ecc) {
    unsigned cur = 0, pend = 0;
    if (a.ecc(d, &cur, &pend) == kSuccess) {
      r.ecc_current = cur;
      r.ecc_pending = pend;
    }
  }
  if (auto v = query<unsigned long long>(a.reasons, d)) r.clock_event_reasons = *v;
  if (a.procs) {
    // Size query only: count = 0 returns SUCCESS (none) or INSUFFICIENT_SIZE with the count,
    // so the process-info struct layout (which changed across versions) is never needed.
    unsigned n = 0;
    Return rc = a.procs(d, &n, nullptr);
    if (rc == kSuccess || rc == kInsufficientSize) r.compute_processes = n;
  }
  r.pcie_gen = query<unsigned>(a.pcie_gen, d);
  r.pcie_width = query<unsigned>(a.pcie_width, d);
  return r;
}

namespace {

// nvmlMemoryErrorType_t x nvmlEccCounterType_t.
constexpr int kCorrected = 0, kUncorrected = 1, kVolatile = 0, kAggregate = 1;
// nvmlPageRetirementCause_t.
constexpr int kMultipleSbe = 0, kDbe = 1;
// nvmlTemperatureThresholds_t.
constexpr int kThresholdShutdown = 0, kThresholdSlowdown = 1, kThresholdGpuMax = 3;

// Count-only query of retired pages: pageCount = 0 returns SUCCESS (none) or INSUFFICIENT_SIZE with
// the count, so no address buffer is needed.
std::optional<unsigned> retired_count(Device d, int cause) {
  if (!g_api.retired_pages) return std::nullopt;
  unsigned n = 0;
  Return rc = g_api.retired_pages(d, cause, &n, nullptr);
  if (rc == kSuccess || rc == kInsufficientSize) return n;
  return std::nullopt;
}

void fill_ecc(Device d, HealthInfo& h) {
  const Api& a = g_api;
  h.ecc_corrected_volatile = query<unsigned long long>(a.ecc_errors, d, kCorrected, kVolatile);
  h.ecc_uncorrected_volatile = query<unsigned long long>(a.ecc_errors, d, kUncorrected, kVolatile);
  h.ecc_corrected_aggregate = query<unsigned long long>(a.ecc_errors, d, kCorrected, kAggregate);
  h.ecc_uncorrected_aggregate = query<unsigned long long>(a.ecc_errors, d, kUncorrected, kAggregate);
  h.retired_pages_dbe = retired_count(d, kDbe);
  h.retired_pages_sbe = retired_count(d, kMultipleSbe);
  if (auto p = query<int>(a.retired_pending, d)) h.retired_pages_pending = *p != 0;
  if (a.remapped_rows) {
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    if (a.remapped_rows(d, &corr, &unc, &pending, &failure) == kSuccess) {
      h.remapped_rows_correctable = corr;
      h.remapped_rows_uncorrectable = unc;
      h.remap_pending = pending != 0;
      h.remap_failure = failure != 0;
    }
  }
}

void fill_link(Device d, HealthInfo& h) {
  const Api& a = g_api;
  h.pcie_gen = query<unsigned>(a.pcie_gen, d);
  h.pcie_width = query<unsigned>(a.pcie_width, d);
  h.pcie_max_gen = query<unsigned>(a.pcie_max_gen, d);
  h.pcie_max_width = query<unsigned>(a.pcie_max_width, d);
  h.pcie_gpu_max_gen = query<unsigned>(a.pcie_gpu_max_gen, d);
  h.pcie_replay_counter = query<unsigned>(a.pcie_replays, d);
  if (auto c = query<unsigned>(a.c2c_mode, d)) h.c2c_enabled = *c != 0;
}

void fill_temperature(Device d, HealthInfo& h) {
  const Api& a = g_api;
  h.temperature_c = query<unsigned>(a.temperature, d, 0 /* NVML_TEMPERATURE_GPU */);
  h.temperature_slowdown_c = query<unsigned>(a.temp_threshold, d, kThresholdSlowdown);
  h.temperature_shutdown_c = query<unsigned>(a.temp_threshold, d, kThresholdShutdown);
  h.temperature_gpu_max_c = query<unsigned>(a.temp_threshold, d, kThresholdGpuMax);
}

// Every compute process with its memory. Sized from a count-only call, with room for processes
// that start between the two calls; a third size mismatch gives up (empty) rather than loop.
std::optional<std::vector<HealthInfo::Process>> compute_processes(Device d) {
  if (!g_api.procs) return std::nullopt;
  for (int attempt = 0; attempt < 3; ++attempt) {
    unsigned n = 0;
    Return rc = g_api.procs(d, &n, nullptr);
    if (rc == kSuccess) return std::vector<HealthInfo::Process>{};
    if (rc != kInsufficientSize) return std::nullopt;
    unsigned cap = n * 2 + 4;
    std::vector<ProcessInfo> raw(cap);
    rc = g_api.procs(d, &cap, raw.data());
    if (rc == kInsufficientSize) continue;
    if (rc != kSuccess) return std::nullopt;
    std::vector<HealthInfo::Process> out;
    for (unsigned i = 0; i < cap && i < raw.size(); ++i) {
      HealthInfo::Process p;
      p.pid = raw[i].pid;
      if (raw[i].used_gpu_memory != kValueNotAvailable) p.used_bytes = raw[i].used_gpu_memory;
      out.push_back(p);
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

HealthInfo health_info(Device d) {
  ensure_initialized();
  HealthInfo h;
  fill_ecc(d, h);
  fill_link(d, h);
  fill_temperature(d, h);
  h.compute_processes = compute_processes(d);
  if (g_api.utilization) {
    Utilization u{};
    if (g_api.utilization(d, &u) == kSuccess) {
      h.utilization_gpu_pct = u.gpu;
      h.utilization_memory_pct = u.memory;
    }
  }
  return h;
}

std::vector<DeviceInfo> devices() {
  SystemInfo s = system_info();
  std::vector<DeviceInfo> out;
  for (unsigned i = 0; i < s.device_count; ++i) out.push_back(device_info(handle_by_index(i), i));
  return out;
}

Sample sample(Device d) {
  const Api& a = g_api;
  Sample s;
  s.sm_clock_mhz = query<unsigned>(a.clock, d, int(kSm));
  s.mem_clock_mhz = query<unsigned>(a.clock, d, int(kMem));
  s.power_mw = query<unsigned>(a.power, d);
  s.temperature_c = query<unsigned>(a.temperature, d, 0);
  if (auto v = query<unsigned long long>(a.reasons, d)) s.reasons = *v;
  return s;
}

}  // namespace roofline::nvml
