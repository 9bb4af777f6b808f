// Python binding of nvml::health_info (nvml.hpp): the state that explains a slow or failing card.
// Host-only builds have it too: a check on a machine whose core cannot measure still reports why.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "nvml.hpp"

namespace py = pybind11;

namespace roofline {
namespace {

using bind::opt;

py::object processes(const std::optional<std::vector<nvml::HealthInfo::Process>>& ps) {
  if (!ps) return py::none();
  py::list out;
  for (const auto& p : *ps) {
    py::dict d;
    d["pid"] = p.pid;
    d["used_bytes"] = opt(p.used_bytes);
    out.append(d);
  }
  return out;
}

py::dict health_dict(const nvml::HealthInfo& h) {
  py::dict r;
  r["ecc_corrected_volatile"] = opt(h.ecc_corrected_volatile);
  r["ecc_uncorrected_volatile"] = opt(h.ecc_uncorrected_volatile);
  r["ecc_corrected_aggregate"] = opt(h.ecc_corrected_aggregate);
  r["ecc_uncorrected_aggregate"] = opt(h.ecc_uncorrected_aggregate);
  r["retired_pages_dbe"] = opt(h.retired_pages_dbe);
  r["retired_pages_sbe"] = opt(h.retired_pages_sbe);
  r["retired_pages_pending"] = opt(h.retired_pages_pending);
  r["remapped_rows_correctable"] = opt(h.remapped_rows_correctable);
  r["remapped_rows_uncorrectable"] = opt(h.remapped_rows_uncorrectable);
  r["remap_pending"] = opt(h.remap_pending);
  r["remap_failure"] = opt(h.remap_failure);
  r["pcie_gen"] = opt(h.pcie_gen);
  r["pcie_width"] = opt(h.pcie_width);
  r["pcie_max_gen"] = opt(h.pcie_max_gen);
  r["pcie_max_width"] = opt(h.pcie_max_width);
  r["pcie_gpu_max_gen"] = opt(h.pcie_gpu_max_gen);
  r["pcie_replay_counter"] = opt(h.pcie_replay_counter);
  r["c2c_enabled"] = opt(h.c2c_enabled);
  r["temperature_c"] = opt(h.temperature_c);
  r["temperature_slowdown_c"] = opt(h.temperature_slowdown_c);
  r["temperature_shutdown_c"] = opt(h.temperature_shutdown_c);
  r["temperature_gpu_max_c"] = opt(h.temperature_gpu_max_c);
  r["compute_processes"] = processes(h.compute_processes);
  r["utilization_gpu_pct"] = opt(h.utilization_gpu_pct);
  r["utilization_memory_pct"] = opt(h.utilization_memory_pct);
  return r;
}

}  // namespace

void bind_health(py::module_& m) {
  m.def("nvml_health", [](const std::string& bus_id) {
    return health_dict(nvml::health_info(nvml::handle_by_pci_bus_id(bus_id)));
  }, py::arg("pci_bus_id"),
  "ECC error counts, retired pages / remapped rows, PCIe link now and at most, temperature and its "
  "thresholds, the compute processes and the utilisation of one GPU (by PCI bus id); None where not "
  "reported. "
  "Raises NvmlError when NVML is unusable.");
}

}  // namespace roofline
