// The wgmma family's host side: shared-memory layouts and descriptors, random tiles, register
// fragments, the exact host reference and its check, and the measurement through
// compute_skeleton.hpp. The kernel is in tensor_wgmma.cu, the instruction structs in
// tensor_wgmma_ops.hpp.
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "compute.hpp"
#include "compute_skeleton.hpp"
#include "device.hpp"
#include "tensor_wgmma_ops.hpp"

namespace roofline {
namespace compute {
namespace wgmma {
namespace {
using namespace ops;

// ---- host side --------------------------------------------------------------------------------

struct Layout {
  int swizzle = 0;    // 0 or 128
  bool reg_a = false;
  bool swap_strides = false;  // debug knob, no-swizzle only
  uint64_t desc_fields() const {
    uint64_t lbo = swizzle ? 16 : 128, sbo = 1024, mode = swizzle ? 1 : 0;
    if (swap_strides) std::swap(lbo, sbo);
    return ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | mode << 62;
  }
  uint32_t step_bytes() const { return swizzle ? 32 : 256; }
  // Byte offset of element (row, k) of a tile (layouts at the top of this file).
  std::size_t offset(int row, int k, int elem_bytes) const {
    const std::size_t kb = static_cast<std::size_t>(k) * elem_bytes;
    if (swizzle) {
      const std::size_t logical = static_cast<std::size_t>(row) * kRowBytes + kb;
      return logical ^ (static_cast<std::size_t>(row & 7) << 4);
    }
    return static_cast<std::size_t>(row / 8) * 1024 + (kb / 16) * 128 + (row % 8) * 16 + kb % 16;
  }
};

Layout layout_of(const KernelConfig& c) {
  Layout l;
  // Defaults: the fastest layout measured on an H200 (see the results JSON); both are verified.
  l.swizzle = c.swizzle < 0 ? 128 : c.swizzle;
  l.reg_a = c.a_from_registers < 0 ? true : c.a_from_registers != 0;
  l.swap_strides = c.swap_descriptor_strides;
  if (l.swizzle != 0 && l.swizzle != 128) throw CoreError("wgmma: swizzle must be 0 or 128");
  if (l.swap_strides && l.swizzle) throw CoreError("wgmma: the swapped-strides knob applies to swizzle 0 only");
  return l;
}

struct Tiles {
  int n = 0, k_elems = 0, elem_bytes = 0, warpgroups = 0;
  std::vector<Element> b;               // N x K
  std::vector<std::vector<Element>> a;  // per warpgroup: 64 x K
};

template <class Op>
Tiles random_tiles(Precision p, int warpgroups, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tiles t;
  t.n = Op::N;
  t.elem_bytes = operand_bytes(p);
  t.k_elems = kRowBytes / t.elem_bytes;
  t.warpgroups = warpgroups;
  for (int i = 0; i < Op::N * t.k_elems; ++i) t.b.push_back(random_element(p, rng));
  t.a.resize(warpgroups);
  for (auto& a : t.a)
    for (int i = 0; i < 64 * t.k_elems; ++i) a.push_back(random_element(p, rng));
  return t;
}

void put(std::vector<unsigned char>& img, std::size_t at, const Element& e, int bytes) {
  for (int i = 0; i < bytes; ++i) img[at + i] = static_cast<unsigned char>(e.bits >> (8 * i));
}

// Shared-memory image: B, then (SS only) each warpgroup's A.
std::vector<unsigned char> image(const Tiles& t, const Layout& l) {
  const std::size_t b_bytes = static_cast<std::size_t>(t.n) * kRowBytes, a_bytes = 64 * kRowBytes;
  std::vector<unsigned char> img(b_bytes + (l.reg_a ? 0 : t.warpgroups * a_bytes), 0);
  for (int r = 0; r < t.n; ++r)
    for (int k = 0; k < t.k_elems; ++k) put(img, l.offset(r, k, t.elem_bytes), t.b[r * t.k_elems + k], t.elem_bytes);
  if (!l.reg_a)
    for (int w = 0; w < t.warpgroups; ++w)
      for (int r = 0; r < 64; ++r)
        for (int k = 0; k < t.k_elems; ++k)
          put(img, b_bytes + w * a_bytes + l.offset(r, k, t.elem_bytes), t.a[w][r * t.k_elems + k], t.elem_bytes);
  return img;
}

// RS fragments (PTX ISA, "Register fragments for matrix A" of wgmma): warp q of the warpgroup holds
// rows 16q..16q+15 in the layout of mma.m16n8kK's A: with g = lane / 4, t = lane % 4 and V elements
// per register, register r holds row 16q + g + 8 * (r % 2), elements k = (r / 2) * K/2 + t * V + v.
template <class Op>
std::vector<uint32_t> a_fragments(const Tiles& t) {
  const int per_reg = 4 / t.elem_bytes;
  std::vector<uint32_t> f(static_cast<std::size_t>(t.warpgroups) * kSteps * 4 * 128, 0u);
  for (int w = 0; w < t.warpgroups; ++w)
    for (int s = 0; s < kSteps; ++s)
      for (int r = 0; r < 4; ++r)
        for (int th = 0; th < 128; ++th) {
          const int q = th / 32, lane = th % 32;
          const int row = 16 * q + lane / 4 + 8 * (r % 2);
          uint32_t word = 0;
          for (int v = 0; v < per_reg; ++v) {
            const int k = s * Op::K + (r / 2) * (Op::K / 2) + (lane % 4) * per_reg + v;
            word |= t.a[w][row * t.k_elems + k].bits << (8 * t.elem_bytes * v);
          }
          f[((static_cast<std::size_t>(w) * kSteps + s) * 4 + r) * 128 + th] = word;
        }
  return f;
}

struct Plan {
  int warpgroups = 0, grid = 0, block = 0, smem = 0, a_bytes = 0, b_bytes = 0;
  Layout layout;
};

template <class Op>
Plan make_plan(const DeviceFacts& f, const KernelConfig& c) {
  Plan p;
  p.layout = layout_of(c);
  p.warpgroups = c.warpgroups > 0 ? c.warpgroups : 2;
  const int most = p.layout.reg_a ? max_warpgroups<true>() : max_warpgroups<false>();
  if (p.warpgroups > most)
    throw CoreError("wgmma: at most " + std::to_string(most) + " warpgroups per CTA with A from " +
                    (p.layout.reg_a ? "registers" : "shared memory") + " (their registers fill the register file)");
  p.block = p.warpgroups * 128;
  p.b_bytes = Op::N * kRowBytes;
  p.a_bytes = p.layout.reg_a ? 0 : 64 * kRowBytes;
  p.smem = p.b_bytes + p.warpgroups * p.a_bytes + kAlign;  // + slack to align the tiles
  if (p.smem > f.smem_per_block_optin) throw CoreError("wgmma: the operand tiles do not fit in shared memory");
  CUDA_CHECK(cudaFuncSetAttribute(wgmma_kernel_fn<Op>(p.layout.reg_a), cudaFuncAttributeMaxDynamicSharedMemorySize, p.smem));
  // One CTA per SM: a second would find no registers for its accumulators.
  p.grid = f.sm_count;
  return p;
}

// Device copies of one set of tiles: the shared-memory image, the A fragments (RS) and the output.
struct Buffers {
  DeviceBuffer img, frags, out;
  long long n_out = 0;
};

template <class Op>
Buffers upload_tiles(cudaStream_t s, const Plan& p, const Tiles& t) {
  Buffers b;
  std::vector<unsigned char> img = image(t, p.layout);
  b.img = DeviceBuffer(img.size());
  upload(s, b.img, img);
  if (p.layout.reg_a) {
    std::vector<uint32_t> f = a_fragments<Op>(t);
    b.frags = DeviceBuffer(f.size() * sizeof(uint32_t));
    upload(s, b.frags, f);
  }
  b.n_out = static_cast<long long>(p.grid) * p.warpgroups * Op::kRegs * 128;
  b.out = DeviceBuffer(b.n_out * sizeof(typename Op::Acc));
  return b;
}

template <class Op>
void launch_wgmma(const Plan& p, cudaStream_t s, const Buffers& b, long long iters, int* status,
                  unsigned long long* probe) {
  KernelArgs a{};
  a.image = b.img.get<uint4>();
  a.b_bytes = p.b_bytes;
  a.a_bytes = p.a_bytes;
  a.a_frags = b.frags.get<uint32_t>();
  a.desc_a = a.desc_b = p.layout.desc_fields();
  a.step_bytes = p.layout.step_bytes();
  a.iterations = iters;
  a.out = b.out.get();
  a.probe = probe;
  a.status = status;
  launch_wgmma_kernel<Op>(p.layout.reg_a, p.grid, p.block, p.smem, s, a);
  CUDA_CHECK_LAUNCH();
}

double tolerance(Precision p) {
  switch (p) {
    case Precision::int8: return 0.0;
    case Precision::fp8: return 1e-2;  // FP8 products accumulate with reduced precision in the unit
    default: return 1e-3;
  }
}

// One (precision, wgmma instruction, layout) benchmark for the measurement skeleton
// (compute_skeleton.hpp).
template <class Op>
class Bench {
 public:
  using Acc = typename Op::Acc;
  static constexpr Path kPath = Path::wgmma;
  Bench(const DeviceFacts& f, Precision p, const KernelConfig& c) : p_(p), c_(c), plan_(make_plan<Op>(f, c)) {}

