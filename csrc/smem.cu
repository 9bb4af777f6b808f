// Shared-memory read bandwidth (see smem.hpp for the contract).
//
// Each block fills a buffer of threads x vectors x width bytes with data_word(block seed, i), then
// every thread reads its `vectors` accesses of the buffer once per pass, `passes` times. Thread t
// reads bytes [t x width, (t + 1) x width) of every threads x width slice, so a warp's access is
// one contiguous run: 4-byte loads put the 32 lanes in 32 distinct banks, and 16-byte loads give
// each quarter-warp 128 contiguous bytes, again all 32 banks once. Either way no access has a bank
// conflict, and the pipe moves 128 bytes per clock per SM when it is full (32 banks x 4 bytes per
// clock: the CUDA C++ Programming Guide's shared-memory description for compute capability 5.x and
// later, the figure measure/smem.py uses for the ceiling).
//
// The loads are volatile inline PTX, so the compiler can neither hoist them out of the pass loop
// (the buffer does not change) nor merge them; every loaded word goes into one of four per-thread
// sums (four, so the additions are not one dependent chain), written out at the end and compared
// with the host's exact sums (ref::smem_thread_sum), every thread of every block.
#include "smem.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "compute.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "host_clock.hpp"
#include "host_reference.hpp"

namespace roofline {
namespace {

template <int W>
__device__ __forceinline__ std::uint32_t lds_fold(std::uint32_t addr) {
  // The "memory" clobber keeps each load after the fill and its barrier; ptxas still schedules
  // the loads of one pass together.
  if constexpr (W == 16) {
    std::uint32_t x, y, z, w;
    asm volatile("ld.volatile.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "r"(addr) : "memory");
    return (x + y) + (z + w);
  } else {
    std::uint32_t x;
    asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(x) : "r"(addr) : "memory");
    return x;
  }
}

// T threads, W bytes per load, V loads per thread per pass. probe holds two counters per launch
// (cycles, nanoseconds), `slot` picks this launch's.
template <int T, int W, int V>
__global__ void __launch_bounds__(T) smem_read_kernel(long long passes, std::uint32_t seed, std::uint32_t* __restrict__ out,
                                                      unsigned long long* __restrict__ probe, int slot) {
  extern __shared__ __align__(16) std::uint32_t buf[];
  constexpr std::uint32_t kWords = static_cast<std::uint32_t>(T) * V * (W / 4);
  const std::uint32_t key = ref::smem_block_seed(seed, blockIdx.x);
  for (std::uint32_t i = threadIdx.x; i < kWords; i += T) buf[i] = ref::data_word(key, i);
  __syncthreads();

  compute::ClockProbe clk{};
  if (threadIdx.x == 0) compute::probe_start(clk);
  const std::uint32_t base = static_cast<std::uint32_t>(__cvta_generic_to_shared(buf)) + threadIdx.x * W;
  std::uint32_t acc[4] = {0, 0, 0, 0};
  for (long long p = 0; p < passes; ++p) {
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k % 4] += lds_fold<W>(base + static_cast<std::uint32_t>(k * T * W));
  }
  if (threadIdx.x == 0) compute::probe_stop(clk, probe + 2 * slot);
  out[static_cast<std::uint64_t>(blockIdx.x) * T + threadIdx.x] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

struct SmemKernel {
  const void* fn = nullptr;
  void (*launch)(unsigned grid, std::size_t smem, cudaStream_t, long long passes, std::uint32_t seed,
                 std::uint32_t* out, unsigned long long* probe, int slot) = nullptr;
};

template <int T, int W, int V>
SmemKernel smem_kernel() {
  return {reinterpret_cast<const void*>(&smem_read_kernel<T, W, V>),
          [](unsigned g, std::size_t smem, cudaStream_t st, long long passes, std::uint32_t seed, std::uint32_t* out,
             unsigned long long* probe, int slot) {
            smem_read_kernel<T, W, V><<<g, T, smem, st>>>(passes, seed, out, probe, slot);
          }};
}

// The instantiations compiled in: one table, read by dispatch and by the capability lists.
struct SmemEntry {
  int threads, width, vectors;
  SmemKernel (*make)();
};
constexpr SmemEntry kSmemKernels[] = {
    {256, 16, 8, &smem_kernel<256, 16, 8>},   {256, 16, 16, &smem_kernel<256, 16, 16>},
    {512, 16, 8, &smem_kernel<512, 16, 8>},   {512, 16, 16, &smem_kernel<512, 16, 16>},
    {1024, 16, 8, &smem_kernel<1024, 16, 8>}, {1024, 16, 16, &smem_kernel<1024, 16, 16>},
    {256, 4, 8, &smem_kernel<256, 4, 8>},     {256, 4, 16, &smem_kernel<256, 4, 16>},
    {512, 4, 8, &smem_kernel<512, 4, 8>},     {512, 4, 16, &smem_kernel<512, 4, 16>},
    {1024, 4, 8, &smem_kernel<1024, 4, 8>},   {1024, 4, 16, &smem_kernel<1024, 4, 16>},
};

const SmemEntry& entry_for(const SmemConfig& c) {
  for (const auto& e : kSmemKernels)
    if (e.threads == c.threads && e.width == c.width && e.vectors == c.vectors) return e;
  std::ostringstream s;
  s << "shared-memory configuration threads=" << c.threads << " width=" << c.width << " vectors=" << c.vectors
    << " is not compiled into this build (threads 256/512/1024, width 4/16, vectors 8/16)";
  throw std::invalid_argument(s.str());
}

void validate(int reps, int warmup, double target_ms, long long passes, const std::vector<SmemConfig>& configs) {
  if (reps < 1) throw std::invalid_argument("reps must be at least 1");
  if (warmup < 0) throw std::invalid_argument("warmup must not be negative");
  if (passes < 0) throw std::invalid_argument("passes must not be negative (0 = size to target_ms)");
  if (passes == 0 && !(target_ms > 0)) throw std::invalid_argument("target_ms must be > 0 when passes is 0");
  if (configs.empty()) throw std::invalid_argument("no configurations given");
  for (const auto& c : configs) {
    entry_for(c);
    if (c.blocks_per_sm < 0) throw std::invalid_argument("blocks_per_sm must not be negative");
  }
}

struct Plan {
  unsigned grid = 0;
  int blocks_per_sm = 0, occupancy = 0;
  std::size_t smem = 0;
  std::string skipped;
};

// One wave: SMs x resident blocks, so every block runs from the first cycle to the last and the
// kernel's time is the blocks' time. Shared memory is given the whole carveout it can have.
Plan plan_for(int device, const SmemKernel& k, const SmemConfig& c, int sms) {
  Plan p;
  p.smem = static_cast<std::size_t>(c.threads) * c.vectors * c.width;
  int optin = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (p.smem > static_cast<std::size_t>(optin)) {
    p.skipped = "a buffer of " + std::to_string(p.smem) + " bytes exceeds the " + std::to_string(optin) +
                " bytes of shared memory a block may have";
    return p;
  }
  CUDA_CHECK(cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(p.smem)));
  CUDA_CHECK(cudaFuncSetAttribute(k.fn, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&p.occupancy, k.fn, c.threads, p.smem));
  if (p.occupancy < 1) {
    p.skipped = "no block of " + std::to_string(c.threads) + " threads with " + std::to_string(p.smem) +
                " bytes of shared memory fits on an SM";
    return p;
  }
  p.blocks_per_sm = c.blocks_per_sm > 0 ? std::min(c.blocks_per_sm, p.occupancy) : p.occupancy;
  p.grid = static_cast<unsigned>(sms) * static_cast<unsigned>(p.blocks_per_sm);
  return p;
}

// Compares every thread's sum with the host's; raises VerificationError naming the first wrong one.
long long verify_sums(cudaStream_t s, const std::uint32_t* dev, const SmemConfig& c, const Plan& p, long long passes,
                      std::uint32_t seed) {
  const std::uint64_t n = static_cast<std::uint64_t>(p.grid) * c.threads;
  std::vector<std::uint32_t> got(n);
  download(s, got.data(), dev, n * sizeof(std::uint32_t));
  const std::uint64_t words = p.smem / 4;
  const std::uint32_t width_words = static_cast<std::uint32_t>(c.width / 4);
  std::uint64_t bad = 0, first = 0;
  std::uint32_t first_expected = 0;
  for (std::uint32_t b = 0; b < p.grid; ++b) {
    const std::uint32_t key = ref::smem_block_seed(seed, b);
    for (std::uint32_t t = 0; t < static_cast<std::uint32_t>(c.threads); ++t) {
      const std::uint32_t want = ref::smem_thread_sum(key, t, c.threads, width_words, words,
                                                      static_cast<std::uint64_t>(passes));
      const std::uint64_t i = static_cast<std::uint64_t>(b) * c.threads + t;
      if (got[i] != want) {
        if (!bad) {
          first = i;
          first_expected = want;
        }
        ++bad;
      }
    }
  }
  ROOFLINE_VERIFY(bad == 0, "shared memory: " << bad << " of " << n << " thread sums differ from the host's; first "
                                              << "at block " << first / c.threads << " thread " << first % c.threads
                                              << ": expected 0x" << std::hex << first_expected << ", got 0x"
                                              << got[first] << std::dec << " (0xffffffff = never written)");
  return static_cast<long long>(n);
}

std::vector<double> clocks_of(cudaStream_t s, const DeviceBuffer& probe, int warmup, int reps) {
  std::vector<unsigned long long> host(2 * static_cast<std::size_t>(warmup + reps));
  download(s, host.data(), probe.get(), host.size() * sizeof(unsigned long long));
  std::vector<double> mhz;
  for (int i = warmup; i < warmup + reps; ++i) {
    const unsigned long long pair[2] = {host[2 * i], host[2 * i + 1]};
    mhz.push_back(compute::probe_mhz(pair));
  }
  return mhz;
}

SmemResult measure_one(int device, const SmemConfig& c, int sms, int reps, int warmup, double target_ms,
                       long long passes, std::uint32_t seed, Fault fault) {
  const SmemKernel k = entry_for(c).make();
  const Plan p = plan_for(device, k, c, sms);
  SmemResult r;
  r.config = c;
  r.sm_count = sms;
  r.warmup = warmup;
  r.seed = seed;
  r.verification.method = "per-thread checksum";
  r.smem_bytes_per_block = p.smem;
  r.occupancy_blocks_per_sm = p.occupancy;
  r.skipped = p.skipped;
  if (!p.skipped.empty()) return r;
  r.grid = static_cast<int>(p.grid);
  r.blocks_per_sm = p.blocks_per_sm;

  Stream stream;
  DeviceBuffer out(static_cast<std::size_t>(p.grid) * c.threads * sizeof(std::uint32_t));
  DeviceBuffer probe(2 * sizeof(unsigned long long) * static_cast<std::size_t>(warmup + reps + 1));
  fill(stream.get(), probe.get(), 0, probe.bytes());
  unsigned long long* probe_p = probe.get<unsigned long long>();
  const int sizing_slot = warmup + reps;  // the sizing launches share one slot nobody reads
  auto sized = [&](cudaStream_t s, long long n) {
    k.launch(p.grid, p.smem, s, n, seed, out.get<std::uint32_t>(), probe_p, sizing_slot);
    CUDA_CHECK_LAUNCH();
  };
  r.passes = passes > 0 ? passes : compute::size_iterations(stream.get(), 64, target_ms, sized);
  // The fault runs one pass fewer than the host's sums assume.
  const long long run_passes = fault == Fault::Short ? std::max(0LL, r.passes - 1) : r.passes;
  fill(stream.get(), out.get(), 0xff, out.bytes());
  int slot = 0;
  r.timing = time_launches(stream.get(), warmup, reps, [&](cudaStream_t s) {
    k.launch(p.grid, p.smem, s, run_passes, seed, out.get<std::uint32_t>(), probe_p, slot++);
    CUDA_CHECK_LAUNCH();
  });
  r.timed_end_s = steady_clock_s();
  r.bytes_per_launch = static_cast<std::size_t>(p.grid) * p.smem * static_cast<std::size_t>(r.passes);
  r.kernel_clock_mhz = clocks_of(stream.get(), probe, warmup, reps);
  r.verification.checked = verify_sums(stream.get(), out.get<std::uint32_t>(), c, p, r.passes, seed);
  r.verification.passed = true;  // a wrong sum threw
  return r;
}

}  // namespace

std::vector<SmemResult> run_smem(int device, int reps, int warmup, double target_ms, long long passes,
                                 const std::vector<SmemConfig>& configs, std::uint32_t seed, Fault fault) {
  validate(reps, warmup, target_ms, passes, configs);
  require_fault(Family::SharedMemory, fault);
  DeviceScope scope(device);
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  std::vector<SmemResult> results;
  for (const auto& c : configs) results.push_back(measure_one(device, c, sms, reps, warmup, target_ms, passes, seed, fault));
  return results;
}

namespace {
template <typename Field>
std::vector<int> distinct(Field f) {
  std::vector<int> v;
  for (const auto& e : kSmemKernels)
    if (std::find(v.begin(), v.end(), f(e)) == v.end()) v.push_back(f(e));
  return v;
}
}  // namespace

std::vector<int> smem_threads() { return distinct([](const SmemEntry& e) { return e.threads; }); }
std::vector<int> smem_widths() { return distinct([](const SmemEntry& e) { return e.width; }); }
std::vector<int> smem_vectors() { return distinct([](const SmemEntry& e) { return e.vectors; }); }

}  // namespace roofline
