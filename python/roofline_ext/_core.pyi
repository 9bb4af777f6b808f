# Hand-written stub of the native core, roofline_ext._core (csrc/module.cpp,
# csrc/bandwidth_bindings.cpp, csrc/compute_bindings.cpp, csrc/smem_bindings.cpp). Keep it in step with the bindings:
# argument names and defaults are the py::arg ones; every dict is a plain dict built in C++.
#
# The functions under "CUDA part" exist only when the core was compiled with CUDA
# (CUDA_COMPILED is True); a host-only build (ROOFLINE_ENABLE_CUDA=OFF, or AUTO without nvcc)
# lacks them, so callers check CUDA_COMPILED or hasattr() first.
from collections.abc import Iterable
from typing import Any

# True when the CUDA part (cuda_*, bandwidth_*, compute_*) is compiled in.
CUDA_COMPILED: bool

# Exceptions: registered module-locally, so they are raised only for errors thrown by this module.
# Base of every error the core raises on purpose.
class CoreError(RuntimeError): ...

# A CUDA runtime call failed; the message names the call, file:line and the CUDA error.
class CudaError(CoreError): ...

# An NVML call failed, or libnvidia-ml.so.1 could not be loaded or initialised.
class NvmlError(CoreError): ...

# A kernel ran but produced wrong results: its measurement must not be reported.
class VerificationError(CoreError): ...

# Identity (always present) ------------------------------------------------------------------

# {'version': str, 'cuda_compiled': bool, 'cuda_runtime_version': int | None}.
def build_info() -> dict[str, Any]: ...

# {'driver_version': str, 'cuda_driver_version': int, 'device_count': int}. Raises NvmlError.
def nvml_system() -> dict[str, Any]: ...

# One dict per GPU NVML sees (ignores CUDA_VISIBLE_DEVICES). Raises NvmlError.
#
# Keys: nvml_index, name, uuid, pci_bus_id, cc_major, cc_minor (always set); architecture,
# cuda_cores, memory_bus_width_bits, memory_total_bytes, memory_free_bytes, memory_used_bytes,
# max_sm_clock_mhz, max_mem_clock_mhz, max_graphics_clock_mhz, sm_clock_mhz, mem_clock_mhz,
# power_limit_mw, enforced_power_limit_mw, power_draw_mw, temperature_c, mig_current,
# mig_pending, ecc_current, ecc_pending, clock_event_reasons, clock_event_reason_names,
# compute_processes, pcie_gen, pcie_width (None where the device does not report them).
def nvml_devices() -> list[dict[str, Any]]: ...

# NVML's view of one GPU, same keys as nvml_devices() (nvml_index is 0). Raises NvmlError.
def nvml_device_by_pci_bus_id(pci_bus_id: str) -> dict[str, Any]: ...

# Names of the clock-event (throttle) reason bits set in mask ('unknown_0x...' for others).
def reason_names(mask: int) -> list[str]: ...

# NVML health of one GPU by PCI bus id (always present; csrc/health_bindings.cpp). Keys (None where
# not reported): ecc_{corrected,uncorrected}_{volatile,aggregate}, retired_pages_dbe,
# retired_pages_sbe, retired_pages_pending, remapped_rows_correctable, remapped_rows_uncorrectable,
# remap_pending, remap_failure, pcie_gen, pcie_width, pcie_max_gen, pcie_max_width,
# pcie_gpu_max_gen, pcie_replay_counter, c2c_enabled, temperature_c, temperature_slowdown_c,
# temperature_shutdown_c, temperature_gpu_max_c, compute_processes ([{'pid', 'used_bytes'}]).
# Raises NvmlError.
def nvml_health(pci_bus_id: str) -> dict[str, Any]: ...

# Telemetry (always present) -----------------------------------------------------------------

# NVML sampler thread for one GPU, found by PCI bus id. Raises NvmlError when NVML cannot serve it.
class TelemetrySampler:
    def __init__(self, pci_bus_id: str, interval_ms: float = 25.0) -> None: ...
    # Starts sampling. Raises CoreError if already running.
    def start(self) -> None: ...
    # Stops and returns the samples: {'t_s', 'sm_clock_mhz', 'mem_clock_mhz', 'power_w',
    # 'temperature_c', 'reasons'}. Raises CoreError if not running.
    def stop(self) -> list[dict[str, Any]]: ...
    # Whether the sampler thread is running.
    @property
    def running(self) -> bool: ...

# CUDA part (only when CUDA_COMPILED) ------------------------------------------------------

