// The wgmma family's instructions and kernel interface, shared by its kernel (tensor_wgmma.cu) and
// its host side (tensor_wgmma_host.cpp): the tile constants, one struct per instruction (the asm,
// which only the sm_90a pass compiles), the argument block and the launch wrappers tensor_wgmma.cu
// defines. The host side compiles with the host files, beside nvcc's per-architecture passes,
// instead of inside the CUDA unit where every pass would parse it again (issue 28).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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

// The kernel's argument block (tensor_wgmma.cu passes it as a __grid_constant__ parameter).
struct KernelArgs {
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

// The kernel for Op with A in registers (reg_a) or in shared memory, instantiated in tensor_wgmma.cu
// for every struct above, for cudaFuncSetAttribute and cudaFuncGetAttributes, and its launch on `s`
// (the caller checks it with CUDA_CHECK_LAUNCH).
template <class Op>
const void* wgmma_kernel_fn(bool reg_a);
template <class Op>
void launch_wgmma_kernel(bool reg_a, int grid, int block, int smem, cudaStream_t s, const KernelArgs& args);

}  // namespace ops

}  // namespace wgmma
}  // namespace compute
}  // namespace roofline
