// Python bindings of the shared-memory family (smem.hpp). Bindings only: arguments become C++
// structs with the GIL held, the measurement runs with it released (the telemetry thread keeps
// sampling), and results come back as plain dicts.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.hpp"
#include "smem.hpp"

namespace py = pybind11;

namespace roofline {
namespace {

SmemConfig smem_config_from(const py::dict& d) {
  SmemConfig c;
  for (auto item : d) {
    const std::string key = py::str(item.first);
    if (key == "threads") c.threads = item.second.cast<int>();
    else if (key == "width") c.width = item.second.cast<int>();
    else if (key == "vectors") c.vectors = item.second.cast<int>();
    else if (key == "blocks_per_sm") c.blocks_per_sm = item.second.cast<int>();
    else throw py::value_error("unknown shared-memory configuration key '" + key +
                               "' (threads, width, vectors, blocks_per_sm)");
  }
  return c;
}

py::dict smem_result_dict(const SmemResult& r) {
  py::dict d;
  py::dict cfg;
  cfg["threads"] = r.config.threads;
  cfg["width"] = r.config.width;
  cfg["vectors"] = r.config.vectors;
  cfg["blocks_per_sm"] = r.config.blocks_per_sm;
  d["config"] = cfg;
  d["grid"] = r.grid;
  d["blocks_per_sm"] = r.blocks_per_sm;
  d["occupancy_blocks_per_sm"] = r.occupancy_blocks_per_sm;
  d["sm_count"] = r.sm_count;
  d["smem_bytes_per_block"] = r.smem_bytes_per_block;
  d["passes"] = r.passes;
  d["bytes_per_launch"] = r.bytes_per_launch;
  d["warmup"] = r.warmup;
  d["seed"] = r.seed;
  d["skipped"] = bind::skipped(r.skipped);
  bind::put_timing(d, r.timing);
  d["kernel_clock_mhz"] = r.kernel_clock_mhz;
  d["timed_end_s"] = r.timed_end_s;
  py::dict v;
  v["method"] = r.verification.method;  // "per-thread checksum", skipped or not
  v["checked_threads"] = r.verification.checked;
  // A failed check throws, so a result's check passed unless the configuration was skipped.
  v["passed"] = r.verification.passed;
  d["verification"] = v;
  return d;
}

}  // namespace

void bind_smem(py::module_& m) {
  m.def(
      "smem_run",
      [](int device, int reps, int warmup, double target_ms, long long passes, const py::object& configs,
         std::uint32_t seed, const std::string& fault) {
        const auto cfgs = bind::configs_from<SmemConfig>(configs, smem_config_from);
        const Fault f = parse_fault(Family::SharedMemory, fault);
        return bind::list_of(bind::released([&] { return run_smem(device, reps, warmup, target_ms, passes, cfgs, seed, f); }),
                             smem_result_dict);
      },
      py::arg("device"), py::arg("reps") = 20, py::arg("warmup") = 3, py::arg("target_ms") = 2.0,
      py::arg("passes") = 0, py::arg("configs") = py::none(), py::arg("seed") = 12345u, py::arg("fault") = "none",
      "Time shared-memory reads for every configuration dict (threads, width, vectors, blocks_per_sm): one "
      "wave of blocks, each reading its seeded buffer `passes` times (0: sized so a launch lasts about "
      "target_ms), every thread's sum verified. Per launch, the SM clock the kernel counted. "
      "fault='short' runs one pass fewer than the host expects, so tests can prove verification raises.");

  m.def("smem_capabilities", [] {
    py::dict d;
    d["threads"] = smem_threads();
    d["widths"] = smem_widths();
    d["vectors"] = smem_vectors();
    return d;
  }, "The shared-memory configuration values this build accepts.");
}

}  // namespace roofline
