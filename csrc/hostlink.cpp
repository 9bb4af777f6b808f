// Pinned host <-> device copy bandwidth. See hostlink.hpp for the contract.
//
// Data. Words are a hash of (seed, index), computed the same way on host and device, never zeros
// (zeros hide unwritten memory). Destinations are poisoned (all bits set) before the copies, so a
// copy that moved less than it was asked to fails its check instead of passing on stale data.
//   h2d: the host fills the pinned buffer and sums its words (mod 2^32) in the same pass; after the
//        timed copies a kernel sums every word the device received, and the two sums must agree;
//   d2h: a kernel fills the device buffer; after the timed copies the host compares every word of
//        the pinned buffer with the seeded value.
// The checks run on what the last timed copy left, so what is verified is what was timed.
// The two kernels are in hostlink_kernels.cu; this file, host code only, compiles with the host files
// beside nvcc's per-architecture passes (issue 28).
#include "hostlink.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include "cuda_check.hpp"
#include "device.hpp"
#include "errors.hpp"
#include "hostlink_kernels.hpp"

namespace roofline {
namespace {

constexpr int kThreads = 256;

int grid_for(int device, std::uint64_t n) {
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const std::uint64_t want = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(want, std::uint64_t(sms) * 8)));
}

// Owns page-locked host memory (cudaMallocHost): the only kind a copy engine reads and writes
// directly, so the copy runs at the link's rate instead of through a staging buffer.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t bytes) { CUDA_CHECK(cudaMallocHost(&ptr_, bytes)); }
  ~PinnedBuffer() {
    if (ptr_) (void)cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  std::uint32_t* words() const { return static_cast<std::uint32_t*>(ptr_); }
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// Runs fn(lo, hi) -> uint64 over [0, n) split across the host's cores and adds the results. 256 MiB
// is 2^26 words: filling or comparing them on one core takes long enough to matter in a 10 s check.
template <typename Fn>
std::uint64_t parallel_sum(std::uint64_t n, Fn fn) {
  unsigned nt = std::max(1u, std::min(std::thread::hardware_concurrency(), 32u));
  if (n < (1ull << 20)) nt = 1;
  std::vector<std::uint64_t> part(nt, 0);
  std::vector<std::thread> threads;
  unsigned started = 0;
  try {
    for (unsigned t = 1; t < nt; ++t) {
      threads.emplace_back([&part, &fn, n, nt, t] { part[t] = fn(n * t / nt, n * (t + 1) / nt); });
      started = t;
    }
  } catch (const std::system_error&) {
    // No more threads: the calling thread does the ranges that did not start.
  }
  std::uint64_t s = fn(0, n / nt);
  for (unsigned t = started + 1; t < nt; ++t) s += fn(n * t / nt, n * (t + 1) / nt);
  for (auto& th : threads) th.join();
  for (unsigned t = 1; t <= started; ++t) s += part[t];
  return s;
}

// Fills the pinned buffer with the seeded words and returns their sum mod 2^32, in one pass.
std::uint32_t fill_host(std::uint32_t* w, std::uint64_t n, std::uint32_t seed) {
  return static_cast<std::uint32_t>(parallel_sum(n, [w, seed](std::uint64_t lo, std::uint64_t hi) {
    std::uint32_t s = 0;
    for (std::uint64_t i = lo; i < hi; ++i) s += (w[i] = link::link_word(seed, i));
    return static_cast<std::uint64_t>(s);
  }));
}

std::uint64_t count_mismatches(const std::uint32_t* w, std::uint64_t n, std::uint32_t seed,
                               std::uint64_t* first_bad) {
  *first_bad = n;
  std::uint64_t bad = parallel_sum(n, [w, seed](std::uint64_t lo, std::uint64_t hi) {
    std::uint64_t c = 0;
    for (std::uint64_t i = lo; i < hi; ++i) c += w[i] != link::link_word(seed, i);
    return c;
  });
  if (bad) {
    for (std::uint64_t i = 0; i < n; ++i) {
      if (w[i] != link::link_word(seed, i)) {
        *first_bad = i;
        break;
      }
    }
  }
  return bad;
}

std::size_t copy_bytes(std::size_t bytes, bool short_copy) {
  return short_copy ? bytes - (bytes / 16 / 16) * 16 : bytes;
}

HostLinkResult time_h2d(int device, const Stream& stream, const DeviceBuffer& dev, const PinnedBuffer& host,
                        std::size_t bytes, int reps, int warmup, std::uint32_t seed, Fault fault) {
  const std::uint64_t nwords = bytes / 4;
  const std::uint32_t expected = fill_host(host.words(), nwords, seed);
  fill(stream.get(), dev.get(), 0xFF, bytes);
  const std::size_t n = copy_bytes(bytes, fault == Fault::Short);
  HostLinkResult r;
  r.direction = "h2d";
  r.timing = time_launches(stream.get(), warmup, reps, [&](cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(dev.get(), host.get(), n, cudaMemcpyHostToDevice, s));
  });
  DeviceBuffer sum(sizeof(std::uint32_t));
  fill(stream.get(), sum.get(), 0, sizeof(std::uint32_t));
  link::launch_sum(grid_for(device, bytes / 16), kThreads, stream.get(), dev.get<uint4>(), bytes / 16,
                   sum.get<std::uint32_t>());
  CUDA_CHECK_LAUNCH();
  std::uint32_t observed = 0;
  download(stream.get(), &observed, sum.get(), sizeof observed);
  ROOFLINE_VERIFY(observed == expected, "host-to-device copy of " << bytes << " bytes: the device's sum of the "
                  "words it received is 0x" << std::hex << observed << ", the host's is 0x" << expected);
  r.verification.method = "checksum";
  r.verification.checked = static_cast<long long>(nwords);
  r.verification.expected = expected;
  r.verification.observed = observed;
  r.verification.passed = true;
  return r;
}

