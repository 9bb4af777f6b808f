// Streaming bandwidth kernels (read, write, copy, triad), the L2 read kernel, and the host code that
// fills, launches, times and verifies them. See bandwidth.hpp for the contract.
//
// Data. Sources hold seeded hash values (never zeros: zeros draw less power and hide unwritten
// output). The hash is a pure function of (seed, word index), computed identically on host and
// device, so every result can be checked exactly:
//   read   : the kernel folds every 32-bit word into a sum mod 2^32, compared with the host's sum;
//   write  : words are a cheap index function (one multiply-add per word), spot-checked;
//   copy   : destination words must equal the source hash at the same index, spot-checked;
//   triad  : a = fma(s, c, b) on float32 values in [-1, 1); the host computes the same correctly
//            rounded fma (std::fmaf), so the comparison is bit-exact, spot-checked.
// Destinations are poisoned (all bits set, a NaN as float) before every configuration, so an element
// the kernel did not write fails its check instead of passing with an earlier configuration's value.
#include "bandwidth.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"

namespace roofline {
namespace {

// ----------------------------------------------------------------------------------------------
// Data functions shared by host and device.

__host__ __device__ __forceinline__ std::uint32_t mix32(std::uint32_t x) {
  // murmur3's finaliser: a bijection on 32 bits with good avalanche, about 8 integer operations.
  x ^= x >> 16;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  x *= 0xc2b2ae35u;
  x ^= x >> 16;
  return x;
}

// Key of the 2^32-word segment that word i lies in: lets the host hoist it out of its loops.
__host__ __device__ __forceinline__ std::uint32_t segment_key(std::uint32_t seed, std::uint64_t i) {
  return mix32(seed + static_cast<std::uint32_t>(i >> 32) * 0x9e3779b9u);
}

__host__ __device__ __forceinline__ std::uint32_t data_word(std::uint32_t seed, std::uint64_t i) {
  return mix32(static_cast<std::uint32_t>(i) ^ segment_key(seed, i));
}

// A float in [-1, 1) from the top 24 bits of the hash. Every step is exact in float32, so host and
// device produce the same bits.
__host__ __device__ __forceinline__ float word_to_float(std::uint32_t h) {
  return static_cast<float>(h >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

// What the write pattern stores: one multiply per 16-byte vector and an add + xor per word, cheap
// enough that the store stream, not the arithmetic, limits the kernel; still index-dependent, so a
// store to the wrong place fails verification.
constexpr std::uint32_t kFillMul = 0x9e3779b1u;
__host__ __device__ __forceinline__ std::uint32_t fill_word(std::uint32_t key, std::uint64_t i) {
  return (static_cast<std::uint32_t>(i) * kFillMul) ^ key;
}

constexpr float kTriadScalar = 1.5f;
constexpr std::uint32_t kMaxBulkStages = 8;

// Distinct seeds for the buffers of one measurement.
std::uint32_t buffer_seed(std::uint32_t seed, int buffer) {
  return mix32(seed ^ (0x632be5abu * static_cast<std::uint32_t>(buffer + 1)));
}

// ----------------------------------------------------------------------------------------------
// Load and store flavours. Inline PTX so the access width and cache operators are exactly what
// the configuration names (check with cuobjdump: LDG.E.128 / STG.E.128).

enum class Ld { Plain, Nc, NcNa, NcNaPf, Cs, Cg };
enum class St { Plain, Cs };

template <Ld L>
__device__ __forceinline__ uint4 load16(const uint4* p) {
  uint4 v;
  // volatile keeps the unrolled loads in program order (all issued before the first use), which
  // is the point of the unroll; ptxas still schedules the SASS.
  if constexpr (L == Ld::Plain) {
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else if constexpr (L == Ld::Nc) {
    asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else if constexpr (L == Ld::NcNa) {
    // Read-only path, no L1 allocation: streamed data is never reused, so it should not evict.
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else if constexpr (L == Ld::NcNaPf) {
    // As NcNa, plus a hint that L2 fetch 256 bytes around the access from DRAM. The hint exists
    // from sm_80; the host never runs this flavour below that (grid_for skips it), the fallback
    // only lets older targets compile.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#else
    asm volatile("trap;");
    v = make_uint4(0, 0, 0, 0);
#endif
  } else if constexpr (L == Ld::Cs) {
    // Cache-streaming: evict-first in L1 and L2.
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else {
    // Cache at L2 only: the flavour for the L2 sweep, where L1 hits would overstate L2.
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  }
  return v;
}

template <St S>
__device__ __forceinline__ void store16(uint4* p, uint4 v) {
  if constexpr (S == St::Plain) {
    asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  } else {
    asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  }
}

// ----------------------------------------------------------------------------------------------
// Kernels. Work is cut into chunks of U * blockDim.x 16-byte vectors; thread t of a block touches
// vectors t, t + blockDim.x, ... of its chunk, so each of its U accesses is one coalesced 512-byte
// warp access and the U of them are independent (in flight together). Blocks take chunks
// grid-stride: with a one-shot grid each block takes one chunk, with a persistent grid (SMs x
// blocks per SM) each takes many. Vectors past the last whole chunk are taken one per thread.

// Sum of `acc` over the block, written to out[blockIdx.x]. blockDim.x is a multiple of 32.
__device__ __forceinline__ void block_sum_to(std::uint32_t acc, std::uint32_t* out) {
  __shared__ std::uint32_t warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) warp_sums[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    std::uint32_t s = lane < static_cast<int>(blockDim.x >> 5) ? warp_sums[lane] : 0u;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) out[blockIdx.x] = s;
  }
}

__device__ __forceinline__ std::uint32_t fold(uint4 v) { return (v.x + v.y) + (v.z + v.w); }

template <int U, Ld L>
__global__ void read_kernel(const uint4* __restrict__ src, std::uint64_t nvec,
                            std::uint32_t* __restrict__ partials) {
  const std::uint64_t chunk = static_cast<std::uint64_t>(U) * blockDim.x;
  const std::uint64_t nchunks = nvec / chunk;
  std::uint32_t acc = 0;
  for (std::uint64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const uint4* p = src + c * chunk + threadIdx.x;
    uint4 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j) v[j] = load16<L>(p + j * blockDim.x);
#pragma unroll
    for (int j = 0; j < U; ++j) acc += fold(v[j]);
  }
  for (std::uint64_t i = nchunks * chunk + static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < nvec; i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    acc += fold(load16<L>(src + i));
  block_sum_to(acc, partials);
}

// Reads a working set of `nchunks` chunks `total_chunks / nchunks` times (total_chunks is a
// multiple of nchunks). Each block walks virtual chunks grid-stride and maps them back into the
// working set with a wrap instead of a 64-bit modulo per chunk.
template <int U, Ld L>
__global__ void l2_read_kernel(const uint4* __restrict__ src, std::uint32_t nchunks,
                               std::uint64_t total_chunks, std::uint32_t* __restrict__ partials) {
  const std::uint32_t chunk = static_cast<std::uint32_t>(U) * blockDim.x;
  const std::uint32_t step = gridDim.x % nchunks;
  std::uint32_t pc = blockIdx.x % nchunks;
  std::uint32_t acc = 0;
  for (std::uint64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
    const uint4* p = src + static_cast<std::uint64_t>(pc) * chunk + threadIdx.x;
    uint4 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j) v[j] = load16<L>(p + j * blockDim.x);
#pragma unroll
    for (int j = 0; j < U; ++j) acc += fold(v[j]);
    pc += step;
    if (pc >= nchunks) pc -= nchunks;
  }
  block_sum_to(acc, partials);
}

__device__ __forceinline__ uint4 fill_vector(std::uint64_t vec, std::uint32_t key) {
  const std::uint32_t b = static_cast<std::uint32_t>(vec * 4) * kFillMul;
  return make_uint4(b ^ key, (b + kFillMul) ^ key, (b + 2 * kFillMul) ^ key, (b + 3 * kFillMul) ^ key);
}

template <int U, St S>
__global__ void write_kernel(uint4* __restrict__ dst, std::uint64_t nvec, std::uint32_t key) {
  const std::uint64_t chunk = static_cast<std::uint64_t>(U) * blockDim.x;
  const std::uint64_t nchunks = nvec / chunk;
  for (std::uint64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const std::uint64_t base = c * chunk + threadIdx.x;
#pragma unroll
    for (int j = 0; j < U; ++j) {
      const std::uint64_t i = base + static_cast<std::uint64_t>(j) * blockDim.x;
      store16<S>(dst + i, fill_vector(i, key));
    }
  }
  for (std::uint64_t i = nchunks * chunk + static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < nvec; i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    store16<S>(dst + i, fill_vector(i, key));
}

template <int U, Ld L, St S>
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::uint64_t nvec) {
  const std::uint64_t chunk = static_cast<std::uint64_t>(U) * blockDim.x;
  const std::uint64_t nchunks = nvec / chunk;
  for (std::uint64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const std::uint64_t base = c * chunk + threadIdx.x;
    uint4 v[U];
#pragma unroll
    for (int j = 0; j < U; ++j) v[j] = load16<L>(src + base + j * blockDim.x);
#pragma unroll
    for (int j = 0; j < U; ++j) store16<S>(dst + base + j * blockDim.x, v[j]);
  }
  for (std::uint64_t i = nchunks * chunk + static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < nvec; i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    store16<S>(dst + i, load16<L>(src + i));
}

__device__ __forceinline__ uint4 triad_vector(uint4 b, uint4 c, float s) {
  return make_uint4(__float_as_uint(__fmaf_rn(s, __uint_as_float(c.x), __uint_as_float(b.x))),
                    __float_as_uint(__fmaf_rn(s, __uint_as_float(c.y), __uint_as_float(b.y))),
                    __float_as_uint(__fmaf_rn(s, __uint_as_float(c.z), __uint_as_float(b.z))),
                    __float_as_uint(__fmaf_rn(s, __uint_as_float(c.w), __uint_as_float(b.w))));
}

template <int U, Ld L, St S>
__global__ void triad_kernel(const uint4* __restrict__ b, const uint4* __restrict__ c,
                             uint4* __restrict__ a, std::uint64_t nvec, float s) {
  const std::uint64_t chunk = static_cast<std::uint64_t>(U) * blockDim.x;
  const std::uint64_t nchunks = nvec / chunk;
  for (std::uint64_t k = blockIdx.x; k < nchunks; k += gridDim.x) {
    const std::uint64_t base = k * chunk + threadIdx.x;
    uint4 vb[U], vc[U];
#pragma unroll
    for (int j = 0; j < U; ++j) {
      vb[j] = load16<L>(b + base + j * blockDim.x);
      vc[j] = load16<L>(c + base + j * blockDim.x);
    }
#pragma unroll
    for (int j = 0; j < U; ++j) store16<S>(a + base + j * blockDim.x, triad_vector(vb[j], vc[j], s));
  }
  for (std::uint64_t i = nchunks * chunk + static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < nvec; i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    store16<S>(a + i, triad_vector(load16<L>(b + i), load16<L>(c + i), s));
}

// Fills n words with data_word (as_float = 0) or word_to_float(data_word) bits (as_float = 1).
__global__ void fill_data_kernel(std::uint32_t* __restrict__ p, std::uint64_t n, std::uint32_t seed,
                                 int as_float) {
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t h = data_word(seed, i);
    p[i] = as_float ? __float_as_uint(word_to_float(h)) : h;
  }
}

// Copy through shared memory with the copy engine (cp.async.bulk, sm_90+). One thread per block
// drives a ring of `stages` buffers of `chunk` bytes: bulk loads complete on one mbarrier per
// stage, and each landed stage leaves as a bulk store. The point is the request stream: a few
// large contiguous transfers per SM instead of many 512-byte warp accesses.
__global__ void bulk_copy_kernel(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                                 std::uint64_t nbytes, std::uint32_t chunk, std::uint32_t stages) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char ring[];
  __shared__ __align__(8) std::uint64_t full[kMaxBulkStages];
  if (threadIdx.x != 0) return;
  const std::uint32_t ring_s = static_cast<std::uint32_t>(__cvta_generic_to_shared(ring));
  const std::uint32_t full_s = static_cast<std::uint32_t>(__cvta_generic_to_shared(full));
  for (std::uint32_t s = 0; s < stages; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(full_s + 8 * s) : "memory");
  // Make the initialised barriers visible to the copy engine (the async proxy) before first use.
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");

  const std::uint64_t nchunks = (nbytes + chunk - 1) / chunk;
  const std::uint64_t mine = blockIdx.x < nchunks ? (nchunks - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  auto offset = [&](std::uint64_t k) { return (blockIdx.x + k * gridDim.x) * static_cast<std::uint64_t>(chunk); };
  auto size_at = [&](std::uint64_t off) {
    return static_cast<std::uint32_t>(nbytes - off < chunk ? nbytes - off : chunk);
  };
  auto load = [&](std::uint64_t k) {
    const std::uint64_t off = offset(k);
    const std::uint32_t size = size_at(off), s = static_cast<std::uint32_t>(k % stages);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(full_s + 8 * s), "r"(size)
                 : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            ring_s + s * chunk),
        "l"(src + off), "r"(size), "r"(full_s + 8 * s)
        : "memory");
  };
  for (std::uint64_t k = 0; k < mine && k < stages; ++k) load(k);
  for (std::uint64_t k = 0; k < mine; ++k) {
    const std::uint32_t s = static_cast<std::uint32_t>(k % stages);
    const std::uint32_t parity = static_cast<std::uint32_t>((k / stages) & 1);
    asm volatile(
        "{\n"
        "  .reg .pred done;\n"
        "WAIT_FULL:\n"
        "  mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "  @!done bra WAIT_FULL;\n"
        "}\n" ::"r"(full_s + 8 * s),
        "r"(parity)
        : "memory");
    const std::uint64_t off = offset(k);
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + off),
                 "r"(ring_s + s * chunk), "r"(size_at(off))
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    if (k + stages < mine) {
      // The stage is refilled only once the store has read it out of shared memory.
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      load(k + stages);
    }
  }
  // Shared memory must outlive the stores reading it.
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

// ----------------------------------------------------------------------------------------------
// Which instantiations this build carries. Every (unroll, load, store) is one kernel per pattern,
// and the package compiles for many architectures, so it carries what an H200 sweep of every
// variant (dev/bandwidth, 2026-11-30) showed can win: unrolls 1-16 (writes are fastest at 1-2,
// reads at 16), the plain, read-only-no-allocate, streaming and L2-only loads, plain and streaming
// stores. The L2::256B prefetch hint lost everywhere (-5% on reads) and "nc" tied "nc_na"; both are
// kept for the sweep (ROOFLINE_BW_EXPLORE) only.

#ifdef ROOFLINE_BW_EXPLORE
constexpr int kUnrolls[] = {1, 2, 4, 8, 16};
constexpr Ld kLoads[] = {Ld::Plain, Ld::Nc, Ld::NcNa, Ld::NcNaPf, Ld::Cs, Ld::Cg};
constexpr Ld kStreamLoads[] = {Ld::Plain, Ld::Nc, Ld::NcNa, Ld::NcNaPf, Ld::Cs, Ld::Cg};
constexpr St kStores[] = {St::Plain, St::Cs};
#else
constexpr int kUnrolls[] = {1, 2, 4, 8, 16};
constexpr Ld kLoads[] = {Ld::Plain, Ld::NcNa, Ld::Cs, Ld::Cg};
// Loads copy and triad are instantiated with (each is a kernel per store flavour and unroll): the
// sweep's winners there were plain, nc_na and cs, within 0.5% of each other.
constexpr Ld kStreamLoads[] = {Ld::Plain, Ld::NcNa, Ld::Cs};
#endif
#ifndef ROOFLINE_BW_EXPLORE
constexpr St kStores[] = {St::Plain, St::Cs};
#endif
// The L2 sweep must not hit in L1: only loads that skip it.
constexpr Ld kL2Loads[] = {Ld::Cg, Ld::NcNa};

template <typename T, std::size_t N>
constexpr bool contains(const T (&set)[N], T v) {
  for (const T& x : set) if (x == v) return true;
  return false;
}
constexpr bool has_unroll(int u) { return contains(kUnrolls, u); }
constexpr bool has_load(Ld l) { return contains(kLoads, l); }
constexpr bool has_stream_load(Ld l) { return contains(kStreamLoads, l); }
constexpr bool has_l2_load(Ld l) { return contains(kL2Loads, l); }
constexpr bool has_store(St s) { return contains(kStores, s); }

struct LoadName { Ld ld; const char* name; };
constexpr LoadName kLoadNames[] = {{Ld::Plain, "plain"}, {Ld::Nc, "nc"},    {Ld::NcNa, "nc_na"},
                                   {Ld::NcNaPf, "nc_na_l2pf256"}, {Ld::Cs, "cs"}, {Ld::Cg, "cg"}};
struct StoreName { St st; const char* name; };
constexpr StoreName kStoreNames[] = {{St::Plain, "plain"}, {St::Cs, "cs"}};

enum class Pattern { Read, Write, Copy, Triad, L2Read };

Pattern parse_pattern(const std::string& p) {
  if (p == "read") return Pattern::Read;
  if (p == "write") return Pattern::Write;
  if (p == "copy") return Pattern::Copy;
  if (p == "triad") return Pattern::Triad;
  throw std::invalid_argument("unknown bandwidth pattern '" + p + "' (read, write, copy, triad)");
}

Ld parse_load(const std::string& name) {
  for (const auto& n : kLoadNames)
    if (name == n.name) {
      if (!has_load(n.ld)) throw std::invalid_argument("load flavour '" + name + "' is not compiled into this build");
      return n.ld;
    }
  throw std::invalid_argument("unknown load flavour '" + name + "'");
}

St parse_store(const std::string& name) {
  for (const auto& n : kStoreNames)
    if (name == n.name) {
      if (!has_store(n.st)) throw std::invalid_argument("store flavour '" + name + "' is not compiled into this build");
      return n.st;
    }
  throw std::invalid_argument("unknown store flavour '" + name + "'");
}

// Everything a launch needs; each pattern uses its part.
struct LaunchArgs {
  const uint4* src0 = nullptr;  // read / copy source, triad b, l2 working set
  const uint4* src1 = nullptr;  // triad c
  uint4* dst = nullptr;         // write / copy / triad destination
  std::uint32_t* partials = nullptr;
  std::uint64_t nvec = 0;
  std::uint32_t nchunks = 0;     // l2: chunks in the working set
  std::uint64_t total_chunks = 0;  // l2: chunks read per launch
  std::uint32_t key = 0;         // write: fill key
  float s = kTriadScalar;
  std::uint32_t bulk_bytes = 0;  // bulk copy: bytes per transfer
  std::uint32_t stages = 0;      // bulk copy: ring stages
};

struct Kernel {
  const void* fn = nullptr;  // for the occupancy query
  void (*launch)(unsigned grid, unsigned threads, std::size_t smem, cudaStream_t, const LaunchArgs&) = nullptr;
  std::size_t smem = 0;      // dynamic shared memory per block
};

template <int U, Ld L, St S>
Kernel kernel_for(Pattern p) {
  switch (p) {
    case Pattern::Read:
      return {reinterpret_cast<const void*>(&read_kernel<U, L>),
              [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
                read_kernel<U, L><<<g, t, 0, st>>>(a.src0, a.nvec, a.partials);
              }};
    case Pattern::L2Read:
      if constexpr (has_l2_load(L)) {
        return {reinterpret_cast<const void*>(&l2_read_kernel<U, L>),
                [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
                  l2_read_kernel<U, L><<<g, t, 0, st>>>(a.src0, a.nchunks, a.total_chunks, a.partials);
                }};
      }
      break;
    case Pattern::Write:
      return {reinterpret_cast<const void*>(&write_kernel<U, S>),
              [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
                write_kernel<U, S><<<g, t, 0, st>>>(a.dst, a.nvec, a.key);
              }};
    case Pattern::Copy:
      if constexpr (has_stream_load(L)) {
        return {reinterpret_cast<const void*>(&copy_kernel<U, L, S>),
                [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
                  copy_kernel<U, L, S><<<g, t, 0, st>>>(a.src0, a.dst, a.nvec);
                }};
      }
      break;
    case Pattern::Triad:
      if constexpr (has_stream_load(L)) {
        return {reinterpret_cast<const void*>(&triad_kernel<U, L, S>),
                [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
                  triad_kernel<U, L, S><<<g, t, 0, st>>>(a.src0, a.src1, a.dst, a.nvec, a.s);
                }};
      }
      break;
  }
  throw std::invalid_argument("this load flavour is not compiled into this build for this pattern");
}

// Patterns that never store instantiate with the first store flavour only, and write with the
// first load flavour only, so the build carries no duplicate kernels.
template <int U, Ld L>
Kernel pick_store(Pattern p, St s) {
  if (p == Pattern::Read || p == Pattern::L2Read) return kernel_for<U, L, kStores[0]>(p);
  switch (s) {
    case St::Plain: if constexpr (has_store(St::Plain)) return kernel_for<U, L, St::Plain>(p); break;
    case St::Cs: if constexpr (has_store(St::Cs)) return kernel_for<U, L, St::Cs>(p); break;
  }
  throw std::invalid_argument("store flavour not compiled into this build");
}

template <int U>
Kernel pick_load(Pattern p, Ld l, St s) {
  if (p == Pattern::Write) return pick_store<U, kLoads[0]>(p, s);
  switch (l) {
    case Ld::Plain: if constexpr (has_load(Ld::Plain)) return pick_store<U, Ld::Plain>(p, s); break;
    case Ld::Nc: if constexpr (has_load(Ld::Nc)) return pick_store<U, Ld::Nc>(p, s); break;
    case Ld::NcNa: if constexpr (has_load(Ld::NcNa)) return pick_store<U, Ld::NcNa>(p, s); break;
    case Ld::NcNaPf: if constexpr (has_load(Ld::NcNaPf)) return pick_store<U, Ld::NcNaPf>(p, s); break;
    case Ld::Cs: if constexpr (has_load(Ld::Cs)) return pick_store<U, Ld::Cs>(p, s); break;
    case Ld::Cg: if constexpr (has_load(Ld::Cg)) return pick_store<U, Ld::Cg>(p, s); break;
  }
  throw std::invalid_argument("load flavour not compiled into this build");
}

Kernel pick_kernel(Pattern p, int unroll, Ld l, St s) {
  switch (unroll) {
    case 1: if constexpr (has_unroll(1)) return pick_load<1>(p, l, s); break;
    case 2: if constexpr (has_unroll(2)) return pick_load<2>(p, l, s); break;
    case 4: if constexpr (has_unroll(4)) return pick_load<4>(p, l, s); break;
    case 8: if constexpr (has_unroll(8)) return pick_load<8>(p, l, s); break;
    case 16: if constexpr (has_unroll(16)) return pick_load<16>(p, l, s); break;
    default: break;
  }
  throw std::invalid_argument("unroll " + std::to_string(unroll) + " is not compiled into this build");
}

Kernel bulk_copy() {
  return {reinterpret_cast<const void*>(&bulk_copy_kernel),
          [](unsigned g, unsigned t, std::size_t smem, cudaStream_t st, const LaunchArgs& a) {
            bulk_copy_kernel<<<g, t, smem, st>>>(reinterpret_cast<const unsigned char*>(a.src0),
                                                 reinterpret_cast<unsigned char*>(a.dst), a.nvec * 16,
                                                 a.bulk_bytes, a.stages);
          }};
}

bool is_bulk(const BwConfig& c) { return c.load == "bulk"; }

// The driver's own device-to-device copy (what torch copy_ and CuPy copyto call for contiguous
// buffers): a copy figure below it would not be a peak.
void launch_memcpy(unsigned /*grid*/, unsigned /*threads*/, std::size_t /*smem*/, cudaStream_t st,
                   const LaunchArgs& a) {
  CUDA_CHECK(cudaMemcpyAsync(a.dst, a.src0, a.nvec * 16, cudaMemcpyDeviceToDevice, st));
}

Kernel driver_memcpy() { return {nullptr, &launch_memcpy}; }

bool is_memcpy(const BwConfig& c) { return c.load == "memcpy"; }

// ----------------------------------------------------------------------------------------------
// Host side.

// Sum mod 2^32 of data_word(seed, i) for i in [lo, hi): what the read kernel must produce.
std::uint32_t host_sum_range(std::uint32_t seed, std::uint64_t lo, std::uint64_t hi) {
  std::uint32_t s = 0;
  while (lo < hi) {
    const std::uint64_t seg_end = std::min(hi, ((lo >> 32) + 1) << 32);
    const std::uint32_t key = segment_key(seed, lo);
    const std::uint32_t base = static_cast<std::uint32_t>(lo);
    const std::uint64_t count = seg_end - lo;
    for (std::uint64_t t = 0; t < count; ++t) s += mix32((base + static_cast<std::uint32_t>(t)) ^ key);
    lo = seg_end;
  }
  return s;
}

// The same over [0, n) on all host cores: a 4 GiB buffer is 2^30 words, about a second on one core.
std::uint32_t host_checksum(std::uint32_t seed, std::uint64_t n) {
  unsigned nt = std::thread::hardware_concurrency();
  nt = std::max(1u, std::min(nt, 32u));
  if (n < (1ull << 22)) nt = 1;
  std::vector<std::uint32_t> part(nt, 0);
  std::vector<std::thread> threads;
  unsigned started = 0;
  try {
    for (unsigned t = 1; t < nt; ++t) {
      threads.emplace_back([&part, seed, n, nt, t] { part[t] = host_sum_range(seed, n * t / nt, n * (t + 1) / nt); });
      started = t;
    }
  } catch (const std::system_error&) {
    // No more threads to be had: the calling thread does the ranges that did not start.
  }
  std::uint32_t s = host_sum_range(seed, 0, n / nt);
  for (unsigned t = started + 1; t < nt; ++t) s += host_sum_range(seed, n * t / nt, n * (t + 1) / nt);
  for (auto& th : threads) th.join();
  for (unsigned t = 1; t <= started; ++t) s += part[t];
  return s;
}

void validate_common(int reps, int warmup, const std::vector<BwConfig>& configs, Pattern pattern) {
  if (reps < 1) throw std::invalid_argument("reps must be at least 1");
  if (warmup < 0) throw std::invalid_argument("warmup must not be negative");
  if (configs.empty()) throw std::invalid_argument("no configurations given");
  for (const auto& c : configs) {
    if (c.threads < 32 || c.threads > 1024 || c.threads % 32)
      throw std::invalid_argument("threads must be a multiple of 32 in [32, 1024], got " + std::to_string(c.threads));
    if (c.blocks_per_sm < 0) throw std::invalid_argument("blocks_per_sm must not be negative");
    if (is_memcpy(c)) {
      if (pattern != Pattern::Copy) throw std::invalid_argument("load 'memcpy' exists for the copy pattern only");
      continue;
    }
    if (is_bulk(c)) {
      if (pattern != Pattern::Copy) throw std::invalid_argument("load 'bulk' (copy engine) exists for the copy pattern only");
      if (c.threads != 32) throw std::invalid_argument("load 'bulk' is driven by one warp: threads must be 32");
      if (c.unroll < 1 || c.unroll > static_cast<int>(kMaxBulkStages))
        throw std::invalid_argument("load 'bulk': unroll is the number of stages, 1 to " + std::to_string(kMaxBulkStages));
      if (c.bulk_bytes < 16 || c.bulk_bytes % 16 || c.bulk_bytes > (1 << 20))
        throw std::invalid_argument("load 'bulk': bulk_bytes must be a multiple of 16 up to 1 MiB");
      continue;
    }
    if (!has_unroll(c.unroll))
      throw std::invalid_argument("unroll " + std::to_string(c.unroll) + " is not compiled into this build");
    parse_store(c.store);
    if (pattern == Pattern::Write) continue;  // writes load nothing: the load flavour is ignored
    const Ld l = parse_load(c.load);
    if ((pattern == Pattern::Copy || pattern == Pattern::Triad) && !has_stream_load(l))
      throw std::invalid_argument("load flavour '" + c.load + "' is not compiled for copy/triad in this build");
    if (pattern == Pattern::L2Read && !has_l2_load(l))
      throw std::invalid_argument("the L2 sweep needs a load that skips L1 (cg, nc_na), got '" + c.load + "'");
  }
}

Kernel select_kernel(Pattern p, const BwConfig& c) {
  if (is_memcpy(c)) return driver_memcpy();
  if (is_bulk(c)) {
    Kernel k = bulk_copy();
    k.smem = static_cast<std::size_t>(c.unroll) * c.bulk_bytes;
    return k;
  }
  return pick_kernel(p, c.unroll, parse_load(c.load), parse_store(c.store));
}

// Units of work the one-shot grid hands one block each.
std::uint64_t chunks_of(const BwConfig& c, std::uint64_t nvec) {
  if (is_memcpy(c)) return 1;
  const std::uint64_t per = is_bulk(c) ? c.bulk_bytes / 16 : static_cast<std::uint64_t>(c.unroll) * c.threads;
  return (nvec + per - 1) / per;
}

void check_free_memory(int device, std::size_t needed) {
  std::size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  if (needed > free_b) {
    std::ostringstream s;
    s << "bandwidth measurement needs " << needed << " bytes of device memory but device " << device
      << " has " << free_b << " free of " << total_b << "; ask for smaller buffers";
    throw CoreError(s.str());
  }
}

int sm_count_of(int device) {
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

struct Grid {
  unsigned blocks = 0;
  int occupancy = 0;
  std::string skipped;  // why the configuration cannot run here, or empty
};

// One-shot: one block per chunk (at least one block for a buffer smaller than a chunk).
// Persistent: SMs x blocks_per_sm, capped at what occupancy allows, so every block is resident.
// A configuration that cannot run on this device comes back with `skipped` set, not as an error:
// one such configuration must not cost the others of a sweep their measurement.
Grid grid_for(int device, const Kernel& k, const BwConfig& c, int sms, std::uint64_t chunks) {
  Grid g;
  if (is_memcpy(c)) return g;  // the driver picks its own grid
  int major = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (c.load == "nc_na_l2pf256" && major < 8) {
    g.skipped = "the L2::256B prefetch hint needs compute capability 8.0 or newer";
    return g;
  }
  if (is_bulk(c)) {
    int optin = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (major < 9) {
      g.skipped = "the copy engine (cp.async.bulk) needs compute capability 9.0 or newer";
      return g;
    }
    if (k.smem > static_cast<std::size_t>(optin)) {
      g.skipped = "ring of " + std::to_string(k.smem) + " bytes exceeds the " + std::to_string(optin) +
                  " bytes of shared memory a block may have";
      return g;
    }
    CUDA_CHECK(cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(k.smem)));
  }
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&g.occupancy, k.fn, c.threads, k.smem));
  if (g.occupancy < 1) {
    g.skipped = "no block of " + std::to_string(c.threads) + " threads at unroll " + std::to_string(c.unroll) +
                " fits on an SM (registers or shared memory)";
    return g;
  }
  std::uint64_t blocks = c.blocks_per_sm > 0
                             ? static_cast<std::uint64_t>(sms) * std::min(c.blocks_per_sm, g.occupancy)
                             : std::max<std::uint64_t>(chunks, 1);
  g.blocks = static_cast<unsigned>(std::min<std::uint64_t>(blocks, INT_MAX));
  return g;
}

void fill_data(std::uint32_t* p, std::uint64_t nwords, std::uint32_t seed, bool as_float, int sms,
               cudaStream_t s) {
  fill_data_kernel<<<static_cast<unsigned>(sms) * 8, 256, 0, s>>>(p, nwords, seed, as_float ? 1 : 0);
  CUDA_CHECK_LAUNCH();
}

void poison(void* p, std::size_t bytes, cudaStream_t s) {
  // All bits set: a NaN as float32 and no hash value's likely twin; unwritten words then fail.
  CUDA_CHECK(cudaMemsetAsync(p, 0xff, bytes, s));
}

// Copies regions of the destination back and compares every word in them with `expected(i)`:
// the first and last region (boundaries, the tail loop) and `regions` seeded-random ones.
template <typename Expected>
std::size_t spot_check(const std::uint32_t* dev, std::uint64_t nwords, std::uint32_t seed,
                       const char* pattern, Expected&& expected) {
  constexpr std::uint64_t kRegionWords = 16384;  // 64 KiB
  constexpr int kRandomRegions = 30;
  std::vector<std::uint64_t> starts;
  const std::uint64_t len = std::min(kRegionWords, nwords);
  starts.push_back(0);
  starts.push_back(nwords - len);
  std::mt19937_64 rng(0x5eed0000ull ^ seed);
  for (int r = 0; r < kRandomRegions && nwords > len; ++r) starts.push_back(rng() % (nwords - len + 1));
  std::vector<std::uint32_t> host(len);
  std::size_t checked = 0;
  for (std::uint64_t start : starts) {
    CUDA_CHECK(cudaMemcpy(host.data(), dev + start, len * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
    std::size_t bad = 0;
    std::uint64_t first_bad = 0;
    for (std::uint64_t k = 0; k < len; ++k) {
      if (host[k] != expected(start + k)) {
        if (!bad) first_bad = start + k;
        ++bad;
      }
    }
    ROOFLINE_VERIFY(bad == 0, pattern << ": " << bad << " of " << len << " words from word " << start
                                      << " differ from the host's values; first at word " << first_bad
                                      << ": expected 0x" << std::hex << expected(first_bad) << ", got 0x"
                                      << host[first_bad - start] << std::dec
                                      << " (0xffffffff = never written)");
    checked += len;
  }
  return checked;
}

std::uint32_t device_checksum(const std::uint32_t* partials, unsigned blocks) {
  std::vector<std::uint32_t> host(blocks);
  CUDA_CHECK(cudaMemcpy(host.data(), partials, blocks * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
  std::uint32_t s = 0;
  for (std::uint32_t v : host) s += v;
  return s;
}

std::uint64_t apply_fault(std::uint64_t nvec, BwFault fault) {
  return fault == BwFault::Short ? nvec - nvec / 16 : nvec;
}

}  // namespace

BwFault parse_bw_fault(const std::string& name) {
  if (name == "none" || name.empty()) return BwFault::None;
  if (name == "short") return BwFault::Short;
  throw std::invalid_argument("unknown fault '" + name + "' (none, short)");
}

std::vector<BwResult> run_bandwidth(int device, const std::string& pattern_name, std::size_t buffer_bytes,
                                    int reps, int warmup, const std::vector<BwConfig>& configs,
                                    std::uint32_t seed, BwFault fault) {
  const Pattern pattern = parse_pattern(pattern_name);
  validate_common(reps, warmup, configs, pattern);
  if (buffer_bytes < 16 || buffer_bytes % 16)
    throw std::invalid_argument("buffer_bytes must be a positive multiple of 16, got " + std::to_string(buffer_bytes));

  DeviceScope scope(device);
  const int sms = sm_count_of(device);
  const std::uint64_t nvec = buffer_bytes / 16, nwords = buffer_bytes / 4;
  const int nbuf = pattern == Pattern::Read || pattern == Pattern::Write ? 1 : pattern == Pattern::Copy ? 2 : 3;
  const std::size_t traffic = buffer_bytes * static_cast<std::size_t>(nbuf);  // each buffer once

  // The largest grid any configuration can use decides the partial-sum buffer.
  std::uint64_t max_blocks = 1;
  for (const auto& c : configs) {
    const std::uint64_t one_shot = chunks_of(c, nvec);
    const std::uint64_t persistent = static_cast<std::uint64_t>(sms) * c.blocks_per_sm;
    max_blocks = std::max({max_blocks, c.blocks_per_sm > 0 ? persistent : one_shot});
  }
  max_blocks = std::min<std::uint64_t>(max_blocks, INT_MAX);
  const std::size_t partial_bytes = pattern == Pattern::Read ? max_blocks * sizeof(std::uint32_t) : 0;
  check_free_memory(device, traffic + partial_bytes + (64u << 20));  // + room for the context's own use

  Stream stream;
  DeviceBuffer buf0(buffer_bytes);
  DeviceBuffer buf1(nbuf >= 2 ? buffer_bytes : 0);
  DeviceBuffer buf2(nbuf >= 3 ? buffer_bytes : 0);
  DeviceBuffer partials(partial_bytes);

  // Roles: read: buf0 = source. write: buf0 = destination. copy: buf0 -> buf1. triad: buf0 = b,
  // buf1 = c, buf2 = a.
  const std::uint32_t seed0 = buffer_seed(seed, 0), seed1 = buffer_seed(seed, 1);
  const std::uint32_t fill_key = buffer_seed(seed, 7);
  LaunchArgs args;
  std::uint32_t* dst_words = nullptr;
  switch (pattern) {
    case Pattern::Read:
      fill_data(buf0.get<std::uint32_t>(), nwords, seed0, false, sms, stream.get());
      args.src0 = buf0.get<uint4>();
      args.partials = partials.get<std::uint32_t>();
      break;
    case Pattern::Write:
      args.dst = buf0.get<uint4>();
      args.key = fill_key;
      dst_words = buf0.get<std::uint32_t>();
      break;
    case Pattern::Copy:
      fill_data(buf0.get<std::uint32_t>(), nwords, seed0, false, sms, stream.get());
      args.src0 = buf0.get<uint4>();
      args.dst = buf1.get<uint4>();
      dst_words = buf1.get<std::uint32_t>();
      break;
    case Pattern::Triad:
      fill_data(buf0.get<std::uint32_t>(), nwords, seed0, true, sms, stream.get());
      fill_data(buf1.get<std::uint32_t>(), nwords, seed1, true, sms, stream.get());
      args.src0 = buf0.get<uint4>();
      args.src1 = buf1.get<uint4>();
      args.dst = buf2.get<uint4>();
      dst_words = buf2.get<std::uint32_t>();
      break;
    case Pattern::L2Read:
      break;
  }
  args.nvec = apply_fault(nvec, fault);
  stream.synchronize();

  // The host's checksum takes a moment: only the read pattern needs it, and only once.
  const std::uint32_t expected_sum = pattern == Pattern::Read ? host_checksum(seed0, nwords) : 0;

  std::vector<BwResult> results;
  for (const auto& c : configs) {
    const Kernel k = select_kernel(pattern, c);
    const Grid g = grid_for(device, k, c, sms, chunks_of(c, nvec));
    args.bulk_bytes = static_cast<std::uint32_t>(c.bulk_bytes);
    args.stages = static_cast<std::uint32_t>(c.unroll);

    BwResult r;
    r.pattern = pattern_name;
    r.buffer_bytes = buffer_bytes;
    r.buffers = nbuf;
    r.bytes_per_launch = traffic;
    r.config = c;
    r.grid = static_cast<int>(g.blocks);
    r.occupancy_blocks_per_sm = g.occupancy;
    r.sm_count = sms;
    r.warmup = warmup;
    r.seed = seed;
    if (!g.skipped.empty()) {
      r.skipped = g.skipped;
      results.push_back(std::move(r));
      continue;
    }
    if (dst_words) poison(dst_words, buffer_bytes, stream.get());
    if (partial_bytes) poison(partials.get(), partial_bytes, stream.get());
    r.timing = time_launches(stream.get(), warmup, reps, [&](cudaStream_t s) {
      k.launch(g.blocks, static_cast<unsigned>(c.threads), k.smem, s, args);
      CUDA_CHECK_LAUNCH();
    });

    switch (pattern) {
      case Pattern::Read: {
        r.verification.method = "checksum";
        r.verification.checked_words = nwords;
        r.verification.expected = expected_sum;
        r.verification.observed = device_checksum(partials.get<std::uint32_t>(), g.blocks);
        ROOFLINE_VERIFY(r.verification.observed == expected_sum,
                        "read: kernel checksum 0x" << std::hex << r.verification.observed
                                                   << " != host checksum 0x" << expected_sum << std::dec
                                                   << " over " << nwords << " words");
        break;
      }
      case Pattern::Write:
        r.verification.method = "spot-check";
        r.verification.checked_words = spot_check(dst_words, nwords, seed, "write",
                                                  [&](std::uint64_t i) { return fill_word(fill_key, i); });
        break;
      case Pattern::Copy:
        r.verification.method = "spot-check";
        r.verification.checked_words = spot_check(dst_words, nwords, seed, "copy",
                                                  [&](std::uint64_t i) { return data_word(seed0, i); });
        break;
      case Pattern::Triad:
        r.verification.method = "spot-check";
        r.verification.checked_words = spot_check(dst_words, nwords, seed, "triad", [&](std::uint64_t i) {
          const float b = word_to_float(data_word(seed0, i)), cc = word_to_float(data_word(seed1, i));
          const float a = std::fmaf(kTriadScalar, cc, b);
          std::uint32_t bits;
          std::memcpy(&bits, &a, sizeof bits);
          return bits;
        });
        break;
      case Pattern::L2Read:
        break;
    }
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<BwResult> run_l2_read(int device, std::size_t working_set_bytes, std::size_t target_bytes_per_launch,
                                  int reps, int warmup, const std::vector<BwConfig>& configs, std::uint32_t seed,
                                  BwFault fault) {
  validate_common(reps, warmup, configs, Pattern::L2Read);
  if (working_set_bytes < 16 || working_set_bytes % 16)
    throw std::invalid_argument("working_set_bytes must be a positive multiple of 16");
  const std::uint64_t nvec = working_set_bytes / 16, nwords = working_set_bytes / 4;
  for (const auto& c : configs) {
    const std::uint64_t chunk = static_cast<std::uint64_t>(c.unroll) * c.threads;
    if (nvec % chunk || nvec / chunk > UINT_MAX)
      throw std::invalid_argument("working set of " + std::to_string(working_set_bytes) +
                                  " bytes is not a whole number of chunks of threads*unroll*16 = " +
                                  std::to_string(chunk * 16) + " bytes");
  }

  DeviceScope scope(device);
  const int sms = sm_count_of(device);
  std::uint64_t passes = std::max<std::uint64_t>(1, (target_bytes_per_launch + working_set_bytes / 2) / working_set_bytes);

  std::uint64_t max_blocks = 1;
  for (const auto& c : configs) {
    const std::uint64_t one_shot = nvec / (static_cast<std::uint64_t>(c.unroll) * c.threads) * passes;
    const std::uint64_t persistent = static_cast<std::uint64_t>(sms) * c.blocks_per_sm;
    max_blocks = std::max({max_blocks, c.blocks_per_sm > 0 ? persistent : one_shot});
  }
  max_blocks = std::min<std::uint64_t>(max_blocks, INT_MAX);
  check_free_memory(device, working_set_bytes + max_blocks * sizeof(std::uint32_t) + (64u << 20));

  Stream stream;
  DeviceBuffer ws(working_set_bytes);
  DeviceBuffer partials(max_blocks * sizeof(std::uint32_t));
  const std::uint32_t seed0 = buffer_seed(seed, 0);
  fill_data(ws.get<std::uint32_t>(), nwords, seed0, false, sms, stream.get());
  stream.synchronize();
  const std::uint32_t ws_sum = host_checksum(seed0, nwords);

  std::vector<BwResult> results;
  for (const auto& c : configs) {
    const Kernel k = select_kernel(Pattern::L2Read, c);
    const std::uint64_t chunk = static_cast<std::uint64_t>(c.unroll) * c.threads;
    LaunchArgs args;
    args.src0 = ws.get<uint4>();
    args.partials = partials.get<std::uint32_t>();
    args.nchunks = static_cast<std::uint32_t>(nvec / chunk);
    args.total_chunks = static_cast<std::uint64_t>(args.nchunks) * passes;
    if (fault == BwFault::Short) args.total_chunks -= std::max<std::uint64_t>(1, args.total_chunks / 16);
    const Grid g = grid_for(device, k, c, sms, args.total_chunks);

    BwResult r;
    r.pattern = "l2_read";
    r.buffer_bytes = working_set_bytes;
    r.buffers = 1;
    r.passes = static_cast<int>(passes);
    r.bytes_per_launch = working_set_bytes * passes;
    r.config = c;
    r.grid = static_cast<int>(g.blocks);
    r.occupancy_blocks_per_sm = g.occupancy;
    r.sm_count = sms;
    r.warmup = warmup;
    r.seed = seed;
    if (!g.skipped.empty()) {
      r.skipped = g.skipped;
      results.push_back(std::move(r));
      continue;
    }
    poison(partials.get(), partials.bytes(), stream.get());
    r.timing = time_launches(stream.get(), warmup, reps, [&](cudaStream_t s) {
      k.launch(g.blocks, static_cast<unsigned>(c.threads), k.smem, s, args);
      CUDA_CHECK_LAUNCH();
    });
    const std::uint32_t expected = static_cast<std::uint32_t>(passes) * ws_sum;  // mod 2^32
    r.verification.method = "checksum";
    r.verification.checked_words = nwords * passes;
    r.verification.expected = expected;
    r.verification.observed = device_checksum(partials.get<std::uint32_t>(), g.blocks);
    ROOFLINE_VERIFY(r.verification.observed == expected,
                    "l2_read: kernel checksum 0x" << std::hex << r.verification.observed << " != host checksum 0x"
                                                  << expected << std::dec << " (" << passes << " passes over "
                                                  << nwords << " words)");
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<int> bandwidth_unrolls() { return {std::begin(kUnrolls), std::end(kUnrolls)}; }

std::vector<std::string> bandwidth_load_flavours(const std::string& pattern) {
  const Pattern p = pattern == "l2_read" ? Pattern::L2Read : parse_pattern(pattern);
  std::vector<std::string> v;
  if (p == Pattern::Write) return v;  // loads nothing
  for (const auto& n : kLoadNames) {
    if (!has_load(n.ld)) continue;
    if ((p == Pattern::Copy || p == Pattern::Triad) && !has_stream_load(n.ld)) continue;
    if (p == Pattern::L2Read && !has_l2_load(n.ld)) continue;
    v.emplace_back(n.name);
  }
  if (p == Pattern::Copy) {
    v.emplace_back("bulk");    // the copy engine through shared memory; see BwConfig
    v.emplace_back("memcpy");  // the driver's cudaMemcpyAsync
  }
  return v;
}

std::vector<std::string> bandwidth_store_flavours() {
  std::vector<std::string> v;
  for (const auto& n : kStoreNames)
    if (has_store(n.st)) v.emplace_back(n.name);
  return v;
}

std::vector<std::string> bandwidth_patterns() { return {"read", "write", "copy", "triad"}; }

}  // namespace roofline