  std::string instruction() const {
    return std::string(Op::kName) + (plan_.layout.reg_a ? " (A in registers)" : " (A, B in shared memory)");
  }
  const void* kernel() const { return wgmma_kernel_fn<Op>(plan_.layout.reg_a); }
  LaunchShape shape() const { return {plan_.grid, plan_.block, plan_.smem}; }
  double flop_per_iteration() const {
    return 2.0 * 64 * Op::N * Op::K * kMmasPerGroup * static_cast<double>(plan_.grid) * plan_.warpgroups;
  }
  std::map<std::string, long long> config(long long iterations) const {
    return {{"warpgroups", plan_.warpgroups},       {"ctas_per_sm", 1},
            {"mma_m", 64},                           {"mma_n", Op::N},
            {"mma_k", Op::K},                        {"mmas_per_commit", kMmasPerGroup},
            {"groups_in_flight", 2},                 {"k_slices", kSteps},
            {"iterations", iterations},              {"swizzle", plan_.layout.swizzle},
            {"a_from_registers", plan_.layout.reg_a ? 1 : 0}};
  }

  Verification verify(cudaStream_t stream, Fault fault) const {
    Tiles t = random_tiles<Op>(p_, plan_.warpgroups, 0xD15EA5Eull + static_cast<int>(p_));
    // Exact reference per warpgroup: D_w = A_w * B^T (B is stored N x K), and each element's bound.
    const int K = t.k_elems;
    std::vector<std::vector<double>> ref(plan_.warpgroups), bound(plan_.warpgroups);
    for (int w = 0; w < plan_.warpgroups; ++w) {
      ref[w].assign(64 * Op::N, 0.0);
      bound[w].assign(64 * Op::N, 0.0);
      for (int m = 0; m < 64; ++m)
        for (int n = 0; n < Op::N; ++n) {
          double s = 0, b = 0;
          for (int k = 0; k < K; ++k) {
            double prod = t.a[w][m * K + k].value * t.b[n * K + k].value;
            s += prod;
            b += std::fabs(prod);
          }
          ref[w][m * Op::N + n] = s;
          bound[w][m * Op::N + n] = b;
        }
    }
    if (fault == Fault::Corrupt) {  // after the reference: one element of warpgroup 0's A changes
      Element& e = t.a[0][0];
      e.bits ^= p_ == Precision::int8 ? 0x40u : (1u << (8 * t.elem_bytes - 1));
    }
    Buffers buf = upload_tiles<Op>(stream, plan_, t);
    StatusWord status(stream);
    const long long iters = verification_iterations(c_, 1);
    const long long passes = iters * (kMmasPerGroup / kSteps);  // full-K products per accumulator
    const std::vector<Acc> out = run_for_verification<Acc>(stream, buf.out, buf.n_out, [&](cudaStream_t s) {
      launch_wgmma<Op>(plan_, s, buf, iters, status.get(), nullptr);
    });
    status.check(stream, missing());

    // Accumulator layout (PTX ISA, wgmma D fragments): thread t of the warpgroup, register i:
    // row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * (t % 4) + i % 2.
    Checker check(tolerance(p_));
    for (int cta = 0; cta < plan_.grid; ++cta)
      for (int w = 0; w < plan_.warpgroups; ++w)
        for (int i = 0; i < Op::kRegs; ++i)
          for (int th = 0; th < 128; ++th) {
            const long long idx = ((static_cast<long long>(cta) * plan_.warpgroups + w) * Op::kRegs + i) * 128 + th;
            const int row = 16 * (th / 32) + (th % 32) / 4 + 8 * ((i / 2) % 2);
            const int col = 8 * (i / 4) + 2 * (th % 4) + i % 2;
            const int e = row * Op::N + col;
            check.check(static_cast<double>(out[idx]), passes * ref[w][e], passes * bound[w][e], idx);
          }
    return check.done(iters);
  }

