// Why does copy stop near 4.3 TB/s on an H200 when reads alone reach 4.6 and writes 4.7?
// A standalone experiment (not part of the package) that tries, on one card in one run, what a
// kernel can change about the request stream a copy sends to HBM:
//   placement  dst - src offset (STREAM's OFFSET: src[i] and dst[i] in one DRAM bank, other rows)
//   hints      L2 eviction-priority policies on the loads and stores
//   order      which chunk each block takes (one contiguous window vs several far apart)
//   prefetch   L2 bulk prefetch of the source ahead of the loads
//   persistent grid-stride loops with loads of the next chunk issued before the stores
//   occupancy  resident blocks per SM (bytes in flight)
//   duration   back-to-back launches vs launches spaced out on a cooling card
//   driver     cudaMemcpyAsync
//   triad      placement of the three arrays and hints
// Every launch's output is checked over the whole destination on the device (mismatch count);
// a configuration whose output is wrong is reported with its count and no number counts from it.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o copy_ceiling copy_ceiling.cu
//   ./copy_ceiling out.json [reps=20]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "copy_ceiling: %s failed at line %d: %s\n", #x, __LINE__,            \
                   cudaGetErrorString(e_));                                                     \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

namespace {

constexpr float kScalar = 1.5f;

__device__ __forceinline__ uint32_t mix32(uint32_t x) {
  x ^= x >> 16; x *= 0x85ebca6bu; x ^= x >> 13; x *= 0xc2b2ae35u; x ^= x >> 16;
  return x;
}

// Random floats in [-1, 1): random bits draw the power real data draws (docs/measuring.md).
__global__ void fill_random(uint32_t* p, uint64_t n, uint32_t seed) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = __float_as_uint((float)(mix32((uint32_t)i ^ mix32(seed + (uint32_t)(i >> 32))) >> 8) * (1.0f / 8388608.0f) - 1.0f);
}

__global__ void count_copy_mismatches(const uint4* a, const uint4* b, uint64_t n, unsigned long long* bad) {
  unsigned long long c = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint4 x = a[i], y = b[i];
    c += (x.x != y.x) | (x.y != y.y) | (x.z != y.z) | (x.w != y.w);
  }
  if (c) atomicAdd(bad, c);
}

__device__ __forceinline__ uint32_t triad_word(uint32_t b, uint32_t c) {
  return __float_as_uint(__fmaf_rn(kScalar, __uint_as_float(c), __uint_as_float(b)));
}

__global__ void count_triad_mismatches(const uint4* b, const uint4* c, const uint4* a, uint64_t n, unsigned long long* bad) {
  unsigned long long k = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    const uint4 x = b[i], y = c[i], z = a[i];
    k += (triad_word(x.x, y.x) != z.x) | (triad_word(x.y, y.y) != z.y) | (triad_word(x.z, y.z) != z.z) |
         (triad_word(x.w, y.w) != z.w);
  }
  if (k) atomicAdd(bad, k);
}

// Access flavours. Loads: NcNa = read-only path without L1 allocation (the package's best copy
// load), Cs = streaming, EvictFirst = L2 evict_first policy. Stores: Cs = streaming, EvictFirst /
// EvictLast / EvictUnchanged = L2 policies, NoAlloc = L1::no_allocate, Wt = write-through (does
// it make L2 pass writes on to DRAM in the order they were issued, next to the reads?), Cg = L2
// only, Volatile.
enum Flavour { NcNa, Cs, EvictFirst, EvictLast, EvictUnchanged, NoAlloc, Wt, Cg, Volatile };

template <Flavour F>
__device__ __forceinline__ uint64_t policy() {
  uint64_t p = 0;
  if constexpr (F == EvictFirst) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  if constexpr (F == EvictLast) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  if constexpr (F == EvictUnchanged) asm volatile("createpolicy.fractional.L2::evict_unchanged.b64 %0, 1.0;" : "=l"(p));
  return p;
}

template <Flavour F>
__device__ __forceinline__ uint4 load(const uint4* p) {
  uint4 v;
  if constexpr (F == NcNa) {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else if constexpr (F == Cs) {
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else {
    static_assert(F == EvictFirst, "load flavour");
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy<F>()));
  }
  return v;
}

