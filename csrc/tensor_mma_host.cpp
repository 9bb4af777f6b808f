// The mma.sync family's host side: the documented fragment layouts, operand packing, the exact
// host reference and its check, and the measurement through compute_skeleton.hpp. The kernel is
// in tensor_mma.cu, the instruction structs in tensor_mma_ops.hpp.
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compute.hpp"
#include "compute_skeleton.hpp"
#include "device.hpp"
#include "tensor_mma_ops.hpp"

namespace roofline {
namespace compute {
namespace mma {

namespace {
using namespace ops;

// ---- host side --------------------------------------------------------------------------------

// Documented fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k*" and m8n8k16), one
// formula for every shape used here: g = lane / 4, t = lane % 4, V elements per 32-bit register.
struct Coord {
  int r, c;
};
template <class Op>
Coord a_coord(int lane, int reg, int v, int per_reg) {
  return {(lane >> 2) + 8 * (reg & 1), (reg >> 1) * (Op::K / 2) + (lane & 3) * per_reg + v};
}
template <class Op>
Coord b_coord(int lane, int reg, int v, int per_reg) {  // (k, n)
  return {reg * (Op::K / 2) + (lane & 3) * per_reg + v, lane >> 2};
}
template <class Op>
Coord c_coord(int lane, int reg) {
  return {(lane >> 2) + 8 * (reg >> 1), 2 * (lane & 3) + (reg & 1)};
}

struct Operands {
  std::vector<Element> a[2], b[2];  // a: M x K row-major; b: K x N row-major
};

template <class Op>
std::vector<uint32_t> pack(const Operands& o, Precision p) {
  const int bytes = operand_bytes(p), per_reg = 4 / bytes;
  std::vector<uint32_t> f(static_cast<std::size_t>((2 * Op::kA + 2 * Op::kB) * 32), 0u);
  for (int x = 0; x < 2; ++x)
    for (int lane = 0; lane < 32; ++lane) {
      for (int reg = 0; reg < Op::kA; ++reg)
        for (int v = 0; v < per_reg; ++v) {
          Coord rc = a_coord<Op>(lane, reg, v, per_reg);
          f[(x * Op::kA + reg) * 32 + lane] |= o.a[x][rc.r * Op::K + rc.c].bits << (8 * bytes * v);
        }
      for (int reg = 0; reg < Op::kB; ++reg)
        for (int v = 0; v < per_reg; ++v) {
          Coord kn = b_coord<Op>(lane, reg, v, per_reg);
          f[(2 * Op::kA + x * Op::kB + reg) * 32 + lane] |= o.b[x][kn.r * Op::N + kn.c].bits << (8 * bytes * v);
        }
    }
  return f;
}

struct Plan {
  int block = kThreads, blocks_per_sm = 0, grid = 0;
  long long warps() const { return static_cast<long long>(grid) * block / 32; }
};

template <class Op>
Plan make_plan(const DeviceFacts& f, const KernelConfig& c) {
  if (c.threads_per_block != 0 && c.threads_per_block != kThreads)
    throw CoreError("the mma.sync kernel runs 256 threads per block");
  Plan p;
  int fit = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, mma_kernel_fn<Op>(), p.block, 0));
  if (fit < 1) throw CoreError("the mma.sync kernel does not fit on an SM");
  p.blocks_per_sm = c.blocks_per_sm > 0 ? c.blocks_per_sm : fit;
  p.grid = p.blocks_per_sm * f.sm_count;
  return p;
}

template <class Op>
void launch_mma(const Plan& p, cudaStream_t s, const uint32_t* frags, long long iters, typename Op::Acc* out,
                int* status, unsigned long long* probe = nullptr) {
  launch_mma_kernel<Op>(p.grid, p.block, s, frags, iters, out, status, probe);
  CUDA_CHECK_LAUNCH();
}

Operands random_operands(const DeviceFacts&, Precision p, int M, int N, int K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Operands o;
  for (int x = 0; x < 2; ++x) {
    for (int i = 0; i < M * K; ++i) o.a[x].push_back(random_element(p, rng));
    for (int i = 0; i < K * N; ++i) o.b[x].push_back(random_element(p, rng));
  }
  return o;
}

double tolerance(Precision p) {
  switch (p) {
    case Precision::int8: return 0.0;
    // FP8 products accumulate with reduced precision inside the unit on some GPUs.
    case Precision::fp8: return 1e-2;
    default: return 1e-3;
  }
}

// One (precision, mma.sync instruction) benchmark for the measurement skeleton (compute_skeleton.hpp).
template <class Op>
class Bench {
 public:
  using Acc = typename Op::Acc;
  static constexpr Path kPath = Path::mma_sync;
  Bench(const DeviceFacts& f, Precision p, const KernelConfig& c) : f_(f), p_(p), c_(c), plan_(make_plan<Op>(f, c)) {}

