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

SmemConfig smem_config_from(const py::handle& obj) {
  SmemConfig c;
  py::dict d = py::reinterpret_borrow<py::dict>(obj);
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

std::vector<SmemConfig> smem_configs_from(const py::object& configs) {
  std::vector<SmemConfig> out;
  if (configs.is_none()) {
    out.emplace_back();
  } else if (py::isinstance<py::dict>(configs)) {
    out.push_back(smem_config_from(configs));
  } else {
    for (auto c : configs) {
      if (!py::isinstance<py::dict>(c)) throw py::type_error("each configuration must be a dict");
      out.push_back(smem_config_from(c));
    }
  }
  return out;
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
  d["skipped"] = r.skipped.empty() ? py::object(py::none()) : py::object(py::str(r.skipped));
  d["reps"] = r.timing.ms.size();
  d["times_ms"] = r.timing.ms;
  d["median_ms"] = r.timing.median_ms;
  d["best_ms"] = r.timing.best_ms;
  d["mean_ms"] = r.timing.mean_ms;
  d["worst_ms"] = r.timing.worst_ms;
  d["cv"] = r.timing.cv;
  d["kernel_clock_mhz"] = r.kernel_clock_mhz;
  d["timed_end_s"] = r.timed_end_s;
  py::dict v;
  v["method"] = "per-thread checksum";
  v["checked_threads"] = r.checked_threads;
  v["passed"] = r.skipped.empty();  // a failed check throws; it never comes back as a result
  d["verification"] = v;
  return d;
}

}  // namespace

void bind_smem(py::module_& m) {
  m.def(
      "smem_run",
      [](int device, int reps, int warmup, double target_ms, long long passes, const py::object& configs,
         std::uint32_t seed, const std::string& fault) {
        const auto cfgs = smem_configs_from(configs);
        const SmemFault f = parse_smem_fault(fault);
        std::vector<SmemResult> rs;
        {
          py::gil_scoped_release release;
          rs = run_smem(device, reps, warmup, target_ms, passes, cfgs, seed, f);
        }
        py::list out;
        for (const auto& r : rs) out.append(smem_result_dict(r));
        return out;
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