template <Flavour F>
__device__ __forceinline__ void store(uint4* p, uint4 v) {
  if constexpr (F == Cs) {
    asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  } else if constexpr (F == Wt) {
    asm volatile("st.global.wt.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  } else if constexpr (F == Cg) {
    asm volatile("st.global.cg.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  } else if constexpr (F == Volatile) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  } else if constexpr (F == NoAlloc) {
    asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  } else {
    static_assert(F == EvictFirst || F == EvictLast || F == EvictUnchanged, "store flavour");
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
                 "r"(v.w), "l"(policy<F>())
                 : "memory");
  }
}

// One vector per thread, one chunk (blockDim vectors) per block: the package's best copy shape.
// streams > 1: block b takes chunk (b % streams) * (chunks / streams) + b / streams, so the
// resident blocks work in `streams` windows far apart instead of one. prefetch > 0: thread 0
// asks L2 to fetch the chunk `prefetch` blocks ahead. The dynamic shared memory only limits
// occupancy.
template <Flavour L, Flavour S>
__global__ void copy_one_shot(const uint4* __restrict__ src, uint4* __restrict__ dst, uint64_t n, int streams, int prefetch) {
  const uint64_t chunks = n / blockDim.x;
  uint64_t b = blockIdx.x;
  if (streams > 1) b = (b % streams) * (chunks / streams) + b / streams;
  if (prefetch > 0 && threadIdx.x == 0 && b + prefetch < chunks)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src + (b + prefetch) * blockDim.x),
                 "r"(static_cast<unsigned>(blockDim.x * 16))
                 : "memory");
  const uint64_t i = b * blockDim.x + threadIdx.x;
  if (i < n) store<S>(dst + i, load<L>(src + i));
}

// Persistent grid, grid-stride over chunks of U vectors per thread; the next chunk's loads are
// issued before the current chunk's stores (software pipelining).
template <int U>
__global__ void copy_persistent(const uint4* __restrict__ src, uint4* __restrict__ dst, uint64_t n) {
  const uint64_t chunk = (uint64_t)U * blockDim.x, chunks = n / chunk;
  uint64_t k = blockIdx.x;
  if (k >= chunks) return;
  uint4 cur[U], next[U];
#pragma unroll
  for (int j = 0; j < U; ++j) cur[j] = load<NcNa>(src + k * chunk + j * blockDim.x + threadIdx.x);
  for (; k < chunks; k += gridDim.x) {
    const uint64_t kn = k + gridDim.x;
    if (kn < chunks) {
#pragma unroll
      for (int j = 0; j < U; ++j) next[j] = load<NcNa>(src + kn * chunk + j * blockDim.x + threadIdx.x);
    }
#pragma unroll
    for (int j = 0; j < U; ++j) store<Cs>(dst + k * chunk + j * blockDim.x + threadIdx.x, cur[j]);
#pragma unroll
    for (int j = 0; j < U; ++j) cur[j] = next[j];
  }
}

template <Flavour L, Flavour S>
__global__ void triad_one_shot(const uint4* __restrict__ b, const uint4* __restrict__ c, uint4* __restrict__ a, uint64_t n) {
  const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    const uint4 x = load<L>(b + i), y = load<L>(c + i);
    store<S>(a + i, make_uint4(triad_word(x.x, y.x), triad_word(x.y, y.y), triad_word(x.z, y.z), triad_word(x.w, y.w)));
  }
}

struct Timing {
  double median_ms = 0, best_ms = 0, cv = 0, first10_ms = 0, last10_ms = 0;
};

// CUDA events around every launch; `gap_ms` > 0 waits for each launch and idles that long before
// the next (a card cooling between bursts).
template <class Launch>
Timing time_launches(Launch launch, int reps, int warmup, int gap_ms) {
  static std::vector<cudaEvent_t> start, stop;
  while (static_cast<int>(start.size()) < reps) {
    start.emplace_back(); stop.emplace_back();
    CK(cudaEventCreate(&start.back()));
    CK(cudaEventCreate(&stop.back()));
  }
  for (int i = 0; i < warmup; ++i) launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(start[i]));
    launch();
    CK(cudaEventRecord(stop[i]));
    if (gap_ms > 0) {
      CK(cudaEventSynchronize(stop[i]));
      std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    }
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<double> t(reps);
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, start[i], stop[i]));
    t[i] = ms;
  }
  Timing r;
  const int k = std::min(10, reps);
  for (int i = 0; i < k; ++i) { r.first10_ms += t[i] / k; r.last10_ms += t[reps - 1 - i] / k; }
  double mean = 0, var = 0;
  for (double x : t) mean += x / reps;
  for (double x : t) var += (x - mean) * (x - mean) / reps;
  r.cv = std::sqrt(var) / mean;
  std::sort(t.begin(), t.end());
  r.median_ms = t[reps / 2];
  r.best_ms = t[0];
  return r;
}

