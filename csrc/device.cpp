// Device attributes through the CUDA runtime. Identity beyond what CUDA knows (clocks, power,
// ECC, MIG) comes from NVML in nvml.cpp; the two are matched by PCI bus id in Python.
//
// Listing must not create a CUDA context (each costs hundreds of MiB of device memory and shows the
// process in nvidia-smi on every visible GPU), so cuda_device_props uses only context-free calls and
// asks NVML for the free memory; cuda_memory_info is the context-creating cudaMemGetInfo.
#include "device.hpp"

#include <cstdio>

#include "nvml.hpp"

namespace roofline {

int cuda_device_count() {
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  return n;
}

int cuda_runtime_version() {
  int v = 0;
  CUDA_CHECK(cudaRuntimeGetVersion(&v));
  return v;
}

int cuda_driver_version() {
  int v = 0;
  // Returns 0 (not an error) when no driver is installed; that is the answer we want.
  if (cudaDriverGetVersion(&v) != cudaSuccess) return 0;
  return v;
}

// The 8-4-4-4-12 hex groups of a UUID, without NVML's "GPU-" / "MIG-" prefix.
static std::string uuid_hex(const cudaUUID_t& u) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char out[48];
  std::snprintf(out, sizeof out,
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                b[13], b[14], b[15]);
  return out;
}

// NVML's memory figures for the CUDA device with this UUID / PCI bus id, or nullopt. Never throws:
// a device without NVML still lists, with its free memory unknown.
static std::optional<nvml::MemoryInfo> nvml_memory(const std::string& hex, const std::string& bus_id) {
  try {
    // A MIG compute instance: its own memory, not the board's.
    if (auto mig = nvml::find_by_uuid("MIG-" + hex)) return nvml::memory_info(*mig);
    std::optional<nvml::Device> d = nvml::find_by_uuid("GPU-" + hex);
    if (!d) d = nvml::handle_by_pci_bus_id(bus_id);
    // A board in MIG mode whose instance we could not match: its memory is not this device's.
    if (nvml::mig_mode(*d).value_or(0) == 1) return std::nullopt;
    return nvml::memory_info(*d);
  } catch (const NvmlError&) {
    return std::nullopt;
  }
}

CudaDeviceProps cuda_device_props(int device) {
  cudaDeviceProp p{};
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  CudaDeviceProps r;
  r.index = device;
  r.name = p.name;
  char bus[32] = {0};
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  r.pci_bus_id = bus;
  const std::string hex = uuid_hex(p.uuid);
  r.uuid = "GPU-" + hex;  // NVML's form, so the two compare equal
  r.cc_major = p.major;
  r.cc_minor = p.minor;
  r.sm_count = p.multiProcessorCount;
  r.l2_bytes = p.l2CacheSize;
  r.persisting_l2_max_bytes = p.persistingL2CacheMaxSize;
  r.shared_mem_per_sm = p.sharedMemPerMultiprocessor;
  r.shared_mem_per_block_optin = p.sharedMemPerBlockOptin;
  r.regs_per_sm = p.regsPerMultiprocessor;
  r.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  r.warp_size = p.warpSize;
  r.memory_total = p.totalGlobalMem;
  r.memory_bus_width_bits = p.memoryBusWidth;
  // Not cudaMemGetInfo: it needs the device current (cudaSetDevice creates the primary context).
  if (auto m = nvml_memory(hex, r.pci_bus_id)) r.memory_free = m->free;
  r.runtime_version = cuda_runtime_version();
  r.driver_version = cuda_driver_version();
  return r;
}

CudaMemoryInfo cuda_memory_info(int device) {
  DeviceScope scope(device);
  CudaMemoryInfo r;
  CUDA_CHECK(cudaMemGetInfo(&r.free, &r.total));
  return r;
}

}  // namespace roofline
