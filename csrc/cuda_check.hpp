// CUDA_CHECK / CUDA_CHECK_LAUNCH: turn a failing CUDA runtime call into roofline::CudaError.
// Separate from errors.hpp because it needs the CUDA headers, which host-only builds lack.
#pragma once

#include <cuda_runtime.h>

#include <sstream>

#include "errors.hpp"

namespace roofline {

[[noreturn]] inline void throw_cuda(cudaError_t err, const char* file, int line, const char* expr) {
  std::ostringstream s;
  s << "CUDA error " << cudaGetErrorName(err) << " (" << static_cast<int>(err)
    << "): " << cudaGetErrorString(err) << " at " << where(file, line, expr);
  throw CudaError(static_cast<int>(err), cudaGetErrorName(err), s.str());
}

}  // namespace roofline

#define CUDA_CHECK(expr)                                                 \
  do {                                                                   \
    cudaError_t roofline_err_ = (expr);                                  \
    if (roofline_err_ != cudaSuccess) {                                  \
      ::roofline::throw_cuda(roofline_err_, __FILE__, __LINE__, #expr);  \
    }                                                                    \
  } while (0)

// After every kernel launch: a bad configuration shows up only in cudaGetLastError.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
