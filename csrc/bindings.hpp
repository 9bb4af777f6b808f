// Each measurement family binds its own functions into the module; module.cpp only calls these.
// Declared here so module.cpp stays bindings-only and each family keeps its code in its own files.
// Below them, the few helpers every family's bindings share: configuration dicts in, the device
// call with the GIL released, timing statistics and "skipped" out.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace roofline {
void bind_identity(pybind11::module_& m);   // nvml.cpp / device.cpp identity   (module.cpp)
void bind_telemetry(pybind11::module_& m);  // telemetry.cpp sampler           (module.cpp)
void bind_health(pybind11::module_& m);     // health_bindings.cpp (NVML health, host-only too)
void bind_judge_audit(pybind11::module_& m);  // judge_audit.cpp (the judge's audit log, host-only too)
void bind_judge_fingerprint(pybind11::module_& m);  // judge_fingerprint.cpp (its namespace check, host-only too)
void bind_state_fingerprint(pybind11::module_& m);  // state_fingerprint.cpp (the timing worker's state check, host-only too)
#if ROOFLINE_HAVE_CUDA
void bind_bandwidth(pybind11::module_& m);  // bandwidth_bindings.cpp
void bind_compute(pybind11::module_& m);    // compute_bindings.cpp
void bind_smem(pybind11::module_& m);       // smem_bindings.cpp
void bind_hostlink(pybind11::module_& m);   // hostlink_bindings.cpp
void bind_judge(pybind11::module_& m);      // judge_bindings.cpp
#endif

namespace bind {

// Runs `f()` with the GIL released and returns its result: device work takes seconds, and Python
// threads (the telemetry sampler, progress bars) must keep running meanwhile. `f` must not touch
// Python objects.
template <typename F>
auto released(F&& f) {
  pybind11::gil_scoped_release release;
  return std::forward<F>(f)();
}

// None -> one default configuration; a dict -> that one; an iterable of dicts -> each of them.
// `parse(dict)` turns one dict into the family's configuration struct (and rejects unknown keys).
template <typename Config, typename Parse>
std::vector<Config> configs_from(const pybind11::object& configs, Parse&& parse) {
  namespace py = pybind11;
  std::vector<Config> out;
  if (configs.is_none()) {
    out.emplace_back();
  } else if (py::isinstance<py::dict>(configs)) {
    out.push_back(parse(py::reinterpret_borrow<py::dict>(configs)));
  } else {
    for (auto c : configs) {
      if (!py::isinstance<py::dict>(c)) throw py::type_error("each configuration must be a dict");
      out.push_back(parse(py::reinterpret_borrow<py::dict>(c)));
    }
  }
  return out;
}

// The statistics of timed repetitions (timing.hpp's TimingStats), under the keys every result
// dict uses, the per-repetition list as "times_ms" in every family.
template <typename Timing>
void put_timing(pybind11::dict& d, const Timing& t) {
  d["reps"] = static_cast<int>(t.ms.size());
  d["times_ms"] = t.ms;
  d["median_ms"] = t.median_ms;
  d["best_ms"] = t.best_ms;
  d["mean_ms"] = t.mean_ms;
  d["worst_ms"] = t.worst_ms;
  d["cv"] = t.cv;
}

// An optional NVML reading: the value, or None where the GPU or driver does not report it.
template <typename T>
pybind11::object opt(const std::optional<T>& v) {
  return v ? pybind11::cast(*v) : pybind11::object(pybind11::none());
}

// "skipped": the reason a configuration could not run here, or None when it ran.
inline pybind11::object skipped(const std::string& reason) {
  return reason.empty() ? pybind11::object(pybind11::none()) : pybind11::object(pybind11::str(reason));
}

// One dict per result, in order.
template <typename Result, typename ToDict>
pybind11::list list_of(const std::vector<Result>& rs, ToDict&& to_dict) {
  pybind11::list out;
  for (const auto& r : rs) out.append(to_dict(r));
  return out;
}

}  // namespace bind
}  // namespace roofline