  void prepare(cudaStream_t stream) {
    Tiles t = random_tiles<Op>(p_, plan_.warpgroups, 0xFACADEull + static_cast<int>(p_));
    buf_ = upload_tiles<Op>(stream, plan_, t);
    status_.reset(stream);
  }
  void launch(cudaStream_t s, long long iterations, unsigned long long* probe) {
    launch_wgmma<Op>(plan_, s, buf_, iterations, status_.get(), probe);
  }
  void check_status(cudaStream_t stream) const { status_.check(stream, missing()); }

 private:
  static std::string missing() {
    return std::string("this build has no sm_90a code for ") + Op::kName +
           " (build with 90a in ROOFLINE_CUDA_ARCHS; plain 90 lacks wgmma)";
  }
  Precision p_;
  KernelConfig c_;
  Plan plan_;
  Buffers buf_;
  StatusWord status_;
};

template <class Visit>
auto dispatch(Precision p, Visit&& visit) {
  switch (p) {
    case Precision::fp16: return visit(F16{});
    case Precision::bf16: return visit(BF16{});
    case Precision::tf32: return visit(TF32{});
    case Precision::fp8: return visit(E4M3{});
    case Precision::int8: return visit(S8{});
    default: break;
  }
  throw CoreError("no wgmma kernel for this precision");
}

}  // namespace

Support support(const DeviceFacts& f, Precision p) {
  if (p == Precision::fp32 || p == Precision::fp64)
    return {false, std::string(name(p)) + " has no wgmma path (measured on the SIMT path)"};
  // wgmma exists on sm_90a only: Blackwell replaced it with tcgen05, older GPUs never had it.
  if (f.cc_major != 9)
    return {false, "wgmma is a Hopper (compute capability 9.0) instruction; this GPU is " +
                       std::to_string(f.cc_major) + "." + std::to_string(f.cc_minor)};
  return {true, ""};
}

Verification verify(const DeviceFacts& f, Precision p, const KernelConfig& c, Fault fault) {
  return dispatch(p, [&](auto op) { return verify_bench<Bench<decltype(op)>>(f, p, c, fault); });
}

Measurement measure(const DeviceFacts& f, Precision p, const KernelConfig& c, int warmup, int reps) {
  return dispatch(p, [&](auto op) { return measure_bench<Bench<decltype(op)>>(f, p, c, warmup, reps); });
}

}  // namespace wgmma
}  // namespace compute
}  // namespace roofline
