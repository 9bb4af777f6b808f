// The one measurement skeleton of the three arithmetic families (simt.cu, tensor_mma.cu,
// tensor_wgmma.cu). Everything a measurement does besides its kernel is here, once:
//   verify first (a wrong kernel is never timed), upload the timing operands, size the loop so a
//   launch lasts about target_ms, warm up, time `reps` launches with CUDA events, read the SM clock
//   the kernel counted (clock64 over %globaltimer), check the status word (a binary without code for
//   this GPU reports "unsupported", never a rate), and fill the result: shape, registers, FLOPs,
//   the knobs as used, rates. NVML clocks, power and clock-event reasons are sampled around the call
//   by Python's telemetry thread (the bindings release the GIL), not here.
//
// A family describes one (precision, instruction) benchmark as a Bench type with:
//   static constexpr Path kPath;
//   Bench(const DeviceFacts&, Precision, const KernelConfig&);   // plans grid/block/smem; may throw
//   std::string instruction() const;
//   const void* kernel() const;                    // the timed kernel, for cudaFuncGetAttributes
//   LaunchShape shape() const;                     // grid, block, dynamic shared memory
//   double flop_per_iteration() const;             // FLOP (INT8: OP) of one loop trip, whole launch
//   std::map<std::string, long long> config(long long iterations) const;  // knobs as used
//   Verification verify(cudaStream_t, Fault);      // the family's reference and comparison (Corrupt:
//                                                  // an operand changes after the reference)
//   void prepare(cudaStream_t);                    // timing operands on the device
//   void launch(cudaStream_t, long long iterations, unsigned long long* probe);  // probe may be null
//   void check_status(cudaStream_t) const;         // throws when the kernel was compiled out
// so a family writes its kernel, its FLOP count and its verification, nothing else. The kernels
// are the families' own and untouched by this file: only host code is shared.
//
// One stream per measurement carries everything: uploads, the poison fill, the verification
// launch, the read-back, the timed launches (device.hpp, Stream, says why nothing may go through
// the legacy default stream). No kernel here depends on how many blocks are resident at once, on
// when a block runs, or on how long anything takes: a verification launch runs a fixed count of
// loop trips on a fixed grid, and its output is read only after its stream has drained, so its
// result is the same on an idle card and on one another process is using.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

#include "compute.hpp"
#include "device.hpp"
#include "timing.hpp"

namespace roofline {
namespace compute {

struct LaunchShape {
  int grid = 0, block = 0, smem = 0;
};

// Loop trips of a verification launch: the caller's count when it asks for 1-3 (tests of the
// dead-loop case), else the family's default. Small, so the host reference stays fast.
inline long long verification_iterations(const KernelConfig& c, long long fallback) {
  return c.iterations > 0 && c.iterations < 4 ? c.iterations : fallback;
}

// The status word of kernels whose body an arch guard may compile out (kStatusNotCompiled).
class StatusWord {
 public:
  explicit StatusWord(cudaStream_t s) : buf_(sizeof(int)) { reset(s); }
  StatusWord() : buf_(sizeof(int)) {}  // reset(stream) before the first launch
  void reset(cudaStream_t s) { fill(s, buf_.get(), 0, sizeof(int)); }
  int* get() const { return buf_.get<int>(); }
  // `missing` says what the build lacks and how to get it; thrown as CoreError when compiled out.
  void check(cudaStream_t s, const std::string& missing) const {
    int st = 0;
    roofline::download(s, &st, buf_.get(), sizeof st);
    if (st == kStatusNotCompiled) throw CoreError(missing);
  }

 private:
  DeviceBuffer buf_;
};

// Copies `count` elements of T from the device into a host vector, in `s`'s order.
template <typename T>
std::vector<T> download(cudaStream_t s, const DeviceBuffer& d, long long count) {
  std::vector<T> host(static_cast<std::size_t>(count));
  roofline::download(s, host.data(), d.get(), host.size() * sizeof(T));
  return host;
}

// Uploads a host vector into a device buffer of at least its size, in `s`'s order.
template <typename T>
void upload(cudaStream_t s, const DeviceBuffer& d, const std::vector<T>& host) {
  roofline::upload(s, d.get(), host.data(), host.size() * sizeof(T));
}

// Fills `out` with all bits set (NaN for floats, -1 for integers) so an element the kernel never
// wrote fails its check, runs `launch(s)` once, and returns the output for comparison. The fill,
// the launch and the read-back are queued on the one stream `s`, in that order: the fill cannot
// land after the kernel's stores, nor the read-back before them.
template <typename T, typename Launch>
std::vector<T> run_for_verification(cudaStream_t s, const DeviceBuffer& out, long long count, Launch&& launch) {
  fill(s, out.get(), 0xFF, static_cast<std::size_t>(count) * sizeof(T));
  launch(s);
  return download<T>(s, out, count);
}

template <class Bench>
Verification verify_bench(const DeviceFacts& f, Precision p, const KernelConfig& c, Fault fault) {
  DeviceScope scope(f.device);
  Bench b(f, p, c);
  Stream stream;
  return b.verify(stream.get(), fault);
}

template <class Bench>
Measurement measure_bench(const DeviceFacts& f, Precision p, const KernelConfig& c, int warmup, int reps) {
  DeviceScope scope(f.device);
  Bench b(f, p, c);
  Measurement m;
  m.precision = p;
  m.path = Bench::kPath;
  m.facts = f;
  m.instruction = b.instruction();
  Stream stream;
  m.verification = b.verify(stream.get(), Fault::None);
  throw_if_failed(m.verification, p, Bench::kPath);

  b.prepare(stream.get());
  auto unprobed = [&](cudaStream_t s, long long iters) { b.launch(s, iters, nullptr); };
  // The loop count comes from timing (a launch of about target_ms), but only the *timed* launches
  // use it, and the FLOPs are counted from the same number: the verified result above ran a fixed
  // count and never depends on how fast the card was at the moment.
  m.iterations = c.iterations > 0 ? c.iterations : size_iterations(stream.get(), 16, c.target_ms, unprobed);
  DeviceBuffer d_probe(2 * sizeof(unsigned long long));
  fill(stream.get(), d_probe.get(), 0, 2 * sizeof(unsigned long long));
  // Warm-up launches are probed too (time_launches runs the same launch): they ran at the same
  // clocks, so the average still describes the timed ones.
  m.timing = time_launches(stream.get(), warmup, reps, [&](cudaStream_t s) {
    b.launch(s, m.iterations, d_probe.get<unsigned long long>());
  });
  b.check_status(stream.get());
  unsigned long long probe[2] = {0, 0};
  roofline::download(stream.get(), probe, d_probe.get(), sizeof probe);
  m.kernel_clock_mhz = probe_mhz(probe);

  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, b.kernel()));
  const LaunchShape s = b.shape();
  m.grid = s.grid;
  m.block = s.block;
  m.smem_bytes = s.smem;
  m.regs_per_thread = attr.numRegs;
  m.flop_per_launch = b.flop_per_iteration() * static_cast<double>(m.iterations);
  m.config = b.config(m.iterations);
  finish(m);
  return m;
}

}  // namespace compute
}  // namespace roofline
