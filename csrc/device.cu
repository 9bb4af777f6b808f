// Device attributes through the CUDA runtime. Identity beyond what CUDA knows (clocks, power,
// ECC, MIG) comes from NVML in nvml.cpp; the two are matched by PCI bus id in Python.
#include "device.hpp"

#include <cstdio>

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

static std::string format_uuid(const cudaUUID_t& u) {
  // NVML prints UUIDs as GPU-8-4-4-4-12 hex groups; use the same form so they compare equal.
  const unsigned char* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char out[64];
  std::snprintf(out, sizeof out,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                b[13], b[14], b[15]);
  return out;
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
  r.uuid = format_uuid(p.uuid);
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
  {
    DeviceScope scope(device);
    std::size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    r.memory_free = free_b;
  }
  r.runtime_version = cuda_runtime_version();
  r.driver_version = cuda_driver_version();
  return r;
}

}  // namespace roofline
