// The L2 read: kernels that read a working set meant to fit in L2 many times per launch, in one of
// three orders, and run_l2_read.
#include "bandwidth.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bandwidth_common.hpp"
#include "cuda_check.hpp"
#include "device.hpp"
#include "host_reference.hpp"

namespace roofline {
namespace bw {
namespace {

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
// (L2Order, the enum of these orders, is in bandwidth_kernels.hpp beside the instantiation lists.)

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

}  // namespace
}  // namespace bw

using namespace bw;

std::vector<BwResult> run_l2_read(int device, std::size_t working_set_bytes, std::size_t target_bytes_per_launch,
                                  int reps, int warmup, const std::vector<BwConfig>& configs, std::uint32_t seed,
                                  Fault fault, bool shared_starts) {
  const PatternSpec& p = spec_of(Pattern::L2Read);
  validate_common(reps, warmup, configs, p);
  require_fault(Family::Bandwidth, fault);
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
    if (fault == Fault::Short) args.total_chunks -= std::max<std::uint64_t>(1, args.total_chunks / 16);
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

}  // namespace roofline