HostLinkResult time_d2h(int device, const Stream& stream, const DeviceBuffer& dev, const PinnedBuffer& host,
                        std::size_t bytes, int reps, int warmup, std::uint32_t seed, Fault fault) {
  const std::uint64_t nwords = bytes / 4;
  link::launch_fill(grid_for(device, nwords), kThreads, stream.get(), dev.get<std::uint32_t>(), nwords, seed);
  CUDA_CHECK_LAUNCH();
  stream.synchronize();
  std::memset(host.get(), 0xFF, bytes);
  const std::size_t n = copy_bytes(bytes, fault == Fault::Short || fault == Fault::ShortD2H);
  HostLinkResult r;
  r.direction = "d2h";
  r.timing = time_launches(stream.get(), warmup, reps, [&](cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(host.get(), dev.get(), n, cudaMemcpyDeviceToHost, s));
  });
  std::uint64_t first_bad = 0;
  const std::uint64_t bad = count_mismatches(host.words(), nwords, seed, &first_bad);
  ROOFLINE_VERIFY(bad == 0, "device-to-host copy of " << bytes << " bytes: " << bad << " of " << nwords
                  << " words differ from what the device held, the first at word " << first_bad);
  r.verification.method = "compare";
  r.verification.checked = static_cast<long long>(nwords);
  r.verification.mismatches = static_cast<long long>(bad);  // 0: any mismatch threw above
  r.verification.passed = true;
  return r;
}

}  // namespace

std::vector<HostLinkResult> run_hostlink(int device, std::size_t bytes, int reps, int warmup,
                                         std::uint32_t seed, Fault fault) {
  if (bytes < 256 || bytes % 16) throw std::invalid_argument("bytes must be a multiple of 16, at least 256");
  if (reps < 1) throw std::invalid_argument("reps must be at least 1");
  if (warmup < 0) throw std::invalid_argument("warmup must not be negative");
  require_fault(Family::HostLink, fault);
  DeviceScope scope(device);
  Stream stream;
  DeviceBuffer dev(bytes);
  PinnedBuffer host(bytes);
  std::vector<HostLinkResult> out;
  // Different seeds per direction, so a d2h check can never pass on what h2d left behind.
  out.push_back(time_h2d(device, stream, dev, host, bytes, reps, warmup, seed, fault));
  out.push_back(time_d2h(device, stream, dev, host, bytes, reps, warmup, seed ^ 0x5bd1e995u, fault));
  for (auto& r : out) {
    r.bytes = bytes;
    r.warmup = warmup;
  }
  out[0].seed = seed;
  out[1].seed = seed ^ 0x5bd1e995u;
  return out;
}

}  // namespace roofline
