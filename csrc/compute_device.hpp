// What the compute families' kernels share with their host code (simt.cu, tensor_mma.cu,
// tensor_wgmma.cu and their *_host.cpp): the status word's values and the in-kernel clock probe.
// Kept apart from compute.hpp so that the .cu files, whose text nvcc parses once per architecture,
// include no host-only headers (<random>, <sstream>, <map>; issue 28).
#pragma once

#include <cuda_runtime.h>

namespace roofline {
namespace compute {

// Status word a kernel writes when the binary holds no code for the running GPU's architecture
// (its body was compiled out by an arch guard): the host then reports "unsupported", never a rate.
constexpr int kStatusOk = 0;
constexpr int kStatusNotCompiled = 1;

// In-kernel clock probe: thread 0 of every CTA adds its cycles and nanoseconds between the start
// and the end of its work to probe[0] and probe[1] (two 64-bit atomics per CTA and launch).
struct ClockProbe {
  unsigned long long cycles, ns;
};
#if defined(__CUDACC__)
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void probe_start(ClockProbe& p) {
  p.ns = global_ns();
  p.cycles = clock64();
}
__device__ __forceinline__ void probe_stop(const ClockProbe& p, unsigned long long* out) {
  if (out == nullptr) return;
  const unsigned long long c = clock64(), t = global_ns();
  atomicAdd(out, c - p.cycles);
  atomicAdd(out + 1, t - p.ns);
}
#endif

}  // namespace compute
}  // namespace roofline