# Never raises: {'code': int, 'name': str, 'message': str, 'count': int,
# 'runtime_version': int, 'driver_version': int} from cudaGetDeviceCount.
def cuda_probe() -> dict[str, Any]: ...

# One dict per CUDA-visible device; creates no CUDA context. Raises CudaError.
#
# Keys: cuda_index, name, pci_bus_id, uuid, cc_major, cc_minor, sm_count, l2_bytes,
# shared_mem_per_sm, shared_mem_per_block_optin, regs_per_sm, max_threads_per_sm,
# memory_total_bytes (CUDA), memory_free_bytes (NVML; None when NVML cannot tell),
# memory_bus_width_bits.
def cuda_devices() -> list[dict[str, Any]]: ...

# cudaMemGetInfo on one device (creates its primary context): {'cuda_index',
# 'memory_free_bytes', 'memory_total_bytes'}. Raises CudaError.
def cuda_memory_info(device: int) -> dict[str, Any]: ...

# Times pattern ('read', 'write', 'copy', 'triad') once per configuration dict (keys threads,
# unroll, blocks_per_sm, load, store, bulk_bytes). One result dict per configuration:
# pattern, buffer_bytes, buffers, bytes_per_launch, read_bytes_per_launch, write_bytes_per_launch,
# read_parts, write_parts, passes, config (+ grid, occupancy_blocks_per_sm, sm_count), warmup,
# seed, skipped (str | None), reps, times_ms, median_ms, best_ms, mean_ms, worst_ms, cv,
# timed_end_s (steady_clock_s() after the timed loop), verification {method, checked_words,
# passed, and expected/observed for checksums}.
# fault (every measuring family, csrc/verification.hpp): a name the family accepts, here "none" |
# "short" ("" is "none"); any other raises ValueError naming the family and the names it accepts.
def bandwidth_run(
    device: int,
    pattern: str,
    buffer_bytes: int,
    reps: int = 30,
    warmup: int = 5,
    configs: dict[str, Any] | Iterable[dict[str, Any]] | None = None,
    seed: int = 12345,
    fault: str = "none",
) -> list[dict[str, Any]]: ...

# Times reads of an L2-sized working set, about bytes_per_launch per launch.
def bandwidth_l2_read(
    device: int,
    working_set_bytes: int,
    bytes_per_launch: int = 2147483648,
    reps: int = 30,
    warmup: int = 5,
    configs: dict[str, Any] | Iterable[dict[str, Any]] | None = None,
    seed: int = 12345,
    fault: str = "none",
    shared_starts: bool = False,
) -> list[dict[str, Any]]: ...

# Times a read:write mix (read_parts:write_parts, one of capabilities' 'mix_ratios'): a source of
# read_parts units checksummed and a destination of write_parts units spot-checked, the larger
# about buffer_bytes. Result dicts as bandwidth_run's (pattern 'mix', method 'checksum+spot-check').
def bandwidth_mix(
    device: int,
    read_parts: int,
    write_parts: int,
    buffer_bytes: int,
    reps: int = 30,
    warmup: int = 5,
    configs: dict[str, Any] | Iterable[dict[str, Any]] | None = None,
    seed: int = 12345,
    fault: str = "none",
) -> list[dict[str, Any]]: ...

# Seconds on the host's steady clock: the clock of results' 'timed_end_s' and of the telemetry
# sampler's start (CLOCK_MONOTONIC on Linux, as Python's time.monotonic()).
def steady_clock_s() -> float: ...

# {'patterns', 'unrolls', 'loads' (per pattern, 'l2_read' and 'mix'), 'stores', 'mix_ratios'
# ([[R, W], ...]), 'mix_unrolls', 'default_config', 'l2_default_config'}: the values this build accepts.
def bandwidth_capabilities() -> dict[str, Any]: ...

# Times shared-memory reads once per configuration dict (keys threads, width, vectors,
# blocks_per_sm): one wave of blocks, each reading its seeded buffer `passes` times (0: sized to
# about target_ms per launch), every thread's sum verified. One dict per configuration: config,
# grid, blocks_per_sm, occupancy_blocks_per_sm, sm_count, smem_bytes_per_block, passes,
# bytes_per_launch, warmup, seed, skipped, reps, times_ms, median_ms, best_ms, mean_ms, worst_ms,
# cv, kernel_clock_mhz (per timed launch), timed_end_s, verification {method, checked_threads,
# passed}. fault: "none" | "short". Raises VerificationError on a wrong sum.
def smem_run(
    device: int,
    reps: int = 20,
    warmup: int = 3,
    target_ms: float = 2.0,
    passes: int = 0,
    configs: dict[str, Any] | Iterable[dict[str, Any]] | None = None,
    seed: int = 12345,
    fault: str = "none",
) -> list[dict[str, Any]]: ...

