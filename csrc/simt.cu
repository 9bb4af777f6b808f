// SIMT arithmetic roof: FP32 and FP64 fused multiply-add on the CUDA cores.
//
// Each thread runs kChains independent FMA chains, v = v * m + a, unrolled kUnroll deep inside
// the loop, so the loop's own instructions are under 1% of the issue slots and each scheduler
// always has an independent FMA ready (8 chains x 16 resident warps per scheduler hide the ~4-cycle
// FMA latency many times over). m = 1 - 2^-12 and a = 2^-12 keep every chain near its fixed point 1:
// no overflow, no denormals, no value the compiler could predict (m and a are kernel arguments).
// The chains are folded into one value per thread and written out, so nothing is dead code; the
// host replays the same recurrence with std::fma (IEEE fused, like FFMA/DFMA) to verify.
#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "compute.hpp"
#include "device.hpp"

namespace roofline {
namespace compute {
namespace simt {
namespace {

constexpr int kChains = 8;
constexpr int kUnroll = 64;
constexpr int kDefaultThreads = 256;

template <typename T>
__device__ __forceinline__ T fused(T x, T y, T z);
template <>
__device__ __forceinline__ float fused<float>(float x, float y, float z) { return fmaf(x, y, z); }
template <>
__device__ __forceinline__ double fused<double>(double x, double y, double z) { return fma(x, y, z); }

template <typename T>
__global__ void __launch_bounds__(1024) fma_kernel(const T* __restrict__ seeds, T m, T a, long long iterations,
                                                   T* __restrict__ out, unsigned long long* __restrict__ probe) {
  const long long tid = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  ClockProbe clk;
  if (threadIdx.x == 0) probe_start(clk);
  T v[kChains];
#pragma unroll
  for (int j = 0; j < kChains; ++j) v[j] = seeds[tid * kChains + j];
  for (long long it = 0; it < iterations; ++it) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int j = 0; j < kChains; ++j) v[j] = fused(v[j], m, a);
    }
  }
  T s = v[0];
#pragma unroll
  for (int j = 1; j < kChains; ++j) s = s + v[j];
  out[tid] = s;
  if (threadIdx.x == 0) probe_stop(clk, probe);
}

struct Plan {
  int block = kDefaultThreads;
  int blocks_per_sm = 0;
  int grid = 0;
  long long threads() const { return static_cast<long long>(grid) * block; }
};

template <typename T>
Plan make_plan(const DeviceFacts& f, const KernelConfig& c) {
  Plan p;
  p.block = c.threads_per_block > 0 ? c.threads_per_block : kDefaultThreads;
  if (p.block % 32 != 0 || p.block > 1024) throw CoreError("threads_per_block must be a multiple of 32, at most 1024");
  int fit = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, fma_kernel<T>, p.block, 0));
  if (fit < 1) throw CoreError("the SIMT kernel does not fit on an SM with this block size");
  p.blocks_per_sm = c.blocks_per_sm > 0 ? c.blocks_per_sm : fit;
  p.grid = p.blocks_per_sm * f.sm_count;
  return p;
}

template <typename T>
struct Constants {
  // Exact powers of two: the fixed point of v*m + a is exactly 1.
  static T m() { return static_cast<T>(1.0 - std::ldexp(1.0, -12)); }
  static T a() { return static_cast<T>(std::ldexp(1.0, -12)); }
};

template <typename T>
T host_fma(T x, T y, T z) {
  return std::fma(x, y, z);
}

template <typename T>
std::vector<T> make_seeds(long long n) {
  std::mt19937_64 rng(0x5EED5EEDull + sizeof(T));
  std::uniform_real_distribution<double> dist(0.5, 1.5);
  std::vector<T> s(static_cast<std::size_t>(n));
  for (auto& x : s) x = static_cast<T>(dist(rng));
  return s;
}

