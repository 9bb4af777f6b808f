// The bandwidth family's device-side building blocks, shared by its translation units (the
// device helpers are seen by nvcc only, the rest by the host files too): the load and store flavours, the fold and fill helpers of every kernel, the
// instantiation lists (which unrolls and flavours this build carries), the launch arguments, and the
// one dispatch that turns a configuration's run-time (unroll, load, store) into a kernel
// instantiation. The kernels themselves live with their pattern: bandwidth_hbm.cu (read, write,
// copy, triad, the copy engine), bandwidth_l2.cu (the L2 reads), bandwidth_mix.cu (read:write mix).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "bandwidth.hpp"
#include "host_reference.hpp"

namespace roofline {
namespace bw {

// ----------------------------------------------------------------------------------------------
// Data: the word functions and host references live in host_reference.hpp, so the host-only test
// (csrc/tests/host_reference_test.cpp) checks the very code both sides run.

using ref::buffer_seed;
using ref::data_word;
using ref::kFillMul;
using ref::kTriadScalar;
using ref::word_to_float;

constexpr std::uint32_t kMaxBulkStages = 8;

// The load and store flavours a configuration names (the asm of each is below).
enum class Ld { Plain, Nc, NcNa, NcNaPf, Cs, Cg };
enum class St { Plain, Cs };

// The device-side helpers below exist only for nvcc: the host files (bandwidth.cpp,
// bandwidth_verify.cpp) read the instantiation lists, LaunchArgs and Kernel from this header.
#if defined(__CUDACC__)
// ----------------------------------------------------------------------------------------------
// Load and store flavours. Inline PTX so the access width and cache operators are exactly what
// the configuration names (check with cuobjdump: LDG.E.128 / STG.E.128).

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

__device__ __forceinline__ uint4 fill_vector(std::uint64_t vec, std::uint32_t key) {
  const std::uint32_t b = static_cast<std::uint32_t>(vec * 4) * kFillMul;
  return make_uint4(b ^ key, (b + kFillMul) ^ key, (b + 2 * kFillMul) ^ key, (b + 3 * kFillMul) ^ key);
}

#endif  // defined(__CUDACC__)

// ----------------------------------------------------------------------------------------------
// Which instantiations this build carries. Every (unroll, load, store) is one kernel per pattern,
// and the package compiles for many architectures, so it carries what an H200 sweep of every
// variant (dev/bandwidth, 2026-11-30) showed can win: unrolls 1-16 (writes are fastest at 1-2,
// reads at 16), the plain, read-only-no-allocate, streaming and L2-only loads, plain and streaming
// stores. The L2::256B prefetch hint lost everywhere (-5% on reads) and "nc" tied "nc_na"; both are
// kept for the sweep (ROOFLINE_BW_EXPLORE) only.

#ifdef ROOFLINE_BW_EXPLORE
inline constexpr int kUnrolls[] = {1, 2, 4, 8, 16};
inline constexpr Ld kLoads[] = {Ld::Plain, Ld::Nc, Ld::NcNa, Ld::NcNaPf, Ld::Cs, Ld::Cg};
inline constexpr Ld kStreamLoads[] = {Ld::Plain, Ld::Nc, Ld::NcNa, Ld::NcNaPf, Ld::Cs, Ld::Cg};
inline constexpr St kStores[] = {St::Plain, St::Cs};
#else
inline constexpr int kUnrolls[] = {1, 2, 4, 8, 16};
inline constexpr Ld kLoads[] = {Ld::Plain, Ld::NcNa, Ld::Cs, Ld::Cg};
// Loads copy and triad are instantiated with (each is a kernel per store flavour and unroll): the
// sweep's winners there were plain, nc_na and cs, within 0.5% of each other.
inline constexpr Ld kStreamLoads[] = {Ld::Plain, Ld::NcNa, Ld::Cs};
#endif
#ifndef ROOFLINE_BW_EXPLORE
inline constexpr St kStores[] = {St::Plain, St::Cs};
#endif
// The L2 read's access orders (bandwidth_l2.cu's kernels say what each does).
enum class L2Order { Stride, Spread, Pipe };
// The L2 sweep's variants, named in a configuration's "load" field: all load with ld.global.cg
// (L2 only, see the L2 kernels in bandwidth_l2.cu); the name picks the access order.
struct L2VariantName { L2Order order; const char* name; };
inline constexpr L2VariantName kL2Variants[] = {{L2Order::Stride, "cg"}, {L2Order::Spread, "cg_spread"},
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
inline constexpr LoadName kLoadNames[] = {{Ld::Plain, "plain"}, {Ld::Nc, "nc"},    {Ld::NcNa, "nc_na"},
                                          {Ld::NcNaPf, "nc_na_l2pf256"}, {Ld::Cs, "cs"}, {Ld::Cg, "cg"}};
struct StoreName { St st; const char* name; };
inline constexpr StoreName kStoreNames[] = {{St::Plain, "plain"}, {St::Cs, "cs"}};

// The mix kernel's unrolls: R x U loads and W x U stores per thread and chunk, so even U = 4 puts
// up to 20 accesses in flight; more would only cost registers.
inline constexpr int kMixUnrolls[] = {1, 2, 4};
constexpr bool has_mix_unroll(int u) { return contains(kMixUnrolls, u); }

Ld parse_load(const std::string& name);   // bandwidth.cpp
St parse_store(const std::string& name);  // bandwidth.cpp

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

// What each family is compiled for, apart from its kernels, so the pattern table (bandwidth.cpp) reads
// the same predicates as the family (bandwidth_hbm.cu, bandwidth_mix.cu) that dispatches with them.
struct ReadTraits {
  static constexpr bool kLoads = true, kStores = false;
  static constexpr bool unroll_ok(int u) { return has_unroll(u); }
  static constexpr bool load_ok(Ld l) { return has_load(l); }
};

struct WriteTraits {
  static constexpr bool kLoads = false, kStores = true;
  static constexpr bool unroll_ok(int u) { return has_unroll(u); }
};

// Copy and triad.
struct StreamTraits {
  static constexpr bool kLoads = true, kStores = true;
  static constexpr bool unroll_ok(int u) { return has_unroll(u); }
  static constexpr bool load_ok(Ld l) { return has_stream_load(l); }
};

struct MixTraits {
  static constexpr bool kLoads = true, kStores = true;
  static constexpr bool unroll_ok(int u) { return has_mix_unroll(u); }
  static constexpr bool load_ok(Ld l) { return has_stream_load(l); }
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

inline bool is_bulk(const BwConfig& c) { return c.load == "bulk"; }

inline bool is_memcpy(const BwConfig& c) { return c.load == "memcpy"; }

}  // namespace bw
}  // namespace roofline