struct Experiment {
  const uint64_t bytes = 4ull << 30;  // per array: 64x an H200's 60 MiB L2
  const uint64_t n = bytes / 16;
  const uint64_t slack = 256ull << 20;
  char* pool = nullptr;  // three arrays with room to move them against each other
  unsigned long long* bad = nullptr;
  int reps = 20;
  FILE* json = nullptr;
  bool first = true;
  int failures = 0;

  const uint4* src() const { return reinterpret_cast<const uint4*>(pool); }
  uint4* at(uint64_t byte_offset) const { return reinterpret_cast<uint4*>(pool + byte_offset); }

  unsigned long long copy_mismatches(const uint4* s, const uint4* d) {
    CK(cudaMemset(bad, 0, sizeof *bad));
    count_copy_mismatches<<<132 * 16, 512>>>(s, d, n, bad);
    unsigned long long h = 0;
    CK(cudaMemcpy(&h, bad, sizeof h, cudaMemcpyDeviceToHost));
    return h;
  }
  unsigned long long triad_mismatches(const uint4* b, const uint4* c, const uint4* a) {
    CK(cudaMemset(bad, 0, sizeof *bad));
    count_triad_mismatches<<<132 * 16, 512>>>(b, c, a, n, bad);
    unsigned long long h = 0;
    CK(cudaMemcpy(&h, bad, sizeof h, cudaMemcpyDeviceToHost));
    return h;
  }

  void record(const char* group, const std::string& name, double traffic, const Timing& t, int reps_used, int gap_ms,
              unsigned long long mismatches) {
    const double med = traffic / (t.median_ms * 1e-3) / 1e12, best = traffic / (t.best_ms * 1e-3) / 1e12;
    if (mismatches) ++failures;
    std::printf("%-10s %-40s %7.4f / %7.4f TB/s  cv %.2f%%%s\n", group, name.c_str(), med, best, 100 * t.cv,
                mismatches ? "  WRONG OUTPUT" : "");
    std::fprintf(json,
                 "%s\n  {\"group\": \"%s\", \"name\": \"%s\", \"tbps_median\": %.5f, \"tbps_best\": %.5f, \"cv\": %.5f, "
                 "\"tbps_first10\": %.5f, \"tbps_last10\": %.5f, \"reps\": %d, \"gap_ms\": %d, \"bytes_per_launch\": %.0f, "
                 "\"mismatches\": %llu}",
                 first ? "" : ",", group, name.c_str(), mismatches ? 0.0 : med, mismatches ? 0.0 : best, t.cv,
                 traffic / (t.first10_ms * 1e-3) / 1e12, traffic / (t.last10_ms * 1e-3) / 1e12, reps_used, gap_ms,
                 traffic, mismatches);
    first = false;
  }

