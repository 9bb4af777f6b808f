// The HBM streaming patterns: the read, write, copy and triad kernels, the copy engines that may
// stand in for copy's kernel (cp.async.bulk through shared memory, the driver's memcpy), and
// run_bandwidth. How work is cut into chunks: bandwidth_kernels.hpp; the data and each pattern's
// check: bandwidth.cpp.
#include "bandwidth.hpp"

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

// The kernel families of these patterns (bandwidth_kernels.hpp says what a family is).
struct ReadFamily : ReadTraits {
  template <int U, Ld L, St>
  static Kernel get() {
    return {reinterpret_cast<const void*>(&read_kernel<U, L>),
            [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
              read_kernel<U, L><<<g, t, 0, st>>>(a.src0, a.nvec, a.partials);
            }};
  }
};

struct WriteFamily : WriteTraits {
  template <int U, Ld, St S>
  static Kernel get() {
    return {reinterpret_cast<const void*>(&write_kernel<U, S>),
            [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
              write_kernel<U, S><<<g, t, 0, st>>>(a.dst, a.nvec, a.key);
            }};
  }
};

struct CopyFamily : StreamTraits {
  template <int U, Ld L, St S>
  static Kernel get() {
    return {reinterpret_cast<const void*>(&copy_kernel<U, L, S>),
            [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
              copy_kernel<U, L, S><<<g, t, 0, st>>>(a.src0, a.dst, a.nvec);
            }};
  }
};

struct TriadFamily : StreamTraits {
  template <int U, Ld L, St S>
  static Kernel get() {
    return {reinterpret_cast<const void*>(&triad_kernel<U, L, S>),
            [](unsigned g, unsigned t, std::size_t, cudaStream_t st, const LaunchArgs& a) {
              triad_kernel<U, L, S><<<g, t, 0, st>>>(a.src0, a.src1, a.dst, a.nvec, a.s);
            }};
  }
};

Kernel bulk_copy() {
  return {reinterpret_cast<const void*>(&bulk_copy_kernel),
          [](unsigned g, unsigned t, std::size_t smem, cudaStream_t st, const LaunchArgs& a) {
            bulk_copy_kernel<<<g, t, smem, st>>>(reinterpret_cast<const unsigned char*>(a.src0),
                                                 reinterpret_cast<unsigned char*>(a.dst), a.nvec * 16,
                                                 a.bulk_bytes, a.stages);
          }};
}

// The driver's own device-to-device copy (what torch copy_ and CuPy copyto call for contiguous
// buffers): a copy figure below it would not be a peak.
void launch_memcpy(unsigned /*grid*/, unsigned /*threads*/, std::size_t /*smem*/, cudaStream_t st,
                   const LaunchArgs& a) {
  CUDA_CHECK(cudaMemcpyAsync(a.dst, a.src0, a.nvec * 16, cudaMemcpyDeviceToDevice, st));
}

Kernel driver_memcpy() { return {nullptr, &launch_memcpy}; }

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

}  // namespace

Kernel pick_read_kernel(int unroll, Ld l, St s) { return pick_kernel<ReadFamily>(unroll, l, s); }
Kernel pick_write_kernel(int unroll, Ld l, St s) { return pick_kernel<WriteFamily>(unroll, l, s); }
Kernel pick_copy_kernel(int unroll, Ld l, St s) { return pick_kernel<CopyFamily>(unroll, l, s); }
Kernel pick_triad_kernel(int unroll, Ld l, St s) { return pick_kernel<TriadFamily>(unroll, l, s); }

}  // namespace bw

using namespace bw;

std::vector<BwResult> run_bandwidth(int device, const std::string& pattern_name, std::size_t buffer_bytes,
                                    int reps, int warmup, const std::vector<BwConfig>& configs,
                                    std::uint32_t seed, Fault fault) {
  const PatternSpec& p = parse_pattern(pattern_name);
  validate_common(reps, warmup, configs, p);
  require_fault(Family::Bandwidth, fault);
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
  // The host's checksum takes a moment: only checksummed patterns need it, once per call, and a
  // repeated (seed, size) not at all (checksum_memo: the sustained phase's back-to-back calls).
  in.expected_sum = (p.check & kChecksum) ? ref::checksum_memo(seeds.src[0], nwords) : 0;
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

}  // namespace roofline
