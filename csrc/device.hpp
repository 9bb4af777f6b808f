// CUDA device attributes and move-only RAII owners (device scope, buffer, stream, events).
// Destructors never throw: a failing free during unwinding would terminate the process.
//
// Listing (cuda_device_count, cuda_device_props) creates no CUDA context: it uses only calls that
// initialise the runtime and driver but leave the primary context alone (cudaGetDeviceCount,
// cudaGetDeviceProperties, cudaDeviceGetAttribute, cudaDeviceGetPCIBusId), and takes free memory
// from NVML. Everything below DeviceScope (and cuda_memory_info) is the measurement side: it makes
// the device current, which creates its primary context (cudaSetDevice does so since CUDA 12).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "cuda_check.hpp"

namespace roofline {

struct CudaDeviceProps {
  int index = 0;
  std::string name;
  std::string pci_bus_id;  // "0000:00:06.0" form, as cudaDeviceGetPCIBusId gives it
  std::string uuid;        // "GPU-xxxxxxxx-..." form, matching NVML's
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int l2_bytes = 0;
  int persisting_l2_max_bytes = 0;
  std::size_t shared_mem_per_sm = 0;
  std::size_t shared_mem_per_block_optin = 0;
  int regs_per_sm = 0;
  int max_threads_per_sm = 0;
  int warp_size = 32;
  std::size_t memory_total = 0;  // cudaDeviceProp::totalGlobalMem: a device attribute, no context
  // From NVML (nvmlDeviceGetMemoryInfo), not cudaMemGetInfo, which needs the device's context.
  // Empty when NVML cannot say (no NVML, or a MIG instance NVML cannot be matched to).
  std::optional<std::uint64_t> memory_free;
  int memory_bus_width_bits = 0;
  int runtime_version = 0;
  int driver_version = 0;  // CUDA version the driver supports, e.g. 13000
};

// Number of CUDA devices, or throws CudaError carrying why there are none
// (cudaErrorInsufficientDriver = 35, cudaErrorNoDevice = 100, ...).
int cuda_device_count();
// Attributes of one device; creates no context (see the top of this file).
CudaDeviceProps cuda_device_props(int device);

// cudaMemGetInfo with `device` current: what this process can still allocate there. Creates the
// device's primary context (the measurement will need it anyway); for sizing buffers, not listing.
struct CudaMemoryInfo {
  std::size_t free = 0, total = 0;
};
CudaMemoryInfo cuda_memory_info(int device);
int cuda_runtime_version();
int cuda_driver_version();  // 0 when no driver is installed

// Makes `device` current for the scope and restores the previous one after.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    CUDA_CHECK(cudaGetDevice(&previous_));
    CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceScope() { (void)cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

// Owns a device allocation made with cudaMalloc (never managed memory: oversubscribing it can hang
// the GPU).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes_) CUDA_CHECK(cudaMalloc(&ptr_, bytes_));
  }
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }
  void reset() noexcept {
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A stream that does not synchronise with the legacy default stream (so another library's work on
// stream 0 in this process never serialises with a measurement). The price, and the cause of the
// wrong data of issue 29: cudaMemcpy / cudaMemset / cudaMemcpyToSymbol without a stream run on the
// legacy stream, which a Stream's kernels do NOT wait for. A fill issued that way could land after
// the kernel it was meant to precede (the NaN poison overwrote finished results), and a pageable
// cudaMemcpy host-to-device returns once the source is staged, before the device holds it. On an
// idle card the legacy-stream work happened to finish first; under another process's memory
// traffic it did not. So every transfer and fill of the measuring path goes through the
// stream-ordered helpers below, on the stream that runs the kernels; tests/test_check_native_order.py
// refuses a bare cudaMemcpy/cudaMemset anywhere in csrc/ outside this file.
class Stream {
 public:
  Stream() { CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (s_) (void)cudaStreamDestroy(s_);
  }
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void synchronize() const { CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  cudaStream_t s_ = nullptr;
};

// Stream-ordered transfers and fills (see Stream). Each is queued on `s` behind every kernel already
// queued there and ahead of every later one. upload and download also wait for the copy: the host
// buffer (often pageable, often a temporary) is then free to go, and a download's data is there.
inline void upload(cudaStream_t s, void* dst, const void* src, std::size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
}
inline void download(cudaStream_t s, void* dst, const void* src, std::size_t bytes) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
}
// No wait: the fill is ordered before the stream's next kernel, which is all a fill needs.
inline void fill(cudaStream_t s, void* dst, int byte, std::size_t bytes) {
  CUDA_CHECK(cudaMemsetAsync(dst, byte, bytes, s));
}

// A start/stop pair of CUDA events; elapsed_ms() synchronizes on the stop event.
class EventPair {
 public:
  EventPair() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventPair() {
    if (start_) (void)cudaEventDestroy(start_);
    if (stop_) (void)cudaEventDestroy(stop_);
  }
  EventPair(EventPair&& o) noexcept : start_(std::exchange(o.start_, nullptr)), stop_(std::exchange(o.stop_, nullptr)) {}
  EventPair& operator=(EventPair&&) = delete;
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  void record_start(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(start_, s)); }
  void record_stop(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(stop_, s)); }
  float elapsed_ms() const {
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace roofline
