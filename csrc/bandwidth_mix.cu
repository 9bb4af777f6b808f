// The read:write mix: a kernel that reads R parts and writes W parts per chunk (the envelope between
// the read and write patterns), one instantiation set per compiled ratio, and run_mix.
#include "bandwidth.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <sstream>
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

// The mix kernel's family, one per ratio (bandwidth_kernels.hpp says what a family is).
template <int R, int W>
struct MixFamily : MixTraits {
  template <int U, Ld L, St S>
  static Kernel get() {
    return {reinterpret_cast<const void*>(&mix_kernel<R, W, U, L, S>),
            [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
              mix_kernel<R, W, U, L, S><<<g, t, 0, st>>>(a.src0, a.dst, a.total_chunks, a.key, a.partials);
            }};
  }
};

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
}  // namespace bw

using namespace bw;

std::vector<BwResult> run_mix(int device, int read_parts, int write_parts, std::size_t buffer_bytes, int reps,
                              int warmup, const std::vector<BwConfig>& configs, std::uint32_t seed, Fault fault) {
  const MixRatio& ratio = mix_ratio(read_parts, write_parts);
  const PatternSpec& p = spec_of(Pattern::Mix);
  validate_common(reps, warmup, configs, p);
  require_fault(Family::Bandwidth, fault);
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
    args.total_chunks = fault == Fault::Short ? nchunks - std::max<std::uint64_t>(1, nchunks / 16) : nchunks;
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

std::vector<std::vector<int>> bandwidth_mix_ratios() {
  std::vector<std::vector<int>> v;
  for (const auto& m : kMixRatios) v.push_back({m.read_parts, m.write_parts});
  return v;
}

}  // namespace roofline
