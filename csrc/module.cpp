// pybind11 bindings only: the measurement code lives in the family files, policy in Python.
// Every call that runs device work releases the GIL so Python threads (progress bars) keep going.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "errors.hpp"
#include "nvml.hpp"
#include "telemetry.hpp"

#if ROOFLINE_HAVE_CUDA
#include "device.hpp"
#endif

namespace py = pybind11;

namespace roofline {
namespace {

using bind::opt;

py::dict to_dict(const nvml::DeviceInfo& d) {
  py::dict r;
  r["nvml_index"] = d.index;
  r["name"] = d.name;
  r["uuid"] = d.uuid;
  r["pci_bus_id"] = d.pci_bus_id;
  r["cc_major"] = d.cc_major;
  r["cc_minor"] = d.cc_minor;
  r["architecture"] = opt(d.architecture);
  r["cuda_cores"] = opt(d.cuda_cores);
  r["memory_bus_width_bits"] = opt(d.memory_bus_width_bits);
  r["memory_total_bytes"] = opt(d.memory_total);
  r["memory_free_bytes"] = opt(d.memory_free);
  r["memory_used_bytes"] = opt(d.memory_used);
  r["max_sm_clock_mhz"] = opt(d.max_sm_clock_mhz);
  r["max_mem_clock_mhz"] = opt(d.max_mem_clock_mhz);
  r["max_graphics_clock_mhz"] = opt(d.max_graphics_clock_mhz);
  r["sm_clock_mhz"] = opt(d.sm_clock_mhz);
  r["mem_clock_mhz"] = opt(d.mem_clock_mhz);
  r["power_limit_mw"] = opt(d.power_limit_mw);
  r["enforced_power_limit_mw"] = opt(d.enforced_power_limit_mw);
  r["power_draw_mw"] = opt(d.power_draw_mw);
  r["temperature_c"] = opt(d.temperature_c);
  r["mig_current"] = opt(d.mig_current);
  r["mig_pending"] = opt(d.mig_pending);
  r["ecc_current"] = opt(d.ecc_current);
  r["ecc_pending"] = opt(d.ecc_pending);
  r["clock_event_reasons"] = opt(d.clock_event_reasons);
  r["clock_event_reason_names"] =
      d.clock_event_reasons ? py::cast(nvml::reason_names(*d.clock_event_reasons)) : py::none();
  r["compute_processes"] = opt(d.compute_processes);
  r["pcie_gen"] = opt(d.pcie_gen);
  r["pcie_width"] = opt(d.pcie_width);
  return r;
}

py::dict to_dict(const nvml::Sample& s) {
  py::dict r;
  r["t_s"] = s.t_s;
  r["sm_clock_mhz"] = opt(s.sm_clock_mhz);
  r["mem_clock_mhz"] = opt(s.mem_clock_mhz);
  r["power_w"] = s.power_mw ? py::cast(*s.power_mw / 1000.0) : py::none();
  r["temperature_c"] = opt(s.temperature_c);
  r["reasons"] = opt(s.reasons);
  return r;
}

}  // namespace

void bind_identity(py::module_& m) {
  m.def("build_info", [] {
    py::dict r;
    r["version"] = ROOFLINE_VERSION;
    r["cuda_compiled"] = bool(ROOFLINE_HAVE_CUDA);
#if ROOFLINE_HAVE_CUDA
    r["cuda_runtime_version"] = CUDART_VERSION;
#else
    r["cuda_runtime_version"] = py::none();
#endif
    return r;
  }, "How this core was built: version, whether CUDA is compiled in, the CUDA runtime version.");

  m.def("nvml_system", [] {
    nvml::SystemInfo s = nvml::system_info();
    py::dict r;
    r["driver_version"] = s.driver_version;
    r["cuda_driver_version"] = s.cuda_driver_version;
    r["device_count"] = s.device_count;
    return r;
  }, "Driver version, CUDA version the driver supports, and NVML's device count. Raises NvmlError.");

  m.def("nvml_devices", [] {
    py::list out;
    for (const auto& d : nvml::devices()) out.append(to_dict(d));
    return out;
  }, "Every GPU NVML sees (ignores CUDA_VISIBLE_DEVICES), as dicts. Raises NvmlError.");

  m.def("nvml_device_by_pci_bus_id", [](const std::string& bus_id) {
    return to_dict(nvml::device_info(nvml::handle_by_pci_bus_id(bus_id), 0));
  }, py::arg("pci_bus_id"), "NVML's view of one GPU, found by PCI bus id.");

  m.def("reason_names", &nvml::reason_names, py::arg("mask"),
        "Names of the clock-event (throttle) reason bits set in `mask`.");

#if ROOFLINE_HAVE_CUDA
  m.def("cuda_probe", [] {
    // Never throws: availability() turns the code into a reason (35 = no/too old driver, 100 = no
    // device, ...).
    py::dict r;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    r["code"] = static_cast<int>(e);
    r["name"] = cudaGetErrorName(e);
    r["message"] = cudaGetErrorString(e);
    r["count"] = e == cudaSuccess ? n : 0;
    r["runtime_version"] = CUDART_VERSION;
    r["driver_version"] = cuda_driver_version();
    if (e != cudaSuccess) (void)cudaGetLastError();  // clear the sticky-free error state
    return r;
  }, "CUDA runtime's view: error code/name/message of cudaGetDeviceCount, count, versions.");

  m.def("cuda_devices", [] {
    py::list out;
    int n = cuda_device_count();
    for (int i = 0; i < n; ++i) {
      CudaDeviceProps p = cuda_device_props(i);
      py::dict r;
      r["cuda_index"] = p.index;
      r["name"] = p.name;
      r["pci_bus_id"] = p.pci_bus_id;
      r["uuid"] = p.uuid;
      r["cc_major"] = p.cc_major;
      r["cc_minor"] = p.cc_minor;
      r["sm_count"] = p.sm_count;
      r["l2_bytes"] = p.l2_bytes;
      r["shared_mem_per_sm"] = p.shared_mem_per_sm;
      r["shared_mem_per_block_optin"] = p.shared_mem_per_block_optin;
      r["regs_per_sm"] = p.regs_per_sm;
      r["max_threads_per_sm"] = p.max_threads_per_sm;
      r["memory_total_bytes"] = p.memory_total;  // cudaDeviceProp::totalGlobalMem (no context)
      // NVML's device-wide free memory (None when NVML cannot tell), no longer cudaMemGetInfo:
      // that needed cudaSetDevice, which created a context on every listed GPU. It does not
      // subtract the context this process creates later; cuda_memory_info() does, for sizing.
      r["memory_free_bytes"] = opt(p.memory_free);
      r["memory_bus_width_bits"] = p.memory_bus_width_bits;
      out.append(r);
    }
    return out;
  }, "Every CUDA-visible device (honours CUDA_VISIBLE_DEVICES), as dicts. Creates no CUDA context: "
     "memory_free_bytes comes from NVML (None without it). Raises CudaError.");

  m.def("cuda_memory_info", [](int device) {
    CudaMemoryInfo mi;
    {
      py::gil_scoped_release release;
      mi = cuda_memory_info(device);
    }
    py::dict r;
    r["cuda_index"] = device;
    r["memory_free_bytes"] = mi.free;
    r["memory_total_bytes"] = mi.total;
    return r;
  }, py::arg("device"),
  "cudaMemGetInfo on one CUDA device: what this process can still allocate there. Creates the "
  "device's primary context (for sizing a measurement's buffers, not for listing). Raises CudaError.");
#endif
}

void bind_telemetry(py::module_& m) {
  py::class_<TelemetrySampler>(m, "TelemetrySampler",
                               "NVML sampler thread for one GPU (by PCI bus id).")
      .def(py::init<const std::string&, double>(), py::arg("pci_bus_id"), py::arg("interval_ms") = 25.0)
      .def("start", &TelemetrySampler::start)
      .def("stop", [](TelemetrySampler& s) {
        std::vector<nvml::Sample> samples;
        {
          py::gil_scoped_release release;
          samples = s.stop();
        }
        py::list out;
        for (const auto& x : samples) out.append(to_dict(x));
        return out;
      }, "Stops sampling and returns the samples as dicts (t_s, clocks, power_w, temperature_c, reasons).")
      .def_property_readonly("running", &TelemetrySampler::running);
}

}  // namespace roofline

