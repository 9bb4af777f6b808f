// One launch each of read, write, copy (one-shot and persistent) and triad, twice, for Nsight Compute
// to count DRAM bytes and the cycles the DRAM data bus was busy (run.sh does it). The question it
// answers: does a copy move more than 2 x 4 GiB through DRAM (then a kernel could save traffic), or
// does it move exactly that with the bus idle part of the time (then the loss is the memory
// controller's read/write turnarounds, out of a kernel's reach)?
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("CUDA %s: %s\n", #x, cudaGetErrorString(e)); return 1;} } while (0)
__device__ __forceinline__ uint32_t mix32(uint32_t x) { x ^= x >> 16; x *= 0x85ebca6bu; x ^= x >> 13; x *= 0xc2b2ae35u; x ^= x >> 16; return x; }
__global__ void fill(uint32_t* p, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = __float_as_uint((float)(mix32((uint32_t)i ^ 0x1234567u) >> 8) * (1.0f / 8388608.0f) - 1.0f);
}
__device__ __forceinline__ uint4 ldn(const uint4* p) { uint4 v; asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)); return v; }
__device__ __forceinline__ void stcs(uint4* p, uint4 v) { asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory"); }
__global__ void k_read(const uint4* __restrict__ s, uint64_t n, uint32_t* out) {  // n: multiple of 8 x 1024
  uint32_t a = 0;
  const uint64_t chunk = 8ull * blockDim.x;
  const uint64_t base = blockIdx.x * chunk + threadIdx.x;
  uint4 v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = ldn(s + base + j * blockDim.x);
#pragma unroll
  for (int j = 0; j < 8; ++j) a += v[j].x + v[j].y + v[j].z + v[j].w;
  // One atomic per block (32768 in all), so the sum costs nothing next to the loads.
  __shared__ uint32_t warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = a;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t t = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) t += warp_sums[w];
    atomicAdd(out, t);
  }
}
// Independent reference for the read kernel's sum: a plain grid-stride loop over 32-bit words.
__global__ void k_reference_sum(const uint32_t* __restrict__ s, uint64_t n, uint32_t* out) {
  uint32_t a = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) a += s[i];
  atomicAdd(out, a);
}
__global__ void k_mismatches(const uint32_t* __restrict__ got, const uint32_t* __restrict__ b, const uint32_t* __restrict__ c,
                             uint64_t n, int kind, unsigned long long* bad) {
  // kind 0: got == b (copy); 1: got == fma(1.5, c, b) (triad); 2: got == the write kernel's pattern
  unsigned long long k = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x) {
    uint32_t want;
    if (kind == 0) want = b[i];
    else if (kind == 1) want = __float_as_uint(fmaf(1.5f, __uint_as_float(c[i]), __uint_as_float(b[i])));
    else {
      const uint64_t v = i / 4;
      const uint32_t w[4] = {(uint32_t)v * 0x9e3779b1u, (uint32_t)v + 1, (uint32_t)v ^ 77u, (uint32_t)(v >> 3) * 3u};
      want = w[i % 4];
    }
    k += got[i] != want;
  }
  if (k) atomicAdd(bad, k);
}
__global__ void k_write(uint4* d, uint64_t n) {
  const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (i < n) stcs(d + i, make_uint4((uint32_t)i * 0x9e3779b1u, (uint32_t)i + 1, (uint32_t)i ^ 77u, (uint32_t)(i >> 3) * 3u));
}
__global__ void k_copy(const uint4* __restrict__ s, uint4* __restrict__ d, uint64_t n) {
  const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (i < n) stcs(d + i, ldn(s + i));
}
__global__ void k_copy_pipe(const uint4* __restrict__ s, uint4* __restrict__ d, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    stcs(d + i, ldn(s + i));
}
__global__ void k_triad(const uint4* __restrict__ b, const uint4* __restrict__ c, uint4* __restrict__ a, uint64_t n) {
  const uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    uint4 bb = ldn(b + i), cc = ldn(c + i);
    const float4 x = reinterpret_cast<float4&>(bb), y = reinterpret_cast<float4&>(cc);
    float4 z = make_float4(fmaf(1.5f, y.x, x.x), fmaf(1.5f, y.y, x.y), fmaf(1.5f, y.z, x.z), fmaf(1.5f, y.w, x.w));
    stcs(a + i, reinterpret_cast<uint4&>(z));
  }
}
int main() {
  const uint64_t B = 4ull << 30, n = B / 16;
  char* pool;
  CK(cudaMalloc(&pool, 6 * B));  // s, c, and one destination per writing kernel
  uint32_t* sums;
  unsigned long long* bad;
  CK(cudaMalloc(&sums, 8));
  CK(cudaMalloc(&bad, 8));
  fill<<<132 * 8, 256>>>(reinterpret_cast<uint32_t*>(pool), 2 * B / 4);
  const uint4* s = reinterpret_cast<const uint4*>(pool);
  const uint4* c = reinterpret_cast<const uint4*>(pool + B);
  uint4* dw = reinterpret_cast<uint4*>(pool + 2 * B);
  uint4* dc = reinterpret_cast<uint4*>(pool + 3 * B);
  uint4* dp = reinterpret_cast<uint4*>(pool + 4 * B);
  uint4* dt = reinterpret_cast<uint4*>(pool + 5 * B);
  CK(cudaMemset(pool + 2 * B, 0xff, 4 * B));
  CK(cudaMemset(sums, 0, 8));
  for (int r = 0; r < 2; ++r) {  // ncu profiles the second round (--launch-skip 6: fill + round one)
    k_read<<<n / (8 * 1024), 1024>>>(s, n, sums);
    k_write<<<n / 256, 256>>>(dw, n);
    k_copy<<<n / 256, 256>>>(s, dc, n);
    k_copy_pipe<<<132 * 8, 256>>>(s, dp, n);
    k_triad<<<n / 1024, 1024>>>(s, c, dt, n);
  }
  k_reference_sum<<<132 * 16, 512>>>(reinterpret_cast<const uint32_t*>(s), B / 4, sums + 1);
  CK(cudaGetLastError());
  uint32_t h[2];
  CK(cudaMemcpy(h, sums, 8, cudaMemcpyDeviceToHost));
  int failed = 0;
  if (h[0] != 2u * h[1]) { std::printf("read: sum 0x%x != 2 x reference 0x%x\n", h[0], h[1]); failed = 1; }
  const char* names[] = {"write", "copy", "copy_persistent", "triad"};
  const uint4* outs[] = {dw, dc, dp, dt};
  const int kinds[] = {2, 0, 0, 1};
  for (int k = 0; k < 4; ++k) {
    CK(cudaMemset(bad, 0, 8));
    k_mismatches<<<132 * 16, 512>>>(reinterpret_cast<const uint32_t*>(outs[k]), reinterpret_cast<const uint32_t*>(s),
                                    reinterpret_cast<const uint32_t*>(c), B / 4, kinds[k], bad);
    unsigned long long m = 0;
    CK(cudaMemcpy(&m, bad, 8, cudaMemcpyDeviceToHost));
    if (m) { std::printf("%s: %llu words wrong\n", names[k], m); failed = 1; }
  }
  std::printf(failed ? "dram_counters: WRONG OUTPUT\n" : "dram_counters: every output verified\n");
  return failed;
}