  // One copy configuration: poison the destination, time, check every element.
  template <class Launch>
  void copy(const char* group, const std::string& name, uint4* dst, Launch launch, int reps_used = 0, int gap_ms = 0) {
    reps_used = reps_used ? reps_used : reps;
    CK(cudaMemset(dst, 0xff, bytes));
    const Timing t = time_launches(launch, reps_used, 3, gap_ms);
    record(group, name, 2.0 * bytes, t, reps_used, gap_ms, copy_mismatches(src(), dst));
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: copy_ceiling OUT.json [reps=20]\n");
    return 2;
  }
  Experiment x;
  x.reps = argc > 2 ? std::max(5, std::atoi(argv[2])) : 20;
  x.json = std::fopen(argv[1], "w");
  if (!x.json) {
    std::fprintf(stderr, "copy_ceiling: cannot write %s\n", argv[1]);
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  char uuid[64];
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
                u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  const int sms = prop.multiProcessorCount;
  std::printf("copy_ceiling on %s (%s), %d SMs, L2 %d MiB, 4 GiB arrays, %d reps\n", prop.name, uuid, sms,
              prop.l2CacheSize >> 20, x.reps);
  std::fprintf(x.json, "{\"gpu_name\": \"%s\", \"uuid\": \"%s\", \"sm_count\": %d, \"l2_bytes\": %d, \"array_bytes\": %llu, \"results\": [",
               prop.name, uuid, sms, prop.l2CacheSize, static_cast<unsigned long long>(x.bytes));

  const uint64_t pool_bytes = 3 * x.bytes + 3 * x.slack;
  CK(cudaMalloc(&x.pool, pool_bytes));
  CK(cudaMalloc(&x.bad, sizeof *x.bad));
  fill_random<<<sms * 8, 256>>>(reinterpret_cast<uint32_t*>(x.pool), pool_bytes / 4, 2026);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  const uint64_t n = x.n;
  const uint4* src = x.src();
  uint4* dst0 = x.at(x.bytes);  // the destination right after the source
  auto base = [&](uint4* d, unsigned threads = 256, int smem = 0) {
    return [=] { copy_one_shot<NcNa, Cs><<<n / threads, threads, smem>>>(src, d, n, 1, 0); };
  };

  // Duration first, on a card that has idled: does the figure depend on how long or how spaced
  // the launches are (power, temperature)?
  std::this_thread::sleep_for(std::chrono::seconds(3));
  x.copy("duration", "20 launches from idle", dst0, base(dst0), 20);
  x.copy("duration", "500 back-to-back", dst0, base(dst0), 500);
  x.copy("duration", "30, 20 ms idle between", dst0, base(dst0), 30, 20);
  x.copy("duration", "20, 100 ms idle between", dst0, base(dst0), 20, 100);

  x.copy("baseline", "one-shot t256 nc_na/cs", dst0, base(dst0));
  for (unsigned t : {64u, 128u, 512u, 1024u})
    x.copy("baseline", "one-shot t" + std::to_string(t) + " nc_na/cs", dst0, base(dst0, t));
  x.copy("driver", "cudaMemcpyAsync", dst0, [&] { CK(cudaMemcpyAsync(dst0, src, x.bytes, cudaMemcpyDeviceToDevice)); });

  std::vector<uint64_t> gaps;
  for (uint64_t k = 0; k < 64; ++k) gaps.push_back(k * 1024);
  for (uint64_t g = 64 << 10; g <= (128ull << 20); g *= 2) { gaps.push_back(g); gaps.push_back(g + g / 2); }
  for (uint64_t g : gaps) {
    uint4* d = x.at(x.bytes + g);
    x.copy("placement", "dst = src + 4 GiB + " + std::to_string(g), d, base(d));
  }

  x.copy("hints", "ld evict_first / st cs", dst0, [&] { copy_one_shot<EvictFirst, Cs><<<n / 256, 256>>>(src, dst0, n, 1, 0); });
  x.copy("hints", "ld evict_first / st evict_first", dst0, [&] { copy_one_shot<EvictFirst, EvictFirst><<<n / 256, 256>>>(src, dst0, n, 1, 0); });
  x.copy("hints", "ld nc_na / st evict_last", dst0, [&] { copy_one_shot<NcNa, EvictLast><<<n / 256, 256>>>(src, dst0, n, 1, 0); });
  x.copy("hints", "ld nc_na / st evict_unchanged", dst0, [&] { copy_one_shot<NcNa, EvictUnchanged><<<n / 256, 256>>>(src, dst0, n, 1, 0); });
  x.copy("hints", "ld nc_na / st L1::no_allocate", dst0, [&] { copy_one_shot<NcNa, NoAlloc><<<n / 256, 256>>>(src, dst0, n, 1, 0); });
  x.copy("hints", "ld cs / st cs", dst0, [&] { copy_one_shot<Cs, Cs><<<n / 256, 256>>>(src, dst0, n, 1, 0); });
  x.copy("hints", "ld nc_na / st wt", dst0, [&] { copy_one_shot<NcNa, Wt><<<n / 256, 256>>>(src, dst0, n, 1, 0); });
  x.copy("hints", "ld nc_na / st cg", dst0, [&] { copy_one_shot<NcNa, Cg><<<n / 256, 256>>>(src, dst0, n, 1, 0); });
  x.copy("hints", "ld nc_na / st volatile", dst0, [&] { copy_one_shot<NcNa, Volatile><<<n / 256, 256>>>(src, dst0, n, 1, 0); });

  for (int s : {2, 4, 16})
    x.copy("order", std::to_string(s) + " windows far apart", dst0, [&] { copy_one_shot<NcNa, Cs><<<n / 256, 256>>>(src, dst0, n, s, 0); });
  for (int p : {64, 256, 1024, 4096})
    x.copy("prefetch", "L2 bulk prefetch " + std::to_string(p) + " blocks ahead", dst0,
           [&] { copy_one_shot<NcNa, Cs><<<n / 256, 256>>>(src, dst0, n, 1, p); });

  for (int per_sm : {1, 2, 4}) {
    for (unsigned t : {256u, 512u, 1024u}) {
      const unsigned g1 = sms * per_sm * 2048 / t, g2 = sms * per_sm * 1024 / t;
      x.copy("persistent", "u1 t" + std::to_string(t) + " grid " + std::to_string(g1), dst0,
             [&] { copy_persistent<1><<<g1, t>>>(src, dst0, n); });
      if (g2 >= static_cast<unsigned>(sms))
        x.copy("persistent", "u2 t" + std::to_string(t) + " grid " + std::to_string(g2), dst0,
               [&] { copy_persistent<2><<<g2, t>>>(src, dst0, n); });
    }
  }

  CK(cudaFuncSetAttribute(copy_one_shot<NcNa, Cs>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  for (int want : {2, 3, 4, 5, 6, 7, 8}) {
    const int smem = want == 8 ? 0 : static_cast<int>(prop.sharedMemPerMultiprocessor / want) - 2048;
    int got = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&got, copy_one_shot<NcNa, Cs>, 256, smem));
    x.copy("occupancy", "t256, " + std::to_string(got) + " blocks/SM", dst0, base(dst0, 256, smem));
  }

  // Triad: a = b + s*c with b = source, c and a placed at offsets.
  // Fresh random data for c (the copies above left copies of the source there).
  fill_random<<<sms * 8, 256>>>(reinterpret_cast<uint32_t*>(x.pool + x.bytes), (2 * x.bytes + x.slack) / 4, 7);
  CK(cudaGetLastError());
  const uint64_t triad_gaps[] = {0, 2048, 8192, 65536, 3ull << 20};
  for (uint64_t gc : triad_gaps) {
    for (uint64_t ga : triad_gaps) {
      const uint4* c = x.at(x.bytes + gc);
      uint4* a = x.at(2 * x.bytes + x.slack + ga);
      CK(cudaMemset(a, 0xff, x.bytes));
      const Timing t = time_launches([&] { triad_one_shot<Cs, Cs><<<n / 1024, 1024>>>(src, c, a, n); }, x.reps, 3, 0);
      x.record("triad", "t1024 cs/cs, c +" + std::to_string(gc) + ", a +" + std::to_string(ga), 3.0 * x.bytes, t, x.reps, 0,
               x.triad_mismatches(src, c, a));
    }
  }
  {
    const uint4* c = x.at(x.bytes);
    uint4* a = x.at(2 * x.bytes + x.slack);
    auto triad = [&](const std::string& name, auto launch) {
      CK(cudaMemset(a, 0xff, x.bytes));
      const Timing t = time_launches(launch, x.reps, 3, 0);
      x.record("triad", name, 3.0 * x.bytes, t, x.reps, 0, x.triad_mismatches(src, c, a));
    };
    triad("t256 cs/cs", [&] { triad_one_shot<Cs, Cs><<<n / 256, 256>>>(src, c, a, n); });
    triad("t1024 nc_na/cs", [&] { triad_one_shot<NcNa, Cs><<<n / 1024, 1024>>>(src, c, a, n); });
    triad("t1024 evict_first/cs", [&] { triad_one_shot<EvictFirst, Cs><<<n / 1024, 1024>>>(src, c, a, n); });
    triad("t1024 evict_first/evict_first", [&] { triad_one_shot<EvictFirst, EvictFirst><<<n / 1024, 1024>>>(src, c, a, n); });
    triad("t1024 nc_na/evict_last", [&] { triad_one_shot<NcNa, EvictLast><<<n / 1024, 1024>>>(src, c, a, n); });
    triad("t1024 cs/wt", [&] { triad_one_shot<Cs, Wt><<<n / 1024, 1024>>>(src, c, a, n); });
  }

  std::fprintf(x.json, "\n], \"wrong_outputs\": %d}\n", x.failures);
  std::fclose(x.json);
  CK(cudaFree(x.pool));
  if (x.failures) std::fprintf(stderr, "copy_ceiling: %d configurations wrote wrong output\n", x.failures);
  return x.failures ? 1 : 0;
}
