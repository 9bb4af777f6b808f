// The SIMT family's host side: plan, seeds, the std::fma replay that verifies, and the
// measurement through compute_skeleton.hpp. The kernel is in simt.cu (simt_launch.hpp).
#include <cuda_runtime.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compute.hpp"
#include "compute_skeleton.hpp"
#include "device.hpp"
#include "simt_launch.hpp"

namespace roofline {
namespace compute {
namespace simt {
namespace {

constexpr int kDefaultThreads = 256;

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
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, fma_kernel_fn<T>(), p.block, 0));
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
void launch_fma(const Plan& p, cudaStream_t s, const T* seeds, long long iterations, T* out,
            unsigned long long* probe = nullptr) {
  launch_fma_kernel<T>(p.grid, p.block, s, seeds, Constants<T>::m(), Constants<T>::a(), iterations, out, probe);
  CUDA_CHECK_LAUNCH();
}

// One (fp32 | fp64) benchmark for the measurement skeleton (compute_skeleton.hpp).
template <typename T>
class Bench {
 public:
  static constexpr Path kPath = Path::simt;
  Bench(const DeviceFacts& f, Precision p, const KernelConfig& c) : p_(p), c_(c), plan_(make_plan<T>(f, c)) {}

  std::string instruction() const { return p_ == Precision::fp32 ? "fma.rn.f32" : "fma.rn.f64"; }
  const void* kernel() const { return fma_kernel_fn<T>(); }
  LaunchShape shape() const { return {plan_.grid, plan_.block, 0}; }
  double flop_per_iteration() const { return 2.0 * static_cast<double>(plan_.threads()) * kUnroll * kChains; }
  std::map<std::string, long long> config(long long iterations) const {
    return {{"threads_per_block", plan_.block}, {"blocks_per_sm", plan_.blocks_per_sm}, {"chains", kChains},
            {"unroll", kUnroll},               {"iterations", iterations}};
  }

  Verification verify(cudaStream_t stream, Fault fault) const {
    const long long threads = plan_.threads();
    std::vector<T> seeds = make_seeds<T>(threads * kChains);
    DeviceBuffer d_seeds(seeds.size() * sizeof(T)), d_out(threads * sizeof(T));
    upload(stream, d_seeds, seeds);
    if (fault == Fault::Corrupt) {  // after the host kept its copy: the device now computes from a different seed
      T bad = seeds[0] * static_cast<T>(3) + static_cast<T>(1);
      roofline::upload(stream, d_seeds.get(), &bad, sizeof(T));
    }
    const long long iters = verification_iterations(c_, 2);
    const std::vector<T> out = run_for_verification<T>(stream, d_out, threads, [&](cudaStream_t s) {
      launch_fma<T>(plan_, s, d_seeds.get<T>(), iters, d_out.get<T>());
    });

    // Every thread's result is checked at the ends and on a stride through the middle; the replay
    // is ~1000 FMAs per thread, so checking all ~270k threads of a big GPU would take seconds.
    Checker check(p_ == Precision::fp32 ? 1e-6 : 1e-13);
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
    for (long long t = threads - plan_.block; t < threads; ++t) check_thread(t);
    return check.done(iters);
  }

  void prepare(cudaStream_t stream) {
    const long long threads = plan_.threads();
    std::vector<T> seeds = make_seeds<T>(threads * kChains);
    d_seeds_ = DeviceBuffer(seeds.size() * sizeof(T));
    d_out_ = DeviceBuffer(threads * sizeof(T));
    upload(stream, d_seeds_, seeds);
  }
  void launch(cudaStream_t s, long long iterations, unsigned long long* probe) {
    launch_fma<T>(plan_, s, d_seeds_.get<T>(), iterations, d_out_.get<T>(), probe);
  }
  void check_status(cudaStream_t) const {}  // the SIMT kernel exists for every target

 private:
  Precision p_;
  KernelConfig c_;
  Plan plan_;
  DeviceBuffer d_seeds_, d_out_;
};

}  // namespace

Support support(const DeviceFacts&, Precision p) {
  if (p == Precision::fp32 || p == Precision::fp64) return {true, ""};
  return {false, std::string("the SIMT path measures fp32 and fp64 only; ") + name(p) + " runs on the tensor cores"};
}

Verification verify(const DeviceFacts& f, Precision p, const KernelConfig& c, Fault fault) {
  if (p == Precision::fp32) return verify_bench<Bench<float>>(f, p, c, fault);
  return verify_bench<Bench<double>>(f, p, c, fault);
}

Measurement measure(const DeviceFacts& f, Precision p, const KernelConfig& c, int warmup, int reps) {
  if (p == Precision::fp32) return measure_bench<Bench<float>>(f, p, c, warmup, reps);
  return measure_bench<Bench<double>>(f, p, c, warmup, reps);
}

}  // namespace simt
}  // namespace compute
}  // namespace roofline