  std::string instruction() const { return Op::kName; }
  const void* kernel() const { return mma_kernel_fn<Op>(); }
  LaunchShape shape() const { return {plan_.grid, plan_.block, 0}; }
  double flop_per_iteration() const {
    return 2.0 * Op::M * Op::N * Op::K * static_cast<double>(plan_.warps()) * kUnroll * kAcc;
  }
  std::map<std::string, long long> config(long long iterations) const {
    return {{"threads_per_block", plan_.block}, {"blocks_per_sm", plan_.blocks_per_sm},
            {"accumulators_per_warp", kAcc},  {"unroll", kUnroll},
            {"iterations", iterations},       {"mma_m", Op::M},
            {"mma_n", Op::N},                 {"mma_k", Op::K}};
  }

  Verification verify(cudaStream_t stream, Fault fault) const {
    Operands o = random_operands(f_, p_, Op::M, Op::N, Op::K, 0xC0FFEEull + static_cast<int>(p_));
    std::vector<uint32_t> frags = pack<Op>(o, p_);

    // Exact reference D_xy = A_x * B_y (products of these formats are exact in double) and the
    // bound each element's rounding could reach.
    std::vector<double> ref[2][2], bound[2][2];
    for (int x = 0; x < 2; ++x)
      for (int y = 0; y < 2; ++y) {
        ref[x][y].assign(Op::M * Op::N, 0.0);
        bound[x][y].assign(Op::M * Op::N, 0.0);
        for (int i = 0; i < Op::M; ++i)
          for (int j = 0; j < Op::N; ++j)
            for (int k = 0; k < Op::K; ++k) {
              double prod = o.a[x][i * Op::K + k].value * o.b[y][k * Op::N + j].value;
              ref[x][y][i * Op::N + j] += prod;
              bound[x][y][i * Op::N + j] += std::fabs(prod);
            }
      }
    if (fault == Fault::Corrupt) {  // after the reference: one element of A_0 changes (sign, or +-64 for int8)
      Element& e = o.a[0][0];
      e.bits ^= p_ == Precision::int8 ? 0x40u : (1u << (8 * operand_bytes(p_) - 1));
      frags = pack<Op>(o, p_);
    }

    const long long iters = verification_iterations(c_, 1);
    const long long count = iters * kUnroll;  // MMAs into each accumulator
    const long long n_out = plan_.warps() * kAcc * Op::kC * 32;
    DeviceBuffer d_frags(frags.size() * 4), d_out(n_out * sizeof(Acc));
    StatusWord status(stream);
    upload(stream, d_frags, frags);
    const std::vector<Acc> out = run_for_verification<Acc>(stream, d_out, n_out, [&](cudaStream_t s) {
      launch_mma<Op>(plan_, s, d_frags.get<uint32_t>(), iters, d_out.get<Acc>(), status.get());
    });
    status.check(stream, missing());

    Checker check(tolerance(p_));
    for (long long w = 0; w < plan_.warps(); ++w)
      for (int j = 0; j < kAcc; ++j)
        for (int r = 0; r < Op::kC; ++r)
          for (int lane = 0; lane < 32; ++lane) {
            const long long idx = ((w * kAcc + j) * Op::kC + r) * 32 + lane;
            const Coord rc = c_coord<Op>(lane, r);
            const int x = j & 1, y = (j >> 1) & 1, e = rc.r * Op::N + rc.c;
            check.check(static_cast<double>(out[idx]), j + count * ref[x][y][e], count * bound[x][y][e], idx);
          }
    return check.done(iters);
  }

