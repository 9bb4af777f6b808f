"""The tool's own verified kernels as energy workloads (:class:`~.energy_workload.EnergyWorkload`):
a compute path of the native core (``compute_run``) and an HBM pattern (``bandwidth_run``).

Each call is one native call, which verifies its output (the core raises ``VerificationError``;
a result that does not say ``passed`` fails too), and its work is read off its own result:
``flop_per_launch`` x the launches it timed, or ``bytes_per_launch`` (read N, write N, copy 2N) x
its launches. Each call also allocates, seeds and checks, and that is in the energy window too: two
small sizing calls measure the call's fixed overhead, and the launches per call are chosen so that
the kernels run :data:`DUTY` of it (:func:`reps_for`). The overhead's energy is charged to the
kernel's work (the seeding and the check move bytes of their own, at full clocks), so a low duty
overstates J per unit; ``kernel_duty`` in a record is the share of the window the kernels really
ran.

``benchmarks/energy_roofline.py`` (the H200 figures of 2026-12-02) and calibration's energy phase
both build their own-kernel workloads here. ``core`` is any object with the native core's
``compute_run`` / ``bandwidth_run`` (tests pass a fake).
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Mapping

from ..errors import UserError
from . import bandwidth, compute
from .energy_workload import CheckFailed, EnergyWorkload, Unsupported

__all__ = ["DUTY", "MIN_KERNEL_S", "MAX_CALL_S", "TARGET_MS", "SEED", "HBM_PATTERNS", "reps_for",
           "own_buffer_bytes", "compute_workload", "hbm_workload"]

#: Own-kernel calls are sized so that the kernels run this fraction of a call: the rest (allocation,
#: seeding, the verification every call does) is in the window too, and its energy is charged to the
#: kernels' work. At 0.9 (until 2026-12-02) the windows reached only 0.71-0.83 for HBM and 0.81-0.92
#: for compute on the H200, because one sizing call underestimates the overhead (HBM: 1.5-7 ms
#: estimated, 7-13 ms in the window); across three calibrations J/byte of write then followed the
#: duty (0.735, 0.795, 0.811 -> 151, 147, 145 pJ/B). Aiming higher shrinks that bias by the same
#: factor as the gap: each call's kernels are about 30x its estimated overhead.
DUTY = 0.97
#: The shortest kernel time per own-kernel call, and the longest call (read's host checksum grows
#: with the buffer, so its calls are long; a call beyond this is not lengthened further). 0.25 s of
#: kernels keeps an HBM call's 10 ms of overhead under 4% even when the sizing call saw less of it.
MIN_KERNEL_S = 0.25
MAX_CALL_S = 2.0
#: The own compute kernels' launch length while sizing (the loop trips then stay fixed).
TARGET_MS = 5.0
#: The HBM patterns with an energy per byte, by the energy key each one measures.
HBM_PATTERNS = {"hbm_read": "read", "hbm_write": "write", "hbm_copy": "copy"}
SEED = 12345
#: Launches of each sizing call: enough for a per-launch time, few enough to be quick.
_SIZING_REPS = 3


def reps_for(overhead_s: float, launch_s: float, *, duty: float = DUTY, min_kernel_s: float = MIN_KERNEL_S,
             max_call_s: float = MAX_CALL_S) -> int:
    """Launches per own-kernel call: kernels for ``duty`` of the call against its fixed
    ``overhead_s``, at least ``min_kernel_s`` of them, the call at most ``max_call_s``."""
    if not (0 < duty < 1) or launch_s <= 0:
        raise UserError(f"need 0 < duty < 1 and a positive launch time, got {duty!r} and {launch_s!r}")
    kernel_s = max(overhead_s * duty / (1 - duty), min_kernel_s)
    kernel_s = min(kernel_s, max(max_call_s - overhead_s, min_kernel_s))
    return max(1, math.ceil(kernel_s / launch_s - 1e-9))  # not one launch more for a rounding error


def own_buffer_bytes(l2_bytes: int | None) -> int:
    """The own HBM kernels' buffer: max(16 x L2, 1 GiB), whole MiB (1 GiB on an H200). Far above L2,
    and small enough that read's host checksum keeps each call short against the window."""
    return max(16 * int(l2_bytes or 0), 1 << 30) >> 20 << 20


def _require_passed(result: Mapping[str, Any], what: str) -> None:
    # The core raises VerificationError on wrong output; a result that still says "not passed"
    # (a future core, a fake) must not be counted either.
    if not (result.get("verification") or {}).get("passed"):
        raise CheckFailed(f"{what}: the kernel's own verification did not pass ({result.get('verification')})")


