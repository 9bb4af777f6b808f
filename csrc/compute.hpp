// Arithmetic-throughput measurements: what the three kernel families (simt.cu, tensor_mma.cu,
// tensor_wgmma.cu) share, and the dispatch from (precision, path) to a family.
//
// Each family answers three questions for a (precision, path) pair on a device:
//   support  - can this GPU and this build run it, and if not, why (never a silent zero);
//   verify   - does the timed code path compute the right numbers on a known input;
//   measure  - verify, then time it, returning plain structs that the bindings turn into dicts.
// Policy (which path is "the" roof, fractions of peaks, what to print) lives in Python.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compute_device.hpp"
#include "cuda_check.hpp"
#include "errors.hpp"
#include "timing.hpp"
#include "verification.hpp"

namespace roofline {
namespace compute {

enum class Precision { fp32, fp64, tf32, fp16, bf16, fp8, int8 };
enum class Path { simt, mma_sync, wgmma };

inline const char* name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::fp64: return "fp64";
    case Precision::tf32: return "tf32";
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
    case Precision::fp8: return "fp8";
    case Precision::int8: return "int8";
  }
  return "?";
}

inline const char* name(Path p) {
  switch (p) {
    case Path::simt: return "simt";
    case Path::mma_sync: return "mma.sync";
    case Path::wgmma: return "wgmma";
  }
  return "?";
}

inline std::vector<Precision> all_precisions() {
  return {Precision::fp32, Precision::fp64, Precision::tf32, Precision::fp16,
          Precision::bf16, Precision::fp8,  Precision::int8};
}
inline std::vector<Path> all_paths() { return {Path::simt, Path::mma_sync, Path::wgmma}; }

inline Precision parse_precision(const std::string& s) {
  for (Precision p : all_precisions())
    if (s == name(p)) return p;
  throw CoreError("unknown precision '" + s + "' (known: fp32, fp64, tf32, fp16, bf16, fp8, int8)");
}

inline Path parse_path(const std::string& s) {
  for (Path p : all_paths())
    if (s == name(p)) return p;
  if (s == "mma_sync" || s == "mma") return Path::mma_sync;
  throw CoreError("unknown path '" + s + "' (known: simt, mma.sync, wgmma)");
}

// INT8 results are operations (multiply and add counted separately, like an FMA's 2 FLOP).
inline const char* unit(Precision p) { return p == Precision::int8 ? "TOP/s" : "TFLOP/s"; }

// The few device facts the kernels are sized from; read with cudaDeviceGetAttribute so that no
// context-heavy query (cudaGetDeviceProperties, cudaMemGetInfo) sits on the measuring path.
struct DeviceFacts {
  int device = 0;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_sm = 0;
  int smem_per_block_optin = 0;
  int clock_khz = 0;  // the maximum (boost) SM clock the driver reports; 0 if it reports none
  std::string name;
  int cc() const { return cc_major * 10 + cc_minor; }
};