PYBIND11_MODULE(_core, m) {
  m.doc() = "roofline_ext native core: GPU identity (NVML, CUDA), telemetry and timed kernels.";
  // Module-local translators: found first for exceptions thrown from this module, without walking
  // the process-global translator list that other pybind11 extensions (torch) also register into.
  auto core_error = py::register_local_exception<roofline::CoreError>(m, "CoreError", PyExc_RuntimeError);
  py::register_local_exception<roofline::CudaError>(m, "CudaError", core_error.ptr());
  py::register_local_exception<roofline::NvmlError>(m, "NvmlError", core_error.ptr());
  py::register_local_exception<roofline::VerificationError>(m, "VerificationError", core_error.ptr());
  m.attr("CUDA_COMPILED") = bool(ROOFLINE_HAVE_CUDA);
  roofline::bind_identity(m);
  roofline::bind_telemetry(m);
  roofline::bind_health(m);
  roofline::bind_judge_audit(m);
  roofline::bind_judge_fingerprint(m);
  roofline::bind_state_fingerprint(m);
#if ROOFLINE_HAVE_CUDA
  roofline::bind_bandwidth(m);
  roofline::bind_compute(m);
  roofline::bind_smem(m);
  roofline::bind_hostlink(m);
  roofline::bind_judge(m);
#endif
}
