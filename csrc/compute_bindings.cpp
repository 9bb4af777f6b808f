// pybind11 bindings of the compute-throughput families (simt.cu, tensor_mma.cu, tensor_wgmma.cu).
// Plain dicts out, the GIL released around every device call; which result is "the" roof, and
// its fractions of the datasheet and clock-derived peaks, is decided in python/roofline_ext/compute.py.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "compute.hpp"

namespace py = pybind11;

namespace roofline {
namespace {

using namespace compute;

py::dict to_dict(const DeviceFacts& f) {
  py::dict d;
  d["device"] = f.device;
  d["name"] = f.name;
  d["cc_major"] = f.cc_major;
  d["cc_minor"] = f.cc_minor;
  d["sm_count"] = f.sm_count;
  d["max_sm_clock_mhz"] = f.clock_khz ? py::cast(f.clock_khz / 1000.0) : py::none();
  d["shared_mem_per_block_optin"] = f.smem_per_block_optin;
  return d;
}

// The compute family's keys of verification.hpp's struct (its method, "host reference", is implied).
py::dict to_dict(const Verification& v) {
  py::dict d;
  d["passed"] = v.passed;
  d["max_error"] = v.max_error;
  d["tolerance"] = v.tolerance;
  d["checked"] = v.checked;
  d["mismatches"] = v.mismatches;
  d["iterations"] = v.iterations;
  d["detail"] = v.detail;
  return d;
}

py::dict to_dict(const Measurement& m) {
  py::dict d;
  d["precision"] = name(m.precision);
  d["path"] = name(m.path);
  d["unit"] = unit(m.precision);
  d["instruction"] = m.instruction;
  d["grid"] = m.grid;
  d["block"] = m.block;
  d["smem_bytes"] = m.smem_bytes;
  d["regs_per_thread"] = m.regs_per_thread;
  d["iterations"] = m.iterations;
  py::dict cfg;
  for (const auto& kv : m.config) cfg[py::str(kv.first)] = kv.second;
  d["config"] = cfg;
  d["flop_per_launch"] = m.flop_per_launch;
  bind::put_timing(d, m.timing);
  d["tflops_median"] = m.tflops_median;
  d["tflops_best"] = m.tflops_best;
  d["kernel_clock_mhz"] = m.kernel_clock_mhz > 0 ? py::cast(m.kernel_clock_mhz) : py::none();
  d["verification"] = to_dict(m.verification);
  d["device"] = to_dict(m.facts);
  return d;
}

KernelConfig make_config(long long iterations, double target_ms, int threads_per_block, int blocks_per_sm,
                         int warpgroups, int swizzle, int a_from_registers) {
  KernelConfig c;
  c.iterations = iterations;
  c.target_ms = target_ms;
  c.threads_per_block = threads_per_block;
  c.blocks_per_sm = blocks_per_sm;
  c.warpgroups = warpgroups;
  c.swizzle = swizzle;
  c.a_from_registers = a_from_registers;
  return c;
}

}  // namespace

void bind_compute(py::module_& m) {
  m.def("compute_device", [](int device) {
    const DeviceFacts f = bind::released([&] { return device_facts(device); });
    return to_dict(f);
  }, py::arg("device"),
  "Facts the compute kernels are sized from: name, compute capability, SMs, max SM clock (MHz or None).");

  m.def("compute_paths", [](int device) {
    const DeviceFacts f = bind::released([&] { return device_facts(device); });
    py::dict out;
    for (Precision p : all_precisions()) {
      py::dict paths;
      for (Path path : all_paths()) {
        Support s = support(f, p, path);
        py::dict e;
        e["supported"] = s.supported;
        e["reason"] = s.supported ? py::none() : py::cast(s.reason);
        paths[name(path)] = e;
      }
      out[name(p)] = paths;
    }
    return out;
  }, py::arg("device"),
  "{precision: {path: {'supported': bool, 'reason': str | None}}} for every precision (fp32, fp64, tf32, "
  "fp16, bf16, fp8, int8) and path (simt, mma.sync, wgmma) on this GPU and build.");

  m.def("compute_verify",
        [](int device, const std::string& precision, const std::string& path, bool corrupt, long long iterations,
           int threads_per_block, int blocks_per_sm, int warpgroups, int swizzle, int a_from_registers,
           bool swap_descriptor_strides) {
          const Precision p = parse_precision(precision);
          const Path pa = parse_path(path);
          KernelConfig c = make_config(iterations, 1.0, threads_per_block, blocks_per_sm, warpgroups, swizzle,
                                       a_from_registers);
          c.swap_descriptor_strides = swap_descriptor_strides;
          const Fault f = corrupt ? Fault::Corrupt : Fault::None;
          return to_dict(bind::released([&] { return verify(device_facts(device), p, pa, c, f); }));
        },
        py::arg("device"), py::arg("precision"), py::arg("path"), py::arg("corrupt") = false,
        py::arg("iterations") = 0, py::arg("threads_per_block") = 0, py::arg("blocks_per_sm") = 0,
        py::arg("warpgroups") = 0, py::arg("swizzle") = -1, py::arg("a_from_registers") = -1,
        py::arg("swap_descriptor_strides") = false,
        "Runs the timed kernel of (precision, path) on a known input (1-3 loop trips) and compares every "
        "output with an exact host reference. Returns {'passed', 'max_error', 'tolerance', 'checked', "
        "'mismatches', 'iterations', 'detail'}; never raises for a mismatch. corrupt=True changes one "
        "operand after the reference is computed, so the comparison must fail (a test of the test). "
        "Raises CoreError for an unsupported pair.");

  m.def("compute_run",
        [](int device, const std::string& precision, const std::string& path, int reps, int warmup,
           double target_ms, long long iterations, int threads_per_block, int blocks_per_sm, int warpgroups,
           int swizzle, int a_from_registers) {
          const Precision p = parse_precision(precision);
          const Path pa = parse_path(path);
          const KernelConfig c = make_config(iterations, target_ms, threads_per_block, blocks_per_sm, warpgroups,
                                             swizzle, a_from_registers);
          return to_dict(bind::released([&] { return measure(device_facts(device), p, pa, c, warmup, reps); }));
        },
        py::arg("device"), py::arg("precision"), py::arg("path"), py::arg("reps") = 20, py::arg("warmup") = 3,
        py::arg("target_ms") = 2.0, py::arg("iterations") = 0, py::arg("threads_per_block") = 0,
        py::arg("blocks_per_sm") = 0, py::arg("warpgroups") = 0, py::arg("swizzle") = -1,
        py::arg("a_from_registers") = -1,
        "Verifies, then times the kernel of (precision, path): `warmup` untimed and `reps` timed launches "
        "of about target_ms each (or `iterations` loop trips). Returns a dict: instruction, grid/block/"
        "registers, config, flop_per_launch, per-rep ms, median/best/cv, tflops_median/best (INT8: TOP/s), "
        "kernel_clock_mhz (measured in the kernel), verification, device. Raises VerificationError when "
        "the kernel computes wrong results, CoreError when the pair is unsupported.");
}

}  // namespace roofline
