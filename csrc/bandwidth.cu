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
//            rounded fma (std::fmaf), so the comparison is bit-exact, spot-checked;
//   mix    : R read parts folded into a checksum and W write parts of write's words, both checked.
// Each pattern is one row of kPatterns (buffers, roles, check, expected words, kernels), so setting a
// pattern up and verifying it is the same code for every pattern.
// Destinations are poisoned (all bits set, a NaN as float) before every configuration, so an element
// the kernel did not write fails its check instead of passing with an earlier configuration's value.
#include "bandwidth.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cmath>
#include <iterator>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "host_clock.hpp"
#include "host_reference.hpp"

namespace roofline {
namespace {

// ----------------------------------------------------------------------------------------------
// Data: the word functions and host references live in host_reference.hpp, so the host-only test
// (csrc/tests/host_reference_test.cpp) checks the very code both sides run.

using ref::buffer_seed;
using ref::data_word;
using ref::kFillMul;
using ref::kTriadScalar;
using ref::word_to_float;

constexpr std::uint32_t kMaxBulkStages = 8;

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

// ---- L2 read kernels. ---------------------------------------------------------------------------
// Every L2 kernel loads with ld.global.cg ("cache at global level": L2 and below, never L1), the one
// load whose PTX definition excludes L1. The other L1-skipping flavour, nc + L1::no_allocate, is a
// hint the hardware may ignore, and repeated reads of a 1 MiB working set served partly from the
// SMs' L1 (256 KiB each, 33 MiB over an H200) would read as "L2" far above what L2 delivers; with cg
// every point of the curve, the smallest too, is L2 traffic by definition.
//
// Each reads a working set of `nchunks` chunks `total_chunks / nchunks` times (total_chunks is a
// multiple of nchunks, so the checksum is passes x the working set's sum) in one of three orders:
//   stride: blocks walk virtual chunks grid-stride, mapped back into the working set with a wrap
//           (no 64-bit modulo per chunk); all blocks sweep the set together, `grid` chunks apart;
//   spread: block b walks its own contiguous stretch of total_chunks / grid virtual chunks, so at
//           any moment the blocks sit evenly over the whole set (and so over both L2 partitions'
//           addresses) and each block's footprint is its whole stretch, not the gcd-sized subset
//           of chunks the stride order revisits when gridDim and nchunks share factors. Block b
//           starts at nchunks * frac(passes * b / grid) of the set, so g = gcd(passes, grid) blocks
//           share each start and read the same chunks in step for the whole launch; the host
//           picks passes with g = 1 (host_reference.hpp, coprime_passes);
//   pipe:   the stride order, software-pipelined: the loads of the block's next chunk are issued
//           before the current chunk is folded, so a thread has up to 2 x U vectors in flight and
//           never waits with none outstanding.
enum class L2Order { Stride, Spread, Pipe };

template <int U>
__device__ __forceinline__ void load_chunk_cg(const uint4* p, uint4 (&v)[U]) {
#pragma unroll
  for (int j = 0; j < U; ++j) v[j] = load16<Ld::Cg>(p + j * blockDim.x);
}

template <int U>
__device__ __forceinline__ std::uint32_t fold_chunk(const uint4 (&v)[U]) {
  std::uint32_t s = 0;
#pragma unroll
  for (int j = 0; j < U; ++j) s += fold(v[j]);
  return s;
}

template <int U, L2Order O>
__global__ void l2_read_kernel(const uint4* __restrict__ src, std::uint32_t nchunks,
                               std::uint64_t total_chunks, std::uint32_t* __restrict__ partials) {
  const std::uint32_t chunk = static_cast<std::uint32_t>(U) * blockDim.x;
  const uint4* base = src + threadIdx.x;
  std::uint32_t acc = 0;
  if constexpr (O == L2Order::Spread) {
    const std::uint64_t lo = total_chunks * blockIdx.x / gridDim.x;
    const std::uint64_t hi = total_chunks * (blockIdx.x + 1) / gridDim.x;
    std::uint32_t pc = static_cast<std::uint32_t>(lo % nchunks);
    for (std::uint64_t c = lo; c < hi; ++c) {
      uint4 v[U];
      load_chunk_cg<U>(base + static_cast<std::uint64_t>(pc) * chunk, v);
      acc += fold_chunk<U>(v);
      if (++pc == nchunks) pc = 0;
    }
  } else {
    const std::uint32_t step = gridDim.x % nchunks;
    std::uint32_t pc = blockIdx.x % nchunks;
    if constexpr (O == L2Order::Stride) {
      for (std::uint64_t c = blockIdx.x; c < total_chunks; c += gridDim.x) {
        uint4 v[U];
        load_chunk_cg<U>(base + static_cast<std::uint64_t>(pc) * chunk, v);
        acc += fold_chunk<U>(v);
        pc += step;
        if (pc >= nchunks) pc -= nchunks;
      }
    } else if (blockIdx.x < total_chunks) {  // Pipe
      uint4 v[U];
      load_chunk_cg<U>(base + static_cast<std::uint64_t>(pc) * chunk, v);
      for (std::uint64_t c = blockIdx.x + gridDim.x; c < total_chunks; c += gridDim.x) {
        pc += step;
        if (pc >= nchunks) pc -= nchunks;
        uint4 w[U];
        load_chunk_cg<U>(base + static_cast<std::uint64_t>(pc) * chunk, w);  // next chunk in flight
        acc += fold_chunk<U>(v);                                             // while this one folds
#pragma unroll
        for (int j = 0; j < U; ++j) v[j] = w[j];
      }
      acc += fold_chunk<U>(v);
    }
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

// R read parts and W write parts per chunk: thread t of a block loads R x U vectors of the source
// chunk, stores W x U vectors of the destination chunk (write's words), and only then folds what it
// loaded, so both streams are in flight together. Source and destination are whole numbers of
// chunks (no tail loop): the host sizes them so (ref::mix_layout).
template <int R, int W, int U, Ld L, St S>
__global__ void mix_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::uint64_t nchunks,
                           std::uint32_t key, std::uint32_t* __restrict__ partials) {
  const std::uint64_t rchunk = static_cast<std::uint64_t>(R * U) * blockDim.x;
  const std::uint64_t wchunk = static_cast<std::uint64_t>(W * U) * blockDim.x;
  std::uint32_t acc = 0;
  for (std::uint64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const uint4* p = src + c * rchunk + threadIdx.x;
    const std::uint64_t q = c * wchunk + threadIdx.x;
    uint4 v[R * U];
#pragma unroll
    for (int j = 0; j < R * U; ++j) v[j] = load16<L>(p + j * blockDim.x);
#pragma unroll
    for (int j = 0; j < W * U; ++j) {
      const std::uint64_t i = q + static_cast<std::uint64_t>(j) * blockDim.x;
      store16<S>(dst + i, fill_vector(i, key));
    }
#pragma unroll
    for (int j = 0; j < R * U; ++j) acc += fold(v[j]);
  }
  block_sum_to(acc, partials);
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
// The L2 sweep's variants, named in a configuration's "load" field: all load with ld.global.cg
// (L2 only, see the L2 kernels); the name picks the access order.
struct L2VariantName { L2Order order; const char* name; };
constexpr L2VariantName kL2Variants[] = {{L2Order::Stride, "cg"}, {L2Order::Spread, "cg_spread"},
                                         {L2Order::Pipe, "cg_pipe"}};

template <typename T, std::size_t N>
constexpr bool contains(const T (&set)[N], T v) {
  for (const T& x : set) if (x == v) return true;
  return false;
}
constexpr bool has_unroll(int u) { return contains(kUnrolls, u); }
constexpr bool has_load(Ld l) { return contains(kLoads, l); }
constexpr bool has_stream_load(Ld l) { return contains(kStreamLoads, l); }
constexpr bool has_store(St s) { return contains(kStores, s); }

struct LoadName { Ld ld; const char* name; };
constexpr LoadName kLoadNames[] = {{Ld::Plain, "plain"}, {Ld::Nc, "nc"},    {Ld::NcNa, "nc_na"},
                                   {Ld::NcNaPf, "nc_na_l2pf256"}, {Ld::Cs, "cs"}, {Ld::Cg, "cg"}};
struct StoreName { St st; const char* name; };
constexpr StoreName kStoreNames[] = {{St::Plain, "plain"}, {St::Cs, "cs"}};

// The mix kernel's unrolls: R x U loads and W x U stores per thread and chunk, so even U = 4 puts
// up to 20 accesses in flight; more would only cost registers.
constexpr int kMixUnrolls[] = {1, 2, 4};
constexpr bool has_mix_unroll(int u) { return contains(kMixUnrolls, u); }

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
  const uint4* src0 = nullptr;  // read / copy / mix source, triad b, l2 working set
  const uint4* src1 = nullptr;  // triad c
  uint4* dst = nullptr;         // write / copy / triad / mix destination
  std::uint32_t* partials = nullptr;
  std::uint64_t nvec = 0;
  std::uint32_t nchunks = 0;     // l2: chunks in the working set
  std::uint64_t total_chunks = 0;  // l2: chunks read per launch; mix: chunks per launch
  std::uint32_t key = 0;         // write / mix: fill key
  float s = kTriadScalar;
  std::uint32_t bulk_bytes = 0;  // bulk copy: bytes per transfer
  std::uint32_t stages = 0;      // bulk copy: ring stages
};

struct Kernel {
  const void* fn = nullptr;  // for the occupancy query
  void (*launch)(unsigned grid, unsigned threads, std::size_t smem, cudaStream_t, const LaunchArgs&) = nullptr;
  std::size_t smem = 0;      // dynamic shared memory per block
};

// ----------------------------------------------------------------------------------------------
// Kernel families: one struct per kernel template, saying which unrolls and flavours it is compiled
// for and how to launch one instantiation. pick_kernel<Family> turns a configuration's run-time
// (unroll, load, store) into that instantiation: one dispatch for every family. A family that
// never loads (stores) is instantiated with the first load (store) flavour only, so the build
// carries no duplicate kernels.

struct ReadFamily {
  static constexpr bool kLoads = true, kStores = false;
  static constexpr bool unroll_ok(int u) { return has_unroll(u); }
  static constexpr bool load_ok(Ld l) { return has_load(l); }
  template <int U, Ld L, St>
  static Kernel get() {
    return {reinterpret_cast<const void*>(&read_kernel<U, L>),
            [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
              read_kernel<U, L><<<g, t, 0, st>>>(a.src0, a.nvec, a.partials);
            }};
  }
};

struct WriteFamily {
  static constexpr bool kLoads = false, kStores = true;
  static constexpr bool unroll_ok(int u) { return has_unroll(u); }
  template <int U, Ld, St S>
  static Kernel get() {
    return {reinterpret_cast<const void*>(&write_kernel<U, S>),
            [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
              write_kernel<U, S><<<g, t, 0, st>>>(a.dst, a.nvec, a.key);
            }};
  }
};

struct CopyFamily {
  static constexpr bool kLoads = true, kStores = true;
  static constexpr bool unroll_ok(int u) { return has_unroll(u); }
  static constexpr bool load_ok(Ld l) { return has_stream_load(l); }
  template <int U, Ld L, St S>
  static Kernel get() {
    return {reinterpret_cast<const void*>(&copy_kernel<U, L, S>),
            [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
              copy_kernel<U, L, S><<<g, t, 0, st>>>(a.src0, a.dst, a.nvec);
            }};
  }
};

struct TriadFamily {
  static constexpr bool kLoads = true, kStores = true;
  static constexpr bool unroll_ok(int u) { return has_unroll(u); }
  static constexpr bool load_ok(Ld l) { return has_stream_load(l); }
  template <int U, Ld L, St S>
  static Kernel get() {
    return {reinterpret_cast<const void*>(&triad_kernel<U, L, S>),
            [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
              triad_kernel<U, L, S><<<g, t, 0, st>>>(a.src0, a.src1, a.dst, a.nvec, a.s);
            }};
  }
};

template <int R, int W>
struct MixFamily {
  static constexpr bool kLoads = true, kStores = true;
  static constexpr bool unroll_ok(int u) { return has_mix_unroll(u); }
  static constexpr bool load_ok(Ld l) { return has_stream_load(l); }
  template <int U, Ld L, St S>
  static Kernel get() {
    return {reinterpret_cast<const void*>(&mix_kernel<R, W, U, L, S>),
            [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
              mix_kernel<R, W, U, L, S><<<g, t, 0, st>>>(a.src0, a.dst, a.total_chunks, a.key, a.partials);
            }};
  }
};

template <typename F, int U, Ld L>
Kernel pick_store(St s) {
  if constexpr (!F::kStores) {
    return F::template get<U, L, kStores[0]>();
  } else {
    switch (s) {
      case St::Plain: if constexpr (has_store(St::Plain)) return F::template get<U, L, St::Plain>(); break;
      case St::Cs: if constexpr (has_store(St::Cs)) return F::template get<U, L, St::Cs>(); break;
    }
    throw std::invalid_argument("store flavour not compiled into this build");
  }
}

template <typename F, int U>
Kernel pick_load(Ld l, St s) {
  if constexpr (!F::kLoads) {
    return pick_store<F, U, kLoads[0]>(s);
  } else {
    switch (l) {
      case Ld::Plain: if constexpr (has_load(Ld::Plain) && F::load_ok(Ld::Plain)) return pick_store<F, U, Ld::Plain>(s); break;
      case Ld::Nc: if constexpr (has_load(Ld::Nc) && F::load_ok(Ld::Nc)) return pick_store<F, U, Ld::Nc>(s); break;
      case Ld::NcNa: if constexpr (has_load(Ld::NcNa) && F::load_ok(Ld::NcNa)) return pick_store<F, U, Ld::NcNa>(s); break;
      case Ld::NcNaPf: if constexpr (has_load(Ld::NcNaPf) && F::load_ok(Ld::NcNaPf)) return pick_store<F, U, Ld::NcNaPf>(s); break;
      case Ld::Cs: if constexpr (has_load(Ld::Cs) && F::load_ok(Ld::Cs)) return pick_store<F, U, Ld::Cs>(s); break;
      case Ld::Cg: if constexpr (has_load(Ld::Cg) && F::load_ok(Ld::Cg)) return pick_store<F, U, Ld::Cg>(s); break;
    }
    throw std::invalid_argument("this load flavour is not compiled into this build for this pattern");
  }
}

template <typename F>
Kernel pick_kernel(int unroll, Ld l, St s) {
  switch (unroll) {
    case 1: if constexpr (F::unroll_ok(1)) return pick_load<F, 1>(l, s); break;
    case 2: if constexpr (F::unroll_ok(2)) return pick_load<F, 2>(l, s); break;
    case 4: if constexpr (F::unroll_ok(4)) return pick_load<F, 4>(l, s); break;
    case 8: if constexpr (F::unroll_ok(8)) return pick_load<F, 8>(l, s); break;
    case 16: if constexpr (F::unroll_ok(16)) return pick_load<F, 16>(l, s); break;
    default: break;
  }
  throw std::invalid_argument("unroll " + std::to_string(unroll) + " is not compiled into this build");
}

L2Order parse_l2_variant(const std::string& name) {
  for (const auto& v : kL2Variants)
    if (name == v.name) return v.order;
  std::string known;
  for (const auto& v : kL2Variants) known += std::string(known.empty() ? "" : ", ") + v.name;
  throw std::invalid_argument("l2_read: load '" + name + "' is not an L2 read variant (" + known +
                              "; each loads with ld.global.cg, which never caches in L1)");
}

template <int U, L2Order O>
Kernel l2_kernel_of() {
  return {reinterpret_cast<const void*>(&l2_read_kernel<U, O>),
          [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
            l2_read_kernel<U, O><<<g, t, 0, st>>>(a.src0, a.nchunks, a.total_chunks, a.partials);
          }};
}

template <int U>
Kernel l2_kernel_u(L2Order o) {
  switch (o) {
    case L2Order::Stride: return l2_kernel_of<U, L2Order::Stride>();
    case L2Order::Spread: return l2_kernel_of<U, L2Order::Spread>();
    case L2Order::Pipe: return l2_kernel_of<U, L2Order::Pipe>();
  }
  throw std::logic_error("L2 order missing from l2_kernel_u");
}

Kernel l2_kernel(int unroll, const std::string& variant) {
  const L2Order o = parse_l2_variant(variant);
  switch (unroll) {
    case 1: return l2_kernel_u<1>(o);
    case 2: return l2_kernel_u<2>(o);
    case 4: return l2_kernel_u<4>(o);
    case 8: return l2_kernel_u<8>(o);
    case 16: return l2_kernel_u<16>(o);
    default: break;
  }
  throw std::invalid_argument("l2_read: unroll " + std::to_string(unroll) + " is not compiled into this build");
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
// The pattern table. A row says what a pattern is: which buffers it fills and reads, whether it
// writes one, how its output is checked and against which words, and which kernels run it. Setting
// a pattern up, validating its configurations and verifying it read the row, never the pattern.

enum class Pattern { Read, Write, Copy, Triad, Mix, L2Read };

// How a pattern's output is checked (a bit set: the mix does both).
constexpr unsigned kChecksum = 1;   // the kernel folded every word it read; the host's sum must match
constexpr unsigned kSpotCheck = 2;  // regions of the destination must hold the expected words

// Seeds of one measurement's buffers and the key of its stores: what expected words come from.
struct Seeds {
  std::uint32_t run = 0;          // the measurement's seed (picks the spot-check regions)
  std::uint32_t src[2] = {0, 0};  // per source buffer
  std::uint32_t fill_key = 0;     // write / mix stores
};

Seeds seeds_of(std::uint32_t seed) {
  Seeds s;
  s.run = seed;
  s.src[0] = buffer_seed(seed, 0);
  s.src[1] = buffer_seed(seed, 1);
  s.fill_key = buffer_seed(seed, 7);
  return s;
}

std::uint32_t expect_fill(const Seeds& s, std::uint64_t i) { return ref::fill_word(s.fill_key, i); }
std::uint32_t expect_copy(const Seeds& s, std::uint64_t i) { return data_word(s.src[0], i); }
std::uint32_t expect_triad(const Seeds& s, std::uint64_t i) { return ref::triad_word(s.src[0], s.src[1], i); }

struct PatternSpec {
  Pattern id;
  const char* name;
  int sources;          // buffers 0 .. sources-1 are filled with seeded data and read once
  bool float_sources;   // they hold word_to_float bits (triad's operands)
  bool writes;          // buffer `sources` is the destination, written once
  bool copy_engines;    // "bulk" (cp.async.bulk) and "memcpy" may stand in for the kernel
  unsigned check;       // kChecksum | kSpotCheck
  std::uint32_t (*expected)(const Seeds&, std::uint64_t);  // spot check: destination word i
  Kernel (*kernel)(int unroll, Ld, St);                    // nullptr: chosen per mix ratio / L2 variant
  bool (*unroll_ok)(int);
  bool (*load_ok)(Ld);  // nullptr: no load flavour to check (write loads nothing; l2_read names variants)
  const char* load_rule;  // why a load flavour the row refuses is refused
};

const PatternSpec kPatterns[] = {
    {Pattern::Read, "read", 1, false, false, false, kChecksum, nullptr, &pick_kernel<ReadFamily>,
     &ReadFamily::unroll_ok, &ReadFamily::load_ok, "is not compiled into this build"},
    {Pattern::Write, "write", 0, false, true, false, kSpotCheck, &expect_fill, &pick_kernel<WriteFamily>,
     &WriteFamily::unroll_ok, nullptr, ""},
    {Pattern::Copy, "copy", 1, false, true, true, kSpotCheck, &expect_copy, &pick_kernel<CopyFamily>,
     &CopyFamily::unroll_ok, &CopyFamily::load_ok, "is not compiled for copy/triad in this build"},
    {Pattern::Triad, "triad", 2, true, true, false, kSpotCheck, &expect_triad, &pick_kernel<TriadFamily>,
     &TriadFamily::unroll_ok, &TriadFamily::load_ok, "is not compiled for copy/triad in this build"},
    {Pattern::Mix, "mix", 1, false, true, false, kChecksum | kSpotCheck, &expect_fill, nullptr,
     &MixFamily<1, 1>::unroll_ok, &MixFamily<1, 1>::load_ok, "is not compiled for the mix kernel in this build"},
    // The L2 read's "load" names a variant (kL2Variants), checked by parse_l2_variant; its kernels
    // come from l2_kernel.
    {Pattern::L2Read, "l2_read", 1, false, false, false, kChecksum, nullptr, nullptr, &has_unroll, nullptr, ""},
};

const PatternSpec& spec_of(Pattern p) {
  for (const auto& s : kPatterns)
    if (s.id == p) return s;
  throw std::logic_error("pattern missing from kPatterns");
}

// The streaming patterns a caller may name (mix and l2_read have functions of their own).
constexpr Pattern kStreaming[] = {Pattern::Read, Pattern::Write, Pattern::Copy, Pattern::Triad};

const PatternSpec& parse_pattern(const std::string& name) {
  for (Pattern p : kStreaming)
    if (name == spec_of(p).name) return spec_of(p);
  throw std::invalid_argument("unknown bandwidth pattern '" + name + "' (read, write, copy, triad)");
}

int buffers_of(const PatternSpec& p) { return p.sources + (p.writes ? 1 : 0); }

// The mix ratios compiled in: read-only and write-only are the read and write patterns.
struct MixRatio {
  int read_parts, write_parts;
  Kernel (*kernel)(int unroll, Ld, St);
};
const MixRatio kMixRatios[] = {{4, 1, &pick_kernel<MixFamily<4, 1>>},
                               {2, 1, &pick_kernel<MixFamily<2, 1>>},
                               {1, 1, &pick_kernel<MixFamily<1, 1>>},
                               {1, 2, &pick_kernel<MixFamily<1, 2>>}};

const MixRatio& mix_ratio(int r, int w) {
  for (const auto& m : kMixRatios)
    if (m.read_parts == r && m.write_parts == w) return m;
  std::ostringstream s;
  s << "read:write mix " << r << ":" << w << " is not compiled into this build (";
  for (const auto& m : kMixRatios) s << m.read_parts << ":" << m.write_parts << (&m == std::end(kMixRatios) - 1 ? "" : ", ");
  s << "; read-only and write-only are the read and write patterns)";
  throw std::invalid_argument(s.str());
}

// ----------------------------------------------------------------------------------------------
// Host side.

void validate_copy_engine(const BwConfig& c, const PatternSpec& p) {
  if (!p.copy_engines)
    throw std::invalid_argument("load '" + c.load + "' exists for the copy pattern only");
  if (is_memcpy(c)) return;
  if (c.threads != 32) throw std::invalid_argument("load 'bulk' is driven by one warp: threads must be 32");
  if (c.unroll < 1 || c.unroll > static_cast<int>(kMaxBulkStages))
    throw std::invalid_argument("load 'bulk': unroll is the number of stages, 1 to " + std::to_string(kMaxBulkStages));
  if (c.bulk_bytes < 16 || c.bulk_bytes % 16 || c.bulk_bytes > (1 << 20))
    throw std::invalid_argument("load 'bulk': bulk_bytes must be a multiple of 16 up to 1 MiB");
}

void validate_common(int reps, int warmup, const std::vector<BwConfig>& configs, const PatternSpec& p) {
  if (reps < 1) throw std::invalid_argument("reps must be at least 1");
  if (warmup < 0) throw std::invalid_argument("warmup must not be negative");
  if (configs.empty()) throw std::invalid_argument("no configurations given");
  for (const auto& c : configs) {
    if (c.threads < 32 || c.threads > 1024 || c.threads % 32)
      throw std::invalid_argument("threads must be a multiple of 32 in [32, 1024], got " + std::to_string(c.threads));
    if (c.blocks_per_sm < 0) throw std::invalid_argument("blocks_per_sm must not be negative");
    if (is_memcpy(c) || is_bulk(c)) {
      validate_copy_engine(c, p);
      continue;
    }
    if (!p.unroll_ok(c.unroll))
      throw std::invalid_argument(std::string(p.name) + ": unroll " + std::to_string(c.unroll) +
                                  " is not compiled into this build");
    parse_store(c.store);
    if (!p.load_ok) continue;  // the pattern loads nothing: the load flavour is ignored
    if (!p.load_ok(parse_load(c.load)))
      throw std::invalid_argument(std::string(p.name) + ": load flavour '" + c.load + "' " + p.load_rule);
  }
}

Kernel select_kernel(const PatternSpec& p, const BwConfig& c) {
  if (is_memcpy(c)) return driver_memcpy();
  if (is_bulk(c)) {
    Kernel k = bulk_copy();
    k.smem = static_cast<std::size_t>(c.unroll) * c.bulk_bytes;
    return k;
  }
  return p.kernel(c.unroll, parse_load(c.load), parse_store(c.store));
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
  fill(s, p, 0xff, bytes);
}

// Copies the spot-check regions of the destination back and compares every word in them with
// `expected(i)`; returns the words compared.
template <typename Expected>
std::size_t spot_check(cudaStream_t s, const std::uint32_t* dev, std::uint64_t nwords, std::uint32_t seed,
                       const char* pattern, Expected&& expected) {
  const ref::SpotRegions regions = ref::spot_regions(nwords, seed);
  const std::uint64_t len = regions.len;
  std::vector<std::uint32_t> host(len);
  std::size_t checked = 0;
  for (std::uint64_t start : regions.starts) {
    download(s, host.data(), dev + start, len * sizeof(std::uint32_t));
    const ref::Mismatches bad = ref::compare_words(host.data(), start, len, expected);
    ROOFLINE_VERIFY(bad.count == 0, pattern << ": " << bad.count << " of " << len << " words from word " << start
                                            << " differ from the host's values; first at word " << bad.first
                                            << ": expected 0x" << std::hex << expected(bad.first) << ", got 0x"
                                            << host[bad.first - start] << std::dec
                                            << " (0xffffffff = never written)");
    checked += len;
  }
  return checked;
}

std::uint32_t device_checksum(cudaStream_t stream, const std::uint32_t* partials, unsigned blocks) {
  std::vector<std::uint32_t> host(blocks);
  download(stream, host.data(), partials, blocks * sizeof(std::uint32_t));
  std::uint32_t s = 0;
  for (std::uint32_t v : host) s += v;
  return s;
}

std::uint64_t apply_fault(std::uint64_t nvec, BwFault fault) {
  return fault == BwFault::Short ? nvec - nvec / 16 : nvec;
}

// What verifying one configuration needs besides the pattern's row.
struct CheckInputs {
  const std::uint32_t* partials = nullptr;  // checksum: the per-block sums the kernel wrote
  unsigned blocks = 0;
  std::uint64_t read_words = 0;             // checksum: words the kernel should have folded
  std::uint32_t expected_sum = 0;           // checksum: the host's sum of them (mod 2^32)
  const std::uint32_t* dst = nullptr;       // spot check: the destination
  std::uint64_t dst_words = 0;
  Seeds seeds;
};

// Checks the output the timed launches left, as the pattern's row says; raises VerificationError.
// The read-backs are queued on the stream that ran the launches, so they follow the last of them.
void verify(cudaStream_t s, const PatternSpec& p, const CheckInputs& in, BwVerification& v) {
  if (p.check & kChecksum) {
    v.method = "checksum";
    v.checked_words = in.read_words;
    v.expected = in.expected_sum;
    v.observed = device_checksum(s, in.partials, in.blocks);
    ROOFLINE_VERIFY(v.observed == v.expected, p.name << ": kernel checksum 0x" << std::hex << v.observed
                                                     << " != host checksum 0x" << v.expected << std::dec
                                                     << " over " << in.read_words << " words");
  }
  if (p.check & kSpotCheck) {
    v.checked_words += spot_check(s, in.dst, in.dst_words, in.seeds.run, p.name,
                                  [&](std::uint64_t i) { return p.expected(in.seeds, i); });
    v.method = v.method.empty() ? "spot-check" : v.method + "+spot-check";
  }
}

// The fields every result of one configuration shares.
BwResult result_shell(const PatternSpec& p, const BwConfig& c, const Grid& g, int sms, int warmup,
                      std::uint32_t seed) {
  BwResult r;
  r.pattern = p.name;
  r.config = c;
  r.grid = static_cast<int>(g.blocks);
  r.occupancy_blocks_per_sm = g.occupancy;
  r.sm_count = sms;
  r.warmup = warmup;
  r.seed = seed;
  r.skipped = g.skipped;
  return r;
}

// Poisons the outputs, times the configuration, stamps the end of the timed loop and verifies.
void time_and_verify(const PatternSpec& p, const Kernel& k, const Grid& g, const BwConfig& c,
                     const LaunchArgs& args, std::size_t dst_bytes, std::size_t partial_bytes, int warmup,
                     int reps, cudaStream_t stream, CheckInputs in, BwResult& r) {
  if (args.dst && dst_bytes) poison(args.dst, dst_bytes, stream);
  if (args.partials && partial_bytes) poison(args.partials, partial_bytes, stream);
  r.timing = time_launches(stream, warmup, reps, [&](cudaStream_t s) {
    k.launch(g.blocks, static_cast<unsigned>(c.threads), k.smem, s, args);
    CUDA_CHECK_LAUNCH();
  });
  r.timed_end_s = steady_clock_s();
  in.blocks = g.blocks;
  verify(stream, p, in, r.verification);
}

// The largest grid any configuration can use: it sizes the per-block partial sums.
template <typename OneShot>
std::uint64_t max_grid(const std::vector<BwConfig>& configs, int sms, OneShot&& one_shot) {
  std::uint64_t blocks = 1;
  for (const auto& c : configs) {
    const std::uint64_t persistent = static_cast<std::uint64_t>(sms) * c.blocks_per_sm;
    blocks = std::max(blocks, c.blocks_per_sm > 0 ? persistent : one_shot(c));
  }
  return std::min<std::uint64_t>(blocks, INT_MAX);
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
  const PatternSpec& p = parse_pattern(pattern_name);
  validate_common(reps, warmup, configs, p);
  if (buffer_bytes < 16 || buffer_bytes % 16)
    throw std::invalid_argument("buffer_bytes must be a positive multiple of 16, got " + std::to_string(buffer_bytes));

  DeviceScope scope(device);
  const int sms = sm_count_of(device);
  const std::uint64_t nvec = buffer_bytes / 16, nwords = buffer_bytes / 4;
  const int nbuf = buffers_of(p);
  const std::size_t traffic = buffer_bytes * static_cast<std::size_t>(nbuf);  // each buffer once
  const std::uint64_t max_blocks = max_grid(configs, sms, [&](const BwConfig& c) { return chunks_of(c, nvec); });
  const std::size_t partial_bytes = (p.check & kChecksum) ? max_blocks * sizeof(std::uint32_t) : 0;
  check_free_memory(device, traffic + partial_bytes + (64u << 20));  // + room for the context's own use

  Stream stream;
  std::vector<DeviceBuffer> bufs;
  for (int b = 0; b < nbuf; ++b) bufs.emplace_back(buffer_bytes);
  DeviceBuffer partials(partial_bytes);

  // Roles, from the row: sources first (read: the source; copy: the source; triad: b, c), then the
  // destination (write: buf0; copy: buf1; triad: a = buf2).
  const Seeds seeds = seeds_of(seed);
  LaunchArgs args;
  for (int b = 0; b < p.sources; ++b) fill_data(bufs[b].get<std::uint32_t>(), nwords, seeds.src[b], p.float_sources, sms, stream.get());
  args.src0 = p.sources >= 1 ? bufs[0].get<uint4>() : nullptr;
  args.src1 = p.sources >= 2 ? bufs[1].get<uint4>() : nullptr;
  args.dst = p.writes ? bufs[p.sources].get<uint4>() : nullptr;
  args.partials = partials.get<std::uint32_t>();
  args.key = seeds.fill_key;
  args.nvec = apply_fault(nvec, fault);
  stream.synchronize();

  CheckInputs in;
  in.partials = args.partials;
  in.read_words = nwords;
  // The host's checksum takes a moment: only checksummed patterns need it, and only once.
  in.expected_sum = (p.check & kChecksum) ? ref::checksum(seeds.src[0], nwords) : 0;
  in.dst = reinterpret_cast<const std::uint32_t*>(args.dst);
  in.dst_words = nwords;
  in.seeds = seeds;

  std::vector<BwResult> results;
  for (const auto& c : configs) {
    const Kernel k = select_kernel(p, c);
    const Grid g = grid_for(device, k, c, sms, chunks_of(c, nvec));
    args.bulk_bytes = static_cast<std::uint32_t>(c.bulk_bytes);
    args.stages = static_cast<std::uint32_t>(c.unroll);
    BwResult r = result_shell(p, c, g, sms, warmup, seed);
    r.buffer_bytes = buffer_bytes;
    r.buffers = nbuf;
    r.bytes_per_launch = traffic;
    r.read_bytes_per_launch = buffer_bytes * static_cast<std::size_t>(p.sources);
    r.write_bytes_per_launch = p.writes ? buffer_bytes : 0;
    r.read_parts = p.sources;
    r.write_parts = p.writes ? 1 : 0;
    if (r.skipped.empty())
      time_and_verify(p, k, g, c, args, p.writes ? buffer_bytes : 0, partial_bytes, warmup, reps, stream.get(), in, r);
    results.push_back(std::move(r));
  }
  return results;
}

namespace {

// One chunk size every configuration divides, so all of them run on one mix allocation.
std::uint64_t common_chunk_vectors(const std::vector<BwConfig>& configs) {
  std::uint64_t l = 1;
  for (const auto& c : configs) {
    const std::uint64_t chunk = static_cast<std::uint64_t>(c.unroll) * c.threads;
    l = l / std::gcd(l, chunk) * chunk;
  }
  return l;
}

}  // namespace

std::vector<BwResult> run_mix(int device, int read_parts, int write_parts, std::size_t buffer_bytes, int reps,
                              int warmup, const std::vector<BwConfig>& configs, std::uint32_t seed, BwFault fault) {
  const MixRatio& ratio = mix_ratio(read_parts, write_parts);
  const PatternSpec& p = spec_of(Pattern::Mix);
  validate_common(reps, warmup, configs, p);
  const ref::MixLayout m = ref::mix_layout(buffer_bytes, read_parts, write_parts, common_chunk_vectors(configs));
  if (m.unit_vectors == 0)
    throw std::invalid_argument("buffer_bytes " + std::to_string(buffer_bytes) + " is too small for one chunk of every "
                                "configuration per read and write part");

  DeviceScope scope(device);
  const int sms = sm_count_of(device);
  const std::size_t src_bytes = m.src_vectors * 16, dst_bytes = m.dst_vectors * 16;
  const std::uint64_t max_blocks = max_grid(configs, sms, [&](const BwConfig& c) {
    return m.unit_vectors / (static_cast<std::uint64_t>(c.unroll) * c.threads);
  });
  const std::size_t partial_bytes = max_blocks * sizeof(std::uint32_t);
  check_free_memory(device, src_bytes + dst_bytes + partial_bytes + (64u << 20));

  Stream stream;
  DeviceBuffer src(src_bytes), dst(dst_bytes), partials(partial_bytes);
  const Seeds seeds = seeds_of(seed);
  fill_data(src.get<std::uint32_t>(), src_bytes / 4, seeds.src[0], false, sms, stream.get());
  stream.synchronize();

  LaunchArgs args;
  args.src0 = src.get<uint4>();
  args.dst = dst.get<uint4>();
  args.partials = partials.get<std::uint32_t>();
  args.key = seeds.fill_key;
  CheckInputs in;
  in.partials = args.partials;
  in.read_words = src_bytes / 4;
  in.expected_sum = ref::checksum(seeds.src[0], src_bytes / 4);
  in.dst = dst.get<std::uint32_t>();
  in.dst_words = dst_bytes / 4;
  in.seeds = seeds;

  std::vector<BwResult> results;
  for (const auto& c : configs) {
    const Kernel k = ratio.kernel(c.unroll, parse_load(c.load), parse_store(c.store));
    const std::uint64_t nchunks = m.unit_vectors / (static_cast<std::uint64_t>(c.unroll) * c.threads);
    args.total_chunks = fault == BwFault::Short ? nchunks - std::max<std::uint64_t>(1, nchunks / 16) : nchunks;
    const Grid g = grid_for(device, k, c, sms, nchunks);
    BwResult r = result_shell(p, c, g, sms, warmup, seed);
    r.buffer_bytes = std::max(src_bytes, dst_bytes);
    r.buffers = 2;
    r.bytes_per_launch = src_bytes + dst_bytes;
    r.read_bytes_per_launch = src_bytes;
    r.write_bytes_per_launch = dst_bytes;
    r.read_parts = read_parts;
    r.write_parts = write_parts;
    if (r.skipped.empty())
      time_and_verify(p, k, g, c, args, dst_bytes, partial_bytes, warmup, reps, stream.get(), in, r);
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<BwResult> run_l2_read(int device, std::size_t working_set_bytes, std::size_t target_bytes_per_launch,
                                  int reps, int warmup, const std::vector<BwConfig>& configs, std::uint32_t seed,
                                  BwFault fault, bool shared_starts) {
  const PatternSpec& p = spec_of(Pattern::L2Read);
  validate_common(reps, warmup, configs, p);
  for (const auto& c : configs) {
    parse_l2_variant(c.load);  // validate_common has refused the copy engines already
  }
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
  const std::uint64_t passes = std::max<std::uint64_t>(1, (target_bytes_per_launch + working_set_bytes / 2) / working_set_bytes);
  const std::uint64_t max_blocks = max_grid(configs, sms, [&](const BwConfig& c) {
    return nvec / (static_cast<std::uint64_t>(c.unroll) * c.threads) * passes;
  });
  check_free_memory(device, working_set_bytes + max_blocks * sizeof(std::uint32_t) + (64u << 20));

  Stream stream;
  DeviceBuffer ws(working_set_bytes);
  DeviceBuffer partials(max_blocks * sizeof(std::uint32_t));
  const Seeds seeds = seeds_of(seed);
  fill_data(ws.get<std::uint32_t>(), nwords, seeds.src[0], false, sms, stream.get());
  stream.synchronize();
  const std::uint32_t set_sum = ref::checksum(seeds.src[0], nwords);

  std::vector<BwResult> results;
  for (const auto& c : configs) {
    const Kernel k = l2_kernel(c.unroll, c.load);
    const std::uint64_t chunk = static_cast<std::uint64_t>(c.unroll) * c.threads;
    LaunchArgs args;
    args.src0 = ws.get<uint4>();
    args.partials = partials.get<std::uint32_t>();
    args.nchunks = static_cast<std::uint32_t>(nvec / chunk);
    // A persistent grid does not depend on the chunk count, so it is known before passes are chosen.
    std::uint64_t own_passes = passes;
    if (!shared_starts && c.blocks_per_sm > 0 && parse_l2_variant(c.load) == L2Order::Spread) {
      const Grid probe = grid_for(device, k, c, sms, static_cast<std::uint64_t>(args.nchunks) * passes);
      if (probe.skipped.empty()) own_passes = ref::coprime_passes(passes, probe.blocks);
    }
    args.total_chunks = static_cast<std::uint64_t>(args.nchunks) * own_passes;
    if (fault == BwFault::Short) args.total_chunks -= std::max<std::uint64_t>(1, args.total_chunks / 16);
    const Grid g = grid_for(device, k, c, sms, args.total_chunks);
    CheckInputs in;
    in.partials = partials.get<std::uint32_t>();
    in.read_words = nwords * own_passes;
    in.expected_sum = static_cast<std::uint32_t>(own_passes) * set_sum;  // mod 2^32
    BwResult r = result_shell(p, c, g, sms, warmup, seed);
    r.buffer_bytes = working_set_bytes;
    r.buffers = 1;
    r.passes = static_cast<int>(own_passes);
    r.bytes_per_launch = r.read_bytes_per_launch = working_set_bytes * own_passes;
    r.read_parts = 1;
    if (r.skipped.empty())
      time_and_verify(p, k, g, c, args, 0, partials.bytes(), warmup, reps, stream.get(), in, r);
    results.push_back(std::move(r));
  }
  return results;
}

BwConfig l2_default_config() {
  BwConfig c;
  c.threads = 256;
  c.unroll = 4;
  c.blocks_per_sm = 0;
  c.load = kL2Variants[0].name;
  return c;
}

std::vector<int> bandwidth_unrolls(const std::string& pattern) {
  if (pattern == "mix") return {std::begin(kMixUnrolls), std::end(kMixUnrolls)};
  return {std::begin(kUnrolls), std::end(kUnrolls)};
}

std::vector<std::string> bandwidth_load_flavours(const std::string& pattern) {
  const PatternSpec& p = pattern == "l2_read" ? spec_of(Pattern::L2Read)
                         : pattern == "mix"   ? spec_of(Pattern::Mix)
                                              : parse_pattern(pattern);
  std::vector<std::string> v;
  if (p.id == Pattern::L2Read) {
    for (const auto& n : kL2Variants) v.emplace_back(n.name);
    return v;
  }
  if (!p.load_ok) return v;  // loads nothing
  for (const auto& n : kLoadNames)
    if (has_load(n.ld) && p.load_ok(n.ld)) v.emplace_back(n.name);
  if (p.copy_engines) {
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

std::vector<std::string> bandwidth_patterns() {
  std::vector<std::string> v;
  for (Pattern p : kStreaming) v.emplace_back(spec_of(p).name);
  return v;
}

std::vector<std::vector<int>> bandwidth_mix_ratios() {
  std::vector<std::vector<int>> v;
  for (const auto& m : kMixRatios) v.push_back({m.read_parts, m.write_parts});
  return v;
}

}  // namespace roofline
