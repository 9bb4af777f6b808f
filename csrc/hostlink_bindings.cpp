// Python binding of the host-link family (hostlink.hpp). Bindings only: the copies run with the GIL
// released (a telemetry thread in Python keeps sampling) and come back as plain dicts.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "hostlink.hpp"

namespace py = pybind11;

namespace roofline {
namespace {

py::dict hostlink_result_dict(const HostLinkResult& r) {
  py::dict d;
  d["direction"] = r.direction;
  d["bytes"] = r.bytes;
  d["warmup"] = r.warmup;
  d["seed"] = r.seed;
  bind::put_timing(d, r.timing);
  py::dict v;
  v["method"] = r.verification.method;
  v["checked_words"] = r.verification.checked;
  if (r.verification.method == "checksum") {
    v["expected"] = r.verification.expected;
    v["observed"] = r.verification.observed;
  } else {
    v["mismatches"] = r.verification.mismatches;
  }
  v["passed"] = r.verification.passed;  // true: a failed check throws, it never comes back as a result
  d["verification"] = v;
  return d;
}

}  // namespace

void bind_hostlink(py::module_& m) {
  m.def(
      "hostlink_run",
      [](int device, std::size_t bytes, int reps, int warmup, std::uint32_t seed, const std::string& fault) {
        const Fault f = parse_fault(Family::HostLink, fault);
        return bind::list_of(bind::released([&] { return run_hostlink(device, bytes, reps, warmup, seed, f); }),
                             hostlink_result_dict);
      },
      py::arg("device"), py::arg("bytes"), py::arg("reps") = 20, py::arg("warmup") = 3,
      py::arg("seed") = 12345u, py::arg("fault") = "none",
      "Time pinned host-to-device, then device-to-host cudaMemcpyAsync copies of `bytes` (a multiple "
      "of 16), one copy per CUDA-event pair, and verify every word that arrived. Returns "
      "[h2d dict, d2h dict]. fault='short' (both directions) or 'short_d2h' copies 15/16 of the buffer "
      "so tests can prove that verification raises.");
}

}  // namespace roofline