template <typename T>
void launch(const Plan& p, cudaStream_t s, const T* seeds, long long iterations, T* out,
            unsigned long long* probe = nullptr) {
  fma_kernel<T><<<p.grid, p.block, 0, s>>>(seeds, Constants<T>::m(), Constants<T>::a(), iterations, out, probe);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
Verification verify_t(const DeviceFacts& f, const KernelConfig& c, bool corrupt, const Plan& p, Precision prec) {
  DeviceScope scope(f.device);
  const long long threads = p.threads();
  std::vector<T> seeds = make_seeds<T>(threads * kChains);
  DeviceBuffer d_seeds(seeds.size() * sizeof(T)), d_out(threads * sizeof(T));
  CUDA_CHECK(cudaMemcpy(d_seeds.get(), seeds.data(), seeds.size() * sizeof(T), cudaMemcpyHostToDevice));
  if (corrupt) {  // after the host kept its copy: the device now computes from a different seed
    T bad = seeds[0] * static_cast<T>(3) + static_cast<T>(1);
    CUDA_CHECK(cudaMemcpy(d_seeds.get(), &bad, sizeof(T), cudaMemcpyHostToDevice));
  }
  CUDA_CHECK(cudaMemset(d_out.get(), 0xFF, threads * sizeof(T)));  // NaN: unwritten elements fail
  const long long iters = c.iterations > 0 && c.iterations < 4 ? c.iterations : 2;
  Stream stream;
  launch<T>(p, stream.get(), d_seeds.get<T>(), iters, d_out.get<T>());
  stream.synchronize();
  std::vector<T> out(static_cast<std::size_t>(threads));
  CUDA_CHECK(cudaMemcpy(out.data(), d_out.get(), threads * sizeof(T), cudaMemcpyDeviceToHost));

  // Every thread's result is checked at the ends and on a stride through the middle; the replay
  // is ~1000 FMAs per thread, so checking all ~270k threads of a big GPU would take seconds.
  Checker check(prec == Precision::fp32 ? 1e-6 : 1e-13);
  const long long stride = threads > 8192 ? threads / 4096 : 1;
  auto check_thread = [&](long long t) {
    T v[kChains];
    for (int j = 0; j < kChains; ++j) v[j] = seeds[t * kChains + j];
    for (long long it = 0; it < iters * kUnroll; ++it)
      for (int j = 0; j < kChains; ++j) v[j] = host_fma(v[j], Constants<T>::m(), Constants<T>::a());
    T s = v[0];
    for (int j = 1; j < kChains; ++j) s = s + v[j];
    check.check(static_cast<double>(out[t]), static_cast<double>(s), std::fabs(static_cast<double>(s)), t);
  };
  for (long long t = 0; t < threads; t += stride) check_thread(t);
  for (long long t = threads - p.block; t < threads; ++t) check_thread(t);
  return check.done(iters);
}

template <typename T>
Measurement measure_t(const DeviceFacts& f, Precision prec, const KernelConfig& c, int warmup, int reps) {
  DeviceScope scope(f.device);
  Plan p = make_plan<T>(f, c);
  Measurement m;
  m.precision = prec;
  m.path = Path::simt;
  m.facts = f;
  m.instruction = prec == Precision::fp32 ? "fma.rn.f32" : "fma.rn.f64";
  m.verification = verify_t<T>(f, c, false, p, prec);
  throw_if_failed(m.verification, prec, Path::simt);

  const long long threads = p.threads();
  std::vector<T> seeds = make_seeds<T>(threads * kChains);
  DeviceBuffer d_seeds(seeds.size() * sizeof(T)), d_out(threads * sizeof(T));
  CUDA_CHECK(cudaMemcpy(d_seeds.get(), seeds.data(), seeds.size() * sizeof(T), cudaMemcpyHostToDevice));
  Stream stream;
  auto run = [&](cudaStream_t s, long long iters) { launch<T>(p, s, d_seeds.get<T>(), iters, d_out.get<T>()); };
  m.iterations = c.iterations > 0 ? c.iterations : size_iterations(stream.get(), 16, c.target_ms, run);
  DeviceBuffer d_probe(2 * sizeof(unsigned long long));
  CUDA_CHECK(cudaMemset(d_probe.get(), 0, 2 * sizeof(unsigned long long)));
  m.timing = time_launches(stream.get(), warmup, reps, [&](cudaStream_t s) {
    launch<T>(p, s, d_seeds.get<T>(), m.iterations, d_out.get<T>(), d_probe.get<unsigned long long>());
  });
  unsigned long long probe[2] = {0, 0};
  CUDA_CHECK(cudaMemcpy(probe, d_probe.get(), sizeof probe, cudaMemcpyDeviceToHost));
  m.kernel_clock_mhz = probe_mhz(probe);

  cudaFuncAttributes attr{};
  CUDA_CHECK(cudaFuncGetAttributes(&attr, fma_kernel<T>));
  m.grid = p.grid;
  m.block = p.block;
  m.regs_per_thread = attr.numRegs;
  m.flop_per_launch = 2.0 * static_cast<double>(threads) * static_cast<double>(m.iterations) * kUnroll * kChains;
  m.config = {{"threads_per_block", p.block}, {"blocks_per_sm", p.blocks_per_sm}, {"chains", kChains},
              {"unroll", kUnroll},           {"iterations", m.iterations}};
  finish(m);
  return m;
}

}  // namespace

Support support(const DeviceFacts&, Precision p) {
  if (p == Precision::fp32 || p == Precision::fp64) return {true, ""};
  return {false, std::string("the SIMT path measures fp32 and fp64 only; ") + name(p) + " runs on the tensor cores"};
}

Verification verify(const DeviceFacts& f, Precision p, const KernelConfig& c, bool corrupt) {
  DeviceScope scope(f.device);
  if (p == Precision::fp32) return verify_t<float>(f, c, corrupt, make_plan<float>(f, c), p);
  return verify_t<double>(f, c, corrupt, make_plan<double>(f, c), p);
}

Measurement measure(const DeviceFacts& f, Precision p, const KernelConfig& c, int warmup, int reps) {
  if (p == Precision::fp32) return measure_t<float>(f, p, c, warmup, reps);
  return measure_t<double>(f, p, c, warmup, reps);
}

}  // namespace simt
}  // namespace compute
}  // namespace roofline