inline DeviceFacts device_facts(int device) {
  DeviceFacts f;
  f.device = device;
  CUDA_CHECK(cudaDeviceGetAttribute(&f.cc_major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&f.cc_minor, cudaDevAttrComputeCapabilityMinor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&f.sm_count, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&f.max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&f.smem_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  // Not every driver/runtime pair still reports the clock attribute; its absence is not an error.
  if (cudaDeviceGetAttribute(&f.clock_khz, cudaDevAttrClockRate, device) != cudaSuccess) {
    (void)cudaGetLastError();
    f.clock_khz = 0;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  f.name = prop.name;
  return f;
}

struct Support {
  bool supported = false;
  std::string reason;  // why not, when not supported; empty otherwise
};

// Knobs of one measurement. 0 means "the family's default"; a family ignores knobs not its own.
struct KernelConfig {
  long long iterations = 0;  // loop trips per thread (simt, mma.sync) or per warpgroup (wgmma);
                             // 0 = sized so that one launch lasts about target_ms
  double target_ms = 2.0;    // burst: a few ms per launch, ~50 ms per measurement (see compute.py)
  int threads_per_block = 0;  // simt, mma.sync
  int blocks_per_sm = 0;      // simt, mma.sync (0 = as many as fit)
  int warpgroups = 0;         // wgmma: warpgroups per CTA (1..3)
  int swizzle = -1;           // wgmma: shared-memory layout of the operand tiles, 0 or 128 (-1: default)
  int a_from_registers = -1;  // wgmma: 1 = A fragments in registers, 0 = A from shared memory (-1: default)
  // Debug knob for bring-up of a new GPU: read the wgmma descriptor's two stride fields the other
  // way round. Verification must fail with it unless the hardware reads them swapped.
  bool swap_descriptor_strides = false;
};

struct Measurement {
  Precision precision = Precision::fp32;
  Path path = Path::simt;
  std::string instruction;  // the PTX instruction (or C++ operation) that does the work
  int grid = 0, block = 0, smem_bytes = 0, regs_per_thread = 0;
  long long iterations = 0;
  std::map<std::string, long long> config;  // every knob as actually used
  double flop_per_launch = 0;               // FMA = 2 FLOP; INT8 multiply-add = 2 OP
  TimingStats timing;
  double tflops_median = 0, tflops_best = 0;
  // SM clock the timed launches ran at, measured inside the kernel (clock64 cycles over
  // %globaltimer nanoseconds, summed over CTAs and launches): a cross-check of NVML's clock, which
  // is sampled coarsely and lags short bursts. 0 when not measured.
  double kernel_clock_mhz = 0;
  Verification verification;  // verification.hpp: "host reference", every field but expected/observed
  DeviceFacts facts;
};

// ---------------------------------------------------------------------------------------------
// Families (each defined in its own .cu file).
namespace simt {
Support support(const DeviceFacts& f, Precision p);
Verification verify(const DeviceFacts& f, Precision p, const KernelConfig& c, Fault fault);
Measurement measure(const DeviceFacts& f, Precision p, const KernelConfig& c, int warmup, int reps);
}  // namespace simt
namespace mma {
Support support(const DeviceFacts& f, Precision p);
Verification verify(const DeviceFacts& f, Precision p, const KernelConfig& c, Fault fault);
Measurement measure(const DeviceFacts& f, Precision p, const KernelConfig& c, int warmup, int reps);
}  // namespace mma
namespace wgmma {
Support support(const DeviceFacts& f, Precision p);
Verification verify(const DeviceFacts& f, Precision p, const KernelConfig& c, Fault fault);
Measurement measure(const DeviceFacts& f, Precision p, const KernelConfig& c, int warmup, int reps);
}  // namespace wgmma

inline Support support(const DeviceFacts& f, Precision p, Path path) {
  switch (path) {
    case Path::simt: return simt::support(f, p);
    case Path::mma_sync: return mma::support(f, p);
    case Path::wgmma: return wgmma::support(f, p);
  }
  return {false, "unknown path"};
}

inline void require_supported(const DeviceFacts& f, Precision p, Path path) {
  Support s = support(f, p, path);
  if (!s.supported)
    throw CoreError(std::string(name(p)) + " on the " + name(path) + " path is unsupported on " + f.name +
                    ": " + s.reason);
}

// `fault`: None or Corrupt (verification.hpp, Family::Compute), for tests of the verification only.
inline Verification verify(const DeviceFacts& f, Precision p, Path path, const KernelConfig& c, Fault fault) {
  require_fault(Family::Compute, fault);
  require_supported(f, p, path);
  switch (path) {
    case Path::simt: return simt::verify(f, p, c, fault);
    case Path::mma_sync: return mma::verify(f, p, c, fault);
    case Path::wgmma: return wgmma::verify(f, p, c, fault);
  }
  return {};
}

inline Measurement measure(const DeviceFacts& f, Precision p, Path path, const KernelConfig& c, int warmup,
                           int reps) {
  require_supported(f, p, path);
  if (reps < 1) throw CoreError("reps must be >= 1");
  if (warmup < 0) throw CoreError("warmup must be >= 0");
  switch (path) {
    case Path::simt: return simt::measure(f, p, c, warmup, reps);
    case Path::mma_sync: return mma::measure(f, p, c, warmup, reps);
    case Path::wgmma: return wgmma::measure(f, p, c, warmup, reps);
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the families' host code.

// A random operand value that is exact in its format, with its bit pattern. Magnitudes span
// [1/8, 2) for floating formats (varied exponents and full random mantissas, never zeros), so
// products are exact in double and the host reference has no rounding of its own.
struct Element {
  uint32_t bits = 0;
  double value = 0;
};

inline int operand_bytes(Precision p) {
  switch (p) {
    case Precision::tf32: return 4;
    case Precision::fp16:
    case Precision::bf16: return 2;
    case Precision::fp8:
    case Precision::int8: return 1;
    default: return 0;
  }
}

inline Element random_element(Precision p, std::mt19937_64& rng) {
  const uint32_t r = static_cast<uint32_t>(rng());
  const uint32_t s = r & 1u;
  const int e = static_cast<int>((r >> 1) & 3u);  // exponent -3 .. 0
  const double sign = s ? -1.0 : 1.0;
  Element el;
  switch (p) {
    case Precision::fp16: {  // 1-5-10, bias 15
      uint32_t m = (r >> 3) & 0x3FFu;
      el.bits = (s << 15) | (uint32_t(15 - e) << 10) | m;
      el.value = sign * std::ldexp(1.0 + m / 1024.0, -e);
      break;
    }
    case Precision::bf16: {  // 1-8-7, bias 127
      uint32_t m = (r >> 3) & 0x7Fu;
      el.bits = (s << 15) | (uint32_t(127 - e) << 7) | m;
      el.value = sign * std::ldexp(1.0 + m / 128.0, -e);
      break;
    }
    case Precision::tf32: {  // fp32 bits with the low 13 mantissa bits zero (the unit ignores them)
      uint32_t m = (r >> 3) & 0x3FFu;
      el.bits = (s << 31) | (uint32_t(127 - e) << 23) | (m << 13);
      el.value = sign * std::ldexp(1.0 + m / 1024.0, -e);
      break;
    }
    case Precision::fp8: {  // e4m3: 1-4-3, bias 7; exponents -3..0 stay clear of the NaN code
      uint32_t m = (r >> 3) & 0x7u;
      el.bits = (s << 7) | (uint32_t(7 - e) << 3) | m;
      el.value = sign * std::ldexp(1.0 + m / 8.0, -e);
      break;
    }
    case Precision::int8: {
      int v = static_cast<int>((r >> 8) % 255u) - 127;  // -127..127
      el.bits = static_cast<uint32_t>(v) & 0xFFu;
      el.value = v;
      break;
    }
    default: throw CoreError("random_element: not an operand format of a tensor instruction");
  }
  return el;
}

// Element-wise check of a result against an exact reference: |got - ref| <= tol * bound, where
// bound is what rounding could reach (the sum of |a*b| over the products, times the repetitions).
// NaN, or an element never written (the output is filled with NaN/sentinel first), fails.
class Checker {
 public:
  explicit Checker(double tolerance) {
    v_.method = "host reference";
    v_.tolerance = tolerance;
  }
  void check(double got, double ref, double bound, long long index) {
    ++v_.checked;
    double err = std::fabs(got - ref);
    double rel = bound > 0 ? err / bound : err;
    if (std::isnan(got) || std::isnan(rel)) rel = INFINITY;  // NaN: unwritten or broken
    if (rel > v_.tolerance) ++v_.mismatches;
    if (rel > v_.max_error || worst_.empty()) {
      v_.max_error = rel;
      std::ostringstream s;
      s.precision(10);
      s << "element " << index << ": got " << got << ", expected " << ref << " (error " << err
        << ", allowed " << v_.tolerance * bound << ")";
      worst_ = s.str();
    }
  }
  Verification done(long long iterations) {
    v_.iterations = iterations;
    v_.passed = v_.checked > 0 && v_.mismatches == 0;
    std::ostringstream s;
    s << v_.checked << " elements checked, " << v_.mismatches << " outside tolerance";
    if (!worst_.empty()) s << "; worst " << worst_;
    v_.detail = s.str();
    return v_;
  }

 private:
  Verification v_;
  std::string worst_;
};

inline void throw_if_failed(const Verification& v, Precision p, Path path) {
  if (!v.passed) {
    std::ostringstream s;
    s << "verification failed: " << name(p) << " on the " << name(path) << " path computed wrong results ("
      << v.detail << "); no throughput is reported for it";
    throw VerificationError(s.str());
  }
}

// Sizes the loop count so that one launch lasts about target_ms: probe with a small count,
// time it (after one untimed launch for module load and clock ramp-up), and scale, repeating while
// the probe is too short to time reliably.
template <typename Launch>
long long size_iterations(cudaStream_t stream, long long probe, double target_ms, Launch&& launch) {
  if (target_ms <= 0) throw CoreError("target_ms must be > 0");
  launch(stream, probe);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int round = 0; round < 6; ++round) {
    EventPair ev;
    ev.record_start(stream);
    launch(stream, probe);
    ev.record_stop(stream);
    double ms = ev.elapsed_ms();
    if (ms >= 0.25 * target_ms || ms >= 2.0 || round == 5) {
      double scaled = static_cast<double>(probe) * target_ms / (ms > 1e-3 ? ms : 1e-3);
      return scaled < 1 ? 1 : static_cast<long long>(scaled);
    }
    probe *= 8;
  }
  return probe;
}

inline double probe_mhz(const unsigned long long (&host)[2]) {
  return host[1] ? 1e3 * static_cast<double>(host[0]) / static_cast<double>(host[1]) : 0.0;
}

inline void finish(Measurement& m) {
  auto rate = [&](double ms) { return ms > 0 ? m.flop_per_launch / (ms * 1e-3) / 1e12 : 0.0; };
  m.tflops_median = rate(m.timing.median_ms);
  m.tflops_best = rate(m.timing.best_ms);
}

}  // namespace compute
}  // namespace roofline
