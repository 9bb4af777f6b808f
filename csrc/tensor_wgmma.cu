// Tensor-core roof on Hopper through wgmma.mma_async (sm_90a), the only path that reaches the
// full tensor rate there (mma.sync tops out near two thirds of it).
//
// A throughput microbenchmark, not a GEMM: each CTA copies operand tiles of random data into shared
// memory once, and then each of its warpgroups issues m64nNk* wgmmas (N = 256, the largest; 224 for
// INT8, whose largest shape that is) into one register accumulator set, kMmasPerGroup per commit
// group, keeping one group in flight while it issues the next. No global memory traffic and no
// barriers in the loop: only the tensor cores and the operand reads that feed them.
//
// Two operand sources (KernelConfig::a_from_registers):
//   SS: A and B both from shared memory through matrix descriptors;
//   RS: A from registers (per-warp fragments, loaded once), B from shared memory. This saves the
//       A reads from shared memory (a fifth of the operand traffic at N = 256).
// Two shared-memory layouts (KernelConfig::swizzle), both K-major with 128 bytes of K per row:
//   0:   canonical no-swizzle: 8-row x 16-byte core matrices of 128 contiguous bytes, element
//        (row, k_byte) at (row / 8) * SBO + (k_byte / 16) * LBO + (row % 8) * 16 + k_byte % 16,
//        LBO = 128 (next core matrix along K), SBO = 1024 (next 8 rows); a K slice (32 bytes) is
//        two core matrices, so slice s starts at 256 * s;
//   128: 128-byte swizzle: row r at 128 * r, its 16-byte chunk c stored at chunk c ^ (r % 8), 8-row
//        atoms of 1024 bytes (SBO; LBO unused), tiles 1024-byte aligned; slice s starts at 32 * s and
//        the hardware applies the XOR to the address it computes.
// One instruction's K slice is always 32 bytes: 16 f16/bf16, 8 tf32, 32 e4m3/s8 elements.
// Default: RS, 128-byte swizzle, 2 warpgroups. On an H200 (2026-11-30) every combination reached
// 98-100% of the tensor rate at the clock the SMs counted; RS reads a fifth less shared memory,
// draws less power and so ran FP16/FP8 1-3% faster under the 700 W cap. The SASS is one HGMMA
// (QGMMA for e4m3, IGMMA for s8) after another, a WARPGROUP.DEPBAR per group, no spills.
// The descriptor (PTX ISA, "Matrix Descriptor Format"): start address, LBO and SBO in 16-byte units
// at bits 0, 16 and 32; the swizzle mode in bits 62-63 (0 none, 1 = 128 B).
//
// Verification runs the same kernel for one loop trip and compares every accumulator of every
// warpgroup of every CTA with the host's exact product, mapped through the documented accumulator
// layout; a wrong descriptor, layout or fragment, or a dead loop, fails.
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

#include "compute.hpp"
#include "compute_skeleton.hpp"
#include "device.hpp"

namespace roofline {
namespace compute {
namespace wgmma {

// Operand lists of the 128-register (m64n256, f32) and 112-register (m64n224, s32) accumulators.
// Generated once; PTX has no way to name a register range.
#define ROOFLINE_WG_D128 \
  "{" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
  "}"

#define ROOFLINE_WG_F32x128(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

#define ROOFLINE_WG_D112 \
  "{" \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" \
  "}"

#define ROOFLINE_WG_S32x112(d) \
  "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), \
  "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), \
  "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), \
  "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), \
  "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), \
  "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), \
  "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), \
  "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), \
  "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), \
  "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), \
  "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), \
  "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), \
  "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), \
  "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111])

