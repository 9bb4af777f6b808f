// Python bindings of the bandwidth family (bandwidth.hpp). Bindings only: arguments become C++
// structs with the GIL held, the measurement runs with the GIL released (it takes seconds, and a
// telemetry thread in Python must keep sampling meanwhile), and results come back as plain dicts.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bandwidth.hpp"
#include "bindings.hpp"
#include "host_clock.hpp"

namespace py = pybind11;

namespace roofline {
namespace {

BwConfig config_from(const py::dict& d) {
  BwConfig c;
  for (auto item : d) {
    const std::string key = py::str(item.first);
    if (key == "threads") c.threads = item.second.cast<int>();
    else if (key == "unroll") c.unroll = item.second.cast<int>();
    else if (key == "blocks_per_sm") c.blocks_per_sm = item.second.cast<int>();
    else if (key == "load") c.load = item.second.cast<std::string>();
    else if (key == "store") c.store = item.second.cast<std::string>();
    else if (key == "bulk_bytes") c.bulk_bytes = item.second.cast<int>();
    else throw py::value_error("unknown bandwidth configuration key '" + key +
                               "' (threads, unroll, blocks_per_sm, load, store, bulk_bytes)");
  }
  return c;
}

std::vector<BwConfig> configs_from(const py::object& configs) {
  return bind::configs_from<BwConfig>(configs, config_from);
}

py::dict config_dict(const BwConfig& c) {
  py::dict d;
  d["threads"] = c.threads;
  d["unroll"] = c.unroll;
  d["blocks_per_sm"] = c.blocks_per_sm;
  d["load"] = c.load;
  d["store"] = c.store;
  d["bulk_bytes"] = c.bulk_bytes;
  return d;
}

py::dict result_dict(const BwResult& r) {
  py::dict d;
  d["pattern"] = r.pattern;
  d["buffer_bytes"] = r.buffer_bytes;
  d["buffers"] = r.buffers;
  d["bytes_per_launch"] = r.bytes_per_launch;
  d["read_bytes_per_launch"] = r.read_bytes_per_launch;
  d["write_bytes_per_launch"] = r.write_bytes_per_launch;
  d["read_parts"] = r.read_parts;
  d["write_parts"] = r.write_parts;
  d["passes"] = r.passes;
  py::dict cfg = config_dict(r.config);
  cfg["grid"] = r.grid;
  cfg["occupancy_blocks_per_sm"] = r.occupancy_blocks_per_sm;
  cfg["sm_count"] = r.sm_count;
  d["config"] = cfg;
  d["warmup"] = r.warmup;
  d["seed"] = r.seed;
  d["skipped"] = bind::skipped(r.skipped);
  bind::put_timing(d, r.timing);
  d["timed_end_s"] = r.timed_end_s;
  py::dict v;
  v["method"] = r.verification.method;
  v["checked_words"] = r.verification.checked;
  if (r.verification.method.find("checksum") != std::string::npos) {
    v["expected"] = r.verification.expected;
    v["observed"] = r.verification.observed;
  }
  // A failed check throws, so a result's check passed unless the configuration was skipped.
  v["passed"] = r.verification.passed;
  d["verification"] = v;
  return d;
}

py::list results_list(const std::vector<BwResult>& rs) { return bind::list_of(rs, result_dict); }

}  // namespace

void bind_bandwidth(py::module_& m) {
  m.def(
      "bandwidth_run",
      [](int device, const std::string& pattern, std::size_t buffer_bytes, int reps, int warmup,
         const py::object& configs, std::uint32_t seed, const std::string& fault) {
        const auto cfgs = configs_from(configs);
        const Fault f = parse_fault(Family::Bandwidth, fault);
        return results_list(bind::released([&] { return run_bandwidth(device, pattern, buffer_bytes, reps, warmup, cfgs, seed, f); }));
      },
      py::arg("device"), py::arg("pattern"), py::arg("buffer_bytes"), py::arg("reps") = 30,
      py::arg("warmup") = 5, py::arg("configs") = py::none(), py::arg("seed") = 12345u,
      py::arg("fault") = "none",
      "Time a streaming pattern ('read', 'write', 'copy', 'triad') over buffers of buffer_bytes each "
      "for every configuration dict in `configs` (one allocation, filled once with seeded data), "
      "verifying each. Returns one dict per configuration; a configuration that cannot run on this "
      "device has 'skipped' set to the reason. fault='short' makes the kernel skip 1/16 of the buffer "
      "so tests can prove verification raises.");

  m.def(
      "bandwidth_l2_read",
      [](int device, std::size_t working_set_bytes, std::size_t bytes_per_launch, int reps, int warmup,
         const py::object& configs, std::uint32_t seed, const std::string& fault, bool shared_starts) {
        const auto cfgs = configs.is_none() ? std::vector<BwConfig>{l2_default_config()} : configs_from(configs);
        const Fault f = parse_fault(Family::Bandwidth, fault);
        return results_list(bind::released([&] {
          return run_l2_read(device, working_set_bytes, bytes_per_launch, reps, warmup, cfgs, seed, f, shared_starts);
        }));
      },
      py::arg("device"), py::arg("working_set_bytes"), py::arg("bytes_per_launch") = std::size_t(2) << 30,
      py::arg("reps") = 30, py::arg("warmup") = 5, py::arg("configs") = py::none(), py::arg("seed") = 12345u,
      py::arg("fault") = "none", py::arg("shared_starts") = false,
      "Time reads of a working set meant to fit in L2, repeated inside the kernel so one launch moves "
      "about bytes_per_launch; the working set must be a whole number of threads*unroll*16-byte chunks. "
      "Every variant loads with ld.global.cg (never cached in L1); a configuration's 'load' names its "
      "access order: 'cg' (grid-stride), 'cg_spread' (a contiguous stretch per block), 'cg_pipe' "
      "(grid-stride, the next chunk's loads in flight while the current one is folded). No configs: "
      "bandwidth_capabilities()['l2_default_config']. A persistent 'cg_spread' takes the passes nearest "
      "the target that share no factor with its grid, so no two blocks read in step (each row's "
      "'passes' says how many); shared_starts=True keeps the nearest passes, to measure shared reads.");

  m.def(
      "bandwidth_mix",
      [](int device, int read_parts, int write_parts, std::size_t buffer_bytes, int reps, int warmup,
         const py::object& configs, std::uint32_t seed, const std::string& fault) {
        const auto cfgs = configs_from(configs);
        const Fault f = parse_fault(Family::Bandwidth, fault);
        return results_list(bind::released([&] { return run_mix(device, read_parts, write_parts, buffer_bytes, reps, warmup, cfgs, seed, f); }));
      },
      py::arg("device"), py::arg("read_parts"), py::arg("write_parts"), py::arg("buffer_bytes"),
      py::arg("reps") = 30, py::arg("warmup") = 5, py::arg("configs") = py::none(), py::arg("seed") = 12345u,
      py::arg("fault") = "none",
      "Time a read:write mix (read_parts:write_parts, one of bandwidth_capabilities()['mix_ratios']): "
      "a source of read_parts units folded into a checksum and a destination of write_parts units "
      "written, the larger about buffer_bytes; every word read is checksummed and the stores are "
      "spot-checked. One dict per configuration, like bandwidth_run.");

  m.def("steady_clock_s", &steady_clock_s,
        "Seconds on the host's steady clock, the clock results' 'timed_end_s' and the telemetry "
        "sampler's start are read from: places timed repetitions on the telemetry timeline.");

  m.def("bandwidth_capabilities", [] {
    py::dict d;
    d["patterns"] = bandwidth_patterns();
    d["unrolls"] = bandwidth_unrolls();
    py::dict loads;
    for (const auto& p : bandwidth_patterns()) loads[py::str(p)] = bandwidth_load_flavours(p);
    loads["l2_read"] = bandwidth_load_flavours("l2_read");
    loads["mix"] = bandwidth_load_flavours("mix");
    d["loads"] = loads;
    d["stores"] = bandwidth_store_flavours();
    d["mix_ratios"] = bandwidth_mix_ratios();
    d["mix_unrolls"] = bandwidth_unrolls("mix");
    d["default_config"] = config_dict(BwConfig{});
    d["l2_default_config"] = config_dict(l2_default_config());
    return d;
  }, "The configuration values this build accepts.");
}

}  // namespace roofline