  void prepare(cudaStream_t stream) {
    Operands o = random_operands(f_, p_, Op::M, Op::N, Op::K, 0xBEEFull + static_cast<int>(p_));
    std::vector<uint32_t> frags = pack<Op>(o, p_);
    const long long n_out = plan_.warps() * kAcc * Op::kC * 32;
    d_frags_ = DeviceBuffer(frags.size() * 4);
    d_out_ = DeviceBuffer(n_out * sizeof(Acc));
    upload(stream, d_frags_, frags);
    status_.reset(stream);
  }
  void launch(cudaStream_t s, long long iterations, unsigned long long* probe) {
    launch_mma<Op>(plan_, s, d_frags_.get<uint32_t>(), iterations, d_out_.get<Acc>(), status_.get(), probe);
  }
  void check_status(cudaStream_t stream) const { status_.check(stream, missing()); }

 private:
  static std::string missing() {
    return std::string("this build has no code for ") + Op::kName +
           " on this GPU's architecture (rebuild with its architecture in ROOFLINE_CUDA_ARCHS)";
  }
  DeviceFacts f_;
  Precision p_;
  KernelConfig c_;
  Plan plan_;
  DeviceBuffer d_frags_, d_out_;
  StatusWord status_;
};

// Which instruction a (precision, GPU) pair uses, as a visitor so each caller gets the Op type.
template <class Visit>
auto dispatch(const DeviceFacts& f, Precision p, Visit&& visit) {
  const int cc = f.cc();
  switch (p) {
    case Precision::fp16:
      if (cc >= 80) return visit(F16_m16n8k16{});
      return visit(F16_m16n8k8{});
    case Precision::bf16: return visit(BF16_m16n8k16{});
    case Precision::tf32: return visit(TF32_m16n8k8{});
    case Precision::fp8: return visit(E4M3_m16n8k32{});
    case Precision::int8:
      if (cc >= 80) return visit(S8_m16n8k32{});
      return visit(S8_m8n8k16{});
    default: break;
  }
  throw CoreError("no mma.sync kernel for this precision");
}

}  // namespace

Support support(const DeviceFacts& f, Precision p) {
  const int cc = f.cc();
  switch (p) {
    case Precision::fp32:
    case Precision::fp64:
      return {false, std::string(name(p)) + " has no mma.sync path here (measured on the SIMT path)"};
    case Precision::fp16:
    case Precision::int8:
      if (cc >= 75) return {true, ""};
      return {false, std::string(name(p)) + " mma.sync needs compute capability 7.5 (Turing) or newer"};
    case Precision::bf16:
    case Precision::tf32:
      if (cc >= 80) return {true, ""};
      return {false, std::string(name(p)) + " tensor cores need compute capability 8.0 (Ampere) or newer"};
    case Precision::fp8:
      // Native (QMMA) on Ada and consumer Blackwell only. On Hopper and data-center Blackwell
      // ptxas emulates it with FP16 HMMAs (seen in their SASS), and with operands that stay in
      // registers it even hoists those out of the loop, so a rate "measured" there would be
      // neither the tensor cores' FP8 rate nor honest. FP8 runs on wgmma there.
      if (cc == 89 || cc >= 120) return {true, ""};
      if (cc < 89) return {false, "fp8 (e4m3) tensor cores need compute capability 8.9 (Ada) or newer"};
      return {false, "this architecture has no native FP8 mma.sync (the compiler emulates it with FP16 "
                     "MMAs); its FP8 tensor rate is reached through wgmma/tcgen05 only"};
  }
  return {false, "unknown precision"};
}

Verification verify(const DeviceFacts& f, Precision p, const KernelConfig& c, Fault fault) {
  return dispatch(f, p, [&](auto op) { return verify_bench<Bench<decltype(op)>>(f, p, c, fault); });
}

Measurement measure(const DeviceFacts& f, Precision p, const KernelConfig& c, int warmup, int reps) {
  return dispatch(f, p, [&](auto op) { return measure_bench<Bench<decltype(op)>>(f, p, c, warmup, reps); });
}

}  // namespace mma
}  // namespace compute
}  // namespace roofline