# {'threads', 'widths', 'vectors'}: the shared-memory configuration values this build accepts.
def smem_capabilities() -> dict[str, Any]: ...

# {'device', 'name', 'cc_major', 'cc_minor', 'sm_count', 'max_sm_clock_mhz' (float | None),
# 'shared_mem_per_block_optin'}.
def compute_device(device: int) -> dict[str, Any]: ...

# {precision: {path: {'supported': bool, 'reason': str | None}}}.
def compute_paths(device: int) -> dict[str, dict[str, dict[str, Any]]]: ...

# {'passed', 'max_error', 'tolerance', 'checked', 'mismatches', 'iterations', 'detail'};
# never raises for a mismatch. Raises CoreError for an unsupported pair. corrupt=True is the
# compute family's fault ("corrupt" in csrc/verification.hpp): an operand changes after the reference.
def compute_verify(
    device: int,
    precision: str,
    path: str,
    corrupt: bool = False,
    iterations: int = 0,
    threads_per_block: int = 0,
    blocks_per_sm: int = 0,
    warpgroups: int = 0,
    swizzle: int = -1,
    a_from_registers: int = -1,
    swap_descriptor_strides: bool = False,
) -> dict[str, Any]: ...

# Verifies, then times (precision, path). Raises VerificationError on wrong results,
# CoreError for an unsupported pair. Per-launch times under times_ms, as every family's.
def compute_run(
    device: int,
    precision: str,
    path: str,
    reps: int = 20,
    warmup: int = 3,
    target_ms: float = 2.0,
    iterations: int = 0,
    threads_per_block: int = 0,
    blocks_per_sm: int = 0,
    warpgroups: int = 0,
    swizzle: int = -1,
    a_from_registers: int = -1,
) -> dict[str, Any]: ...

# Pinned host->device then device->host cudaMemcpyAsync copies of `bytes` (a multiple of 16, >= 256),
# one per CUDA-event pair, every word verified (h2d: device checksum; d2h: host comparison). Returns
# [h2d, d2h] dicts: direction, bytes, warmup, seed, reps, times_ms, median_ms, best_ms, mean_ms,
# worst_ms, cv, verification {method, checked_words, expected/observed | mismatches, passed}.
# fault: "none" | "short" | "short_d2h". Raises VerificationError, CudaError.
def hostlink_run(
    device: int,
    bytes: int,
    reps: int = 20,
    warmup: int = 3,
    seed: int = 12345,
    fault: str = "none",
) -> list[dict[str, Any]]: ...

# --- the judge's GPU passes (judge_stats.cu; CUDA builds only) ---
# The strict comparison's float64 sums over n elements of two contiguous device arrays (a the
# reference, b the candidate; dtype float32/float64/float16/bfloat16) on `stream` (a cudaStream_t
# as an int): n, sa, sb, saa, sbb, sab, sdd, max_abs, b_min, b_max, bad, nonfinite.
def judge_compare_stats(a: int, b: int, n: int, dtype: str, tol: float, stream: int, device: int) -> dict[str, Any]: ...
# A position-dependent 64-bit checksum of `bytes` bytes of device memory.
def judge_checksum(ptr: int, bytes: int, stream: int, device: int) -> int: ...

# --- the judge's audit log (judge_audit.cpp; every build) ---
# A C audit hook, installed once and never removable, logging function code/defaults writes and
# harness-reading calls; the log is append-only.
def judge_audit_install() -> bool: ...
def judge_audit_size() -> int: ...
# (event, function id or 0, module.qualname, attribute) from `start` on.
def judge_audit_since(start: int) -> list[tuple[str, int, str, str]]: ...
# The indexes of the (live mapping, saved dict) pairs whose live mapping no longer holds every saved
# binding (the same object, or one == to it) (judge_fingerprint.cpp; every build).
def judge_changed_spaces(spaces: list[tuple[Any, dict[str, Any]]]) -> list[int]: ...
# The indexes of the (containers, views, lens, keys, values) chunks whose containers no longer hold the
# same key and value objects in the same order and number (state_fingerprint.cpp; every build).
def state_changed_chunks(chunks: list[tuple[list[Any], list[Any], list[int], tuple[Any, ...], tuple[Any, ...]]]) -> list[int]: ...
# Whether every function still has the code, defaults, keyword defaults and attribute dict taken.
def state_same_functions(functions: list[Any], code: list[Any], defaults: list[Any], kwdefaults: list[Any],
                         dicts: list[Any]) -> bool: ...