// The A-fragment operands of the register-A (RS) forms, after the accumulators.
#define ROOFLINE_WG_A128 "{%128, %129, %130, %131}"
#define ROOFLINE_WG_A112 "{%112, %113, %114, %115}"
namespace ops {

inline constexpr int kMaxWarpgroups = 3;  // 3 x 128 threads x <= 168 registers fills the register file
inline constexpr int kSteps = 4;          // K slices held (128 bytes of K per row)
inline constexpr int kMmasPerGroup = 8;   // wgmmas per commit group: two passes over the K slices
inline constexpr int kRowBytes = 128;     // bytes of K per operand row in shared memory
inline constexpr int kAlign = 1024;       // tile alignment the 128-byte swizzle needs

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ROOFLINE_WGMMA_COMPILED 1
#else
#define ROOFLINE_WGMMA_COMPILED 0
#endif

// One struct per instruction: run() is the SS form (A and B descriptors), run_rs() the RS form
// (A fragments in 4 registers). Immediates: scale-d = 1 (accumulate), no negation (1, 1), and for
// f16/bf16 both operands K-major (transpose flags 0); TF32, FP8 and INT8 have no transpose flags.
struct F16 {
  static constexpr int N = 256, K = 16, kRegs = 128;
  using Acc = float;
  static constexpr const char* kName = "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16";
  __device__ __forceinline__ static void run(float (&d)[kRegs], uint64_t a, uint64_t b) {
#if ROOFLINE_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " ROOFLINE_WG_D128 ", %128, %129, 1, 1, 1, 0, 0;"
                 : ROOFLINE_WG_F32x128(d) : "l"(a), "l"(b));
#endif
  }
  __device__ __forceinline__ static void run_rs(float (&d)[kRegs], const uint32_t (&a)[4], uint64_t b) {
#if ROOFLINE_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " ROOFLINE_WG_D128 ", " ROOFLINE_WG_A128 ", %132, 1, 1, 1, 0;"
                 : ROOFLINE_WG_F32x128(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
#endif
  }
};

struct BF16 {
  static constexpr int N = 256, K = 16, kRegs = 128;
  using Acc = float;
  static constexpr const char* kName = "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16";
  __device__ __forceinline__ static void run(float (&d)[kRegs], uint64_t a, uint64_t b) {
#if ROOFLINE_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " ROOFLINE_WG_D128 ", %128, %129, 1, 1, 1, 0, 0;"
                 : ROOFLINE_WG_F32x128(d) : "l"(a), "l"(b));
#endif
  }
  __device__ __forceinline__ static void run_rs(float (&d)[kRegs], const uint32_t (&a)[4], uint64_t b) {
#if ROOFLINE_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " ROOFLINE_WG_D128 ", " ROOFLINE_WG_A128 ", %132, 1, 1, 1, 0;"
                 : ROOFLINE_WG_F32x128(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
#endif
  }
};

struct TF32 {
  static constexpr int N = 256, K = 8, kRegs = 128;
  using Acc = float;
  static constexpr const char* kName = "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32";
  __device__ __forceinline__ static void run(float (&d)[kRegs], uint64_t a, uint64_t b) {
#if ROOFLINE_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " ROOFLINE_WG_D128 ", %128, %129, 1, 1, 1;"
                 : ROOFLINE_WG_F32x128(d) : "l"(a), "l"(b));
#endif
  }
  __device__ __forceinline__ static void run_rs(float (&d)[kRegs], const uint32_t (&a)[4], uint64_t b) {
#if ROOFLINE_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " ROOFLINE_WG_D128 ", " ROOFLINE_WG_A128 ", %132, 1, 1, 1;"
                 : ROOFLINE_WG_F32x128(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
#endif
  }
};

struct E4M3 {
  static constexpr int N = 256, K = 32, kRegs = 128;
  using Acc = float;
  static constexpr const char* kName = "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3";
  __device__ __forceinline__ static void run(float (&d)[kRegs], uint64_t a, uint64_t b) {
#if ROOFLINE_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " ROOFLINE_WG_D128 ", %128, %129, 1, 1, 1;"
                 : ROOFLINE_WG_F32x128(d) : "l"(a), "l"(b));
#endif
  }
  __device__ __forceinline__ static void run_rs(float (&d)[kRegs], const uint32_t (&a)[4], uint64_t b) {
#if ROOFLINE_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 " ROOFLINE_WG_D128 ", " ROOFLINE_WG_A128 ", %132, 1, 1, 1;"
                 : ROOFLINE_WG_F32x128(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
#endif
  }
};

struct S8 {
  static constexpr int N = 224, K = 32, kRegs = 112;  // m64n224k32 is the largest integer shape
  using Acc = int;
  static constexpr const char* kName = "wgmma.mma_async.sync.aligned.m64n224k32.s32.s8.s8";
  // Integer wgmma takes only scale-d; without .satfinite the accumulators wrap (harmless here).
  __device__ __forceinline__ static void run(int (&d)[kRegs], uint64_t a, uint64_t b) {
#if ROOFLINE_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n224k32.s32.s8.s8 " ROOFLINE_WG_D112 ", %112, %113, 1;"
                 : ROOFLINE_WG_S32x112(d) : "l"(a), "l"(b));
#endif
  }
  __device__ __forceinline__ static void run_rs(int (&d)[kRegs], const uint32_t (&a)[4], uint64_t b) {
#if ROOFLINE_WGMMA_COMPILED
    asm volatile("wgmma.mma_async.sync.aligned.m64n224k32.s32.s8.s8 " ROOFLINE_WG_D112 ", " ROOFLINE_WG_A112 ", %116, 1;"
                 : ROOFLINE_WG_S32x112(d) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
#endif
  }
};

__device__ __forceinline__ void fence() {
#if ROOFLINE_WGMMA_COMPILED
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#if ROOFLINE_WGMMA_COMPILED
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wait() {
#if ROOFLINE_WGMMA_COMPILED
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

}  // namespace ops

namespace {
using namespace ops;

struct Args {
  const uint4* image;        // [B tile][A tile of warpgroup 0][A tile of warpgroup 1]..., for every CTA
  int b_bytes, a_bytes;      // a_bytes = 0 when A comes from registers
  const uint32_t* a_frags;   // RS: [warpgroup][K slice][register][thread of the warpgroup]
  uint64_t desc_a, desc_b;   // descriptor fields but the start address
  uint32_t step_bytes;       // start-address advance from one K slice to the next
  long long iterations;
  void* out;                 // [CTA][warpgroup][register][thread]
  unsigned long long* probe; // in-kernel clock (compute.hpp), may be null
  int* status;
};

// A in registers takes 16 more registers per thread: at three warpgroups (168 registers each)
// ptxas then serializes the wgmmas and spills, so the RS kernel is built for two.
template <bool kRegA>
constexpr int max_warpgroups() { return kRegA ? 2 : kMaxWarpgroups; }

template <class Op, bool kRegA>
__global__ void __launch_bounds__(max_warpgroups<kRegA>() * 128, 1) wgmma_kernel(const __grid_constant__ Args args) {
#if ROOFLINE_WGMMA_COMPILED
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* smem = smem_raw + ((kAlign - (raw & (kAlign - 1))) & (kAlign - 1));
  const int warpgroups = blockDim.x / 128;
  const int words = (args.b_bytes + warpgroups * args.a_bytes) / 16;
  uint4* s16 = reinterpret_cast<uint4*>(smem);
  for (int i = threadIdx.x; i < words; i += blockDim.x) s16[i] = args.image[i];
  // The tensor cores read shared memory through the async proxy: make the generic-proxy stores
  // above visible to it before the barrier.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  ClockProbe probe;
  if (threadIdx.x == 0) probe_start(probe);

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t b_addr = base, a_addr = base + args.b_bytes + wg * args.a_bytes;
  uint64_t da[kSteps], db[kSteps];
  uint32_t af[kSteps][4];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    db[s] = args.desc_b | (((b_addr + s * args.step_bytes) & 0x3FFFF) >> 4);
    if constexpr (kRegA) {
#pragma unroll
      for (int r = 0; r < 4; ++r) af[s][r] = args.a_frags[((wg * kSteps + s) * 4 + r) * 128 + t];
    } else {
      da[s] = args.desc_a | (((a_addr + s * args.step_bytes) & 0x3FFFF) >> 4);
    }
  }

  typename Op::Acc d[Op::kRegs];
#pragma unroll
  for (int i = 0; i < Op::kRegs; ++i) d[i] = 0;
  fence();  // orders the register writes above (accumulators, A fragments) before the first wgmma
  for (long long it = 0; it < args.iterations; ++it) {
#pragma unroll
    for (int j = 0; j < kMmasPerGroup; ++j) {
      if constexpr (kRegA) Op::run_rs(d, af[j % kSteps], db[j % kSteps]);
      else Op::run(d, da[j % kSteps], db[j % kSteps]);
    }
    commit();
    wait<1>();  // one group stays in flight while the next is issued
  }
  wait<0>();
  if (threadIdx.x == 0) probe_stop(probe, args.probe);

  typename Op::Acc* out = static_cast<typename Op::Acc*>(args.out);
  const long long slot = static_cast<long long>(blockIdx.x) * warpgroups + wg;
#pragma unroll
  for (int i = 0; i < Op::kRegs; ++i) out[(slot * Op::kRegs + i) * 128 + t] = d[i];
#else
  if (threadIdx.x == 0 && blockIdx.x == 0) *args.status = kStatusNotCompiled;
#endif
}

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
auto kernel_for(const Layout& l) {
  return l.reg_a ? wgmma_kernel<Op, true> : wgmma_kernel<Op, false>;
}

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
  CUDA_CHECK(cudaFuncSetAttribute(kernel_for<Op>(p.layout), cudaFuncAttributeMaxDynamicSharedMemorySize, p.smem));
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
  Args a{};
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
  kernel_for<Op>(p.layout)<<<p.grid, p.block, p.smem, s>>>(a);
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
  const void* kernel() const { return reinterpret_cast<const void*>(kernel_for<Op>(plan_.layout)); }
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