def _sized(once: Callable[[int], tuple[float, float, Mapping[str, Any]]], clock: Callable[[], float],
           duty: float) -> tuple[int, dict[str, Any]]:
    """Launches per call for ``once(reps) -> (work, kernel seconds, result)``: two small calls (the
    first pays one-time costs) give the launch time and the call's fixed overhead."""
    for _ in range(2):
        t0 = clock()
        _, kernel_s, result = once(_SIZING_REPS)
        wall = clock() - t0
    launch_s = kernel_s / _SIZING_REPS
    overhead = max(wall - kernel_s, 0.0)
    reps = reps_for(overhead, launch_s, duty=duty)
    return reps, {"reps_per_call": reps, "launch_ms": launch_s * 1e3, "overhead_s": overhead,
                  "call_s": overhead + reps * launch_s, "expected_duty": reps * launch_s / (overhead + reps * launch_s),
                  "sizing_result": {k: result.get(k) for k in ("config", "instruction", "iterations", "grid", "block",
                                                               "buffer_bytes", "kernel_clock_mhz")}}


def compute_workload(core: Any, device: int, precision: str, path: str, *, config: Mapping[str, Any] | None = None,
                     clock: Callable[[], float] = time.perf_counter, duty: float = DUTY) -> EnergyWorkload:
    """The core's verified kernel of (precision, path), loop trips fixed by a first sized launch
    (as calibration's sustained phase runs it); each call is one ``compute_run``, and its work is
    ``flop_per_launch`` x the launches it timed (no untimed warm-up: the window's own warm-up call
    warms the card). ``config``: the kernel knobs (default: the path's first default configuration,
    the one the burst phase measures)."""
    cfg = dict(config if config is not None else compute.DEFAULT_CONFIGS[path][0])
    first = core.compute_run(device, precision, path, reps=_SIZING_REPS, warmup=1, target_ms=TARGET_MS, **cfg)
    _require_passed(first, f"{precision} {path}")
    iterations = int(first["iterations"])

    def once(reps: int) -> tuple[float, float, Mapping[str, Any]]:
        r = core.compute_run(device, precision, path, reps=reps, warmup=0, iterations=iterations, **cfg)
        _require_passed(r, f"{precision} {path}")
        return float(r["flop_per_launch"]) * int(r["reps"]), sum(r["times_ms"]) * 1e-3, r

    reps, info = _sized(once, clock, duty)

    def call() -> tuple[float, float | None]:
        work, kernel_s, _ = once(reps)
        return work, kernel_s

    info.update(path=path, config=cfg, iterations=iterations, flop_per_launch=first["flop_per_launch"],
                instruction=first.get("instruction"))
    return EnergyWorkload(call=call, call_s=info["call_s"], info=info)


def hbm_workload(core: Any, device: int, pattern: str, buffer_bytes: int, *, config: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.perf_counter, duty: float = DUTY) -> EnergyWorkload:
    """The core's verified HBM pattern kernel on buffers of ``buffer_bytes``; each call is one
    ``bandwidth_run`` (allocation, seeding, the launches, the check), and its work is
    ``bytes_per_launch`` (read N, write N, copy 2N) x its launches. ``config``: the kernel
    configuration (default: the pattern's first default one); the driver's copy (``load="memcpy"``)
    is not one of the tool's kernels and is refused."""
    source = config if config is not None else bandwidth.DEFAULT_CONFIGS[pattern][0]
    cfg = {k: v for k, v in dict(source).items() if k in bandwidth.CONFIG_KEYS}
    if cfg.get("load") == "memcpy":
        raise UserError(f"HBM {pattern}: the driver's cudaMemcpyAsync is not one of the tool's kernels; "
                        "give a kernel configuration")

    def once(reps: int) -> tuple[float, float, Mapping[str, Any]]:
        row = core.bandwidth_run(device, pattern, int(buffer_bytes), int(reps), 0, [cfg], SEED)[0]
        if row.get("skipped"):
            raise Unsupported(f"{pattern} {cfg}: {row['skipped']}")
        _require_passed(row, f"HBM {pattern}")
        launches = int(row.get("warmup") or 0) + int(row["reps"])
        return float(row["bytes_per_launch"]) * launches, sum(row["times_ms"]) * 1e-3, row

    reps, info = _sized(once, clock, duty)

    def call() -> tuple[float, float | None]:
        work, kernel_s, _ = once(reps)
        return work, kernel_s

    info.update(pattern=pattern, config=cfg, buffer_bytes=int(buffer_bytes))
    return EnergyWorkload(call=call, call_s=info["call_s"], info=info)
