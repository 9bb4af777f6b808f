// Python binding of the judge's GPU passes (judge_stats.hpp). Bindings only: the passes run with
// the GIL released and come back as plain dicts and ints.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "judge_stats.hpp"

namespace py = pybind11;

namespace roofline {

void bind_judge(py::module_& m) {
  m.def(
      "judge_compare_stats",
      [](std::uintptr_t a, std::uintptr_t b, std::size_t n, const std::string& dtype, double tol,
         std::uintptr_t stream, int device) {
        const CompareStats r = bind::released([&] { return compare_stats(a, b, n, dtype, tol, stream, device); });
        py::dict d;
        d["n"] = r.n;
        d["sa"] = r.sa; d["sb"] = r.sb; d["saa"] = r.saa; d["sbb"] = r.sbb; d["sab"] = r.sab; d["sdd"] = r.sdd;
        d["max_abs"] = r.max_abs;
        d["b_min"] = r.b_min;
        d["b_max"] = r.b_max;
        d["bad"] = r.bad;
        d["nonfinite"] = r.nonfinite;
        return d;
      },
      py::arg("a"), py::arg("b"), py::arg("n"), py::arg("dtype"), py::arg("tol"), py::arg("stream"),
      py::arg("device"),
      "The strict comparison's sums over n elements of two contiguous device arrays (a: reference, b: "
      "candidate) of dtype float32/float64/float16/bfloat16, in float64, on `stream` (a cudaStream_t as "
      "an int; waits for it). Elements where either is NaN/Inf are counted in 'nonfinite' and left out.");
  m.def(
      "judge_checksum",
      [](std::uintptr_t ptr, std::size_t bytes, std::uintptr_t stream, int device) {
        return bind::released([&] { return checksum(ptr, bytes, stream, device); });
      },
      py::arg("ptr"), py::arg("bytes"), py::arg("stream"), py::arg("device"),
      "A position-dependent 64-bit checksum of `bytes` bytes of device memory at `ptr`, on `stream`.");
}

}  // namespace roofline
