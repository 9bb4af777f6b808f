// The mma.sync family's instructions and kernel interface, shared by its kernel (tensor_mma.cu) and
// its host side (tensor_mma_host.cpp): one struct per instruction (shape, fragment registers, the
// arch that has it, the asm, which only device passes for that arch see) and the launch wrappers
// tensor_mma.cu defines. The host side compiles with the host files, beside nvcc's per-architecture
// passes, instead of inside the CUDA unit where every pass would parse it again (issue 28).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__)
#define ROOFLINE_ARCH __CUDA_ARCH__
#else
#define ROOFLINE_ARCH 0
#endif

namespace roofline {
namespace compute {
namespace mma {

// The instruction structs live in a named namespace: in an anonymous one, every arch pass that
// compiles a struct's asm out warns that its function is unreferenced.
namespace ops {

inline constexpr int kAcc = 8;     // independent accumulators per warp
inline constexpr int kUnroll = 4;  // MMAs per accumulator per loop trip
inline constexpr int kThreads = 256;

// One struct per instruction: shape, registers per fragment, the arch that has it, and the asm.
// The asm is also guarded by arch so that passes for older GPUs never see it.
struct F16_m16n8k16 {
  static constexpr int M = 16, N = 8, K = 16, kA = 4, kB = 2, kC = 4, kMinArch = 800;
  using Acc = float;
  static constexpr const char* kName = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
  __device__ __forceinline__ static void run(float (&c)[kC], const uint32_t (&a)[kA], const uint32_t (&b)[kB]) {
#if ROOFLINE_ARCH >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }
};

struct BF16_m16n8k16 {
  static constexpr int M = 16, N = 8, K = 16, kA = 4, kB = 2, kC = 4, kMinArch = 800;
  using Acc = float;
  static constexpr const char* kName = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
  __device__ __forceinline__ static void run(float (&c)[kC], const uint32_t (&a)[kA], const uint32_t (&b)[kB]) {
#if ROOFLINE_ARCH >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }
};

struct TF32_m16n8k8 {
  static constexpr int M = 16, N = 8, K = 8, kA = 4, kB = 2, kC = 4, kMinArch = 800;
  using Acc = float;
  static constexpr const char* kName = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";
  __device__ __forceinline__ static void run(float (&c)[kC], const uint32_t (&a)[kA], const uint32_t (&b)[kB]) {
#if ROOFLINE_ARCH >= 800
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }
};

struct E4M3_m16n8k32 {
  static constexpr int M = 16, N = 8, K = 32, kA = 4, kB = 2, kC = 4, kMinArch = 890;
  using Acc = float;
  static constexpr const char* kName = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32";
  __device__ __forceinline__ static void run(float (&c)[kC], const uint32_t (&a)[kA], const uint32_t (&b)[kB]) {
#if ROOFLINE_ARCH >= 890
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }
};

struct S8_m16n8k32 {
  static constexpr int M = 16, N = 8, K = 32, kA = 4, kB = 2, kC = 4, kMinArch = 800;
  using Acc = int;
  static constexpr const char* kName = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";
  __device__ __forceinline__ static void run(int (&c)[kC], const uint32_t (&a)[kA], const uint32_t (&b)[kB]) {
#if ROOFLINE_ARCH >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
  }
};

// Turing (sm_75) has only the smaller shapes.
struct F16_m16n8k8 {
  static constexpr int M = 16, N = 8, K = 8, kA = 2, kB = 1, kC = 4, kMinArch = 750;
  using Acc = float;
  static constexpr const char* kName = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32";
  __device__ __forceinline__ static void run(float (&c)[kC], const uint32_t (&a)[kA], const uint32_t (&b)[kB]) {
#if ROOFLINE_ARCH >= 750
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(b[0]));
#endif
  }
};

struct S8_m8n8k16 {
  static constexpr int M = 8, N = 8, K = 16, kA = 1, kB = 1, kC = 2, kMinArch = 750;
  using Acc = int;
  static constexpr const char* kName = "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32";
  __device__ __forceinline__ static void run(int (&c)[kC], const uint32_t (&a)[kA], const uint32_t (&b)[kB]) {
#if ROOFLINE_ARCH >= 750
    asm("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0,%1}, {%2}, {%3}, {%0,%1};"
        : "+r"(c[0]), "+r"(c[1])
        : "r"(a[0]), "r"(b[0]));
#endif
  }
};

}  // namespace ops

// The kernel for Op (instantiated in tensor_mma.cu for every struct above), for the occupancy query
// and cudaFuncGetAttributes, and its launch on `s` (the caller checks it with CUDA_CHECK_LAUNCH).
template <class Op>
const void* mma_kernel_fn();
template <class Op>
void launch_mma_kernel(int grid, int block, cudaStream_t s, const uint32_t* frags, long long iterations,
                       typename Op::Acc* out, int* status, unsigned long long* probe);

}  // namespace mma
}  // namespace compute
}  // namespace roofline
