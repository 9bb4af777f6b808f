"""A reference's kernel profile on its counted ops: the kernels matched to the ops they ran for,
held to each op's floor under the L2/HBM rule, and the profile's summary (``kernel_profile``).

Pure: the profile is what the timing worker measured (``tasks.opranges.profile_reference`` over
``measure.kernel_profile``), a plain mapping; here it only meets the counts. :func:`place_profile`
gives back a new :class:`RooflineResult` with the kernels on its ops and the summary, and changes
nothing handed in. :func:`l2_figure` is the calibration's L2 rate those kernels are held to.
"""
from __future__ import annotations

import difflib
from typing import Any, Mapping, Sequence

from ..peaks.record import CalibrationRecord
from ..tasks.opcounts import match_key
from .ops import L2_RULE, attach_kernels
from .results import KernelTime, RooflineResult

__all__ = ["place_profile", "align", "l2_figure", "BREACH_EPS"]

#: A kernel sum below its op's floor by more than this fraction is a breach (timer resolution aside).
BREACH_EPS = 1e-6
# Kernel sums within this of the event time agree (issue 26's measure of the per-kernel view).
_SUM_AGREES = 0.10


def align(counted: Sequence[tuple[str, str]], profiled: Sequence[tuple[str, str]]) -> dict[int, int]:
    """profiled position -> counted position, for the (op, module) names both passes dispatched in the
    same order (the longest matching blocks: an op the other pass lacks costs only itself). Names
    match by family (``match_key``): every backend's form of one operation, in place or not."""
    def key(seq: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(match_key(op), module) for op, module in seq]

    matcher = difflib.SequenceMatcher(None, key(counted), key(profiled), autojunk=False)
    pairs: dict[int, int] = {}
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            pairs[block.b + k] = block.a + k
    return pairs


def place_profile(typed: RooflineResult | None, profile: Mapping[str, Any], *, t_ref_ms: float | None,
                  l2_tbps: float | None) -> tuple[RooflineResult | None, dict[str, Any]]:
    """The result with the profile's kernels on its ops (``typed`` itself where they cannot go on
    any), and ``kernel_profile``: the kernel sum beside the event-timed median ``t_ref_ms``, how the
    two passes matched, and the ops whose kernels ran faster than their floor (breaches)."""
    notes: list[str] = []
    summary: dict[str, Any] = {"rule": L2_RULE, "l2_tbps": l2_tbps, "notes": notes}
    if profile.get("error"):
        summary["error"] = profile["error"]
        notes.append(profile["error"])
        return typed, summary
    _sums(summary, profile, t_ref_ms)
    _sum_note(summary, notes)
    if typed is None or not typed.ops:
        notes.append("no per-op floors to hold the kernels to (no roofline for this task)")
        return typed, summary
    kernels = _match(typed, list(profile.get("ops") or ()), summary, notes)
    if l2_tbps is None:
        notes.append("no measured L2 figure (run a full `roofline-ext calibrate`): bytes that may come from L2 "
                     "are charged nothing in the kernel floors")
    typed = attach_kernels(typed, kernels, l2_bytes=profile.get("l2_bytes"), l2_tbps=l2_tbps)
    summary["breaches"] = _breaches(typed)
    return typed, summary


def _sums(summary: dict[str, Any], profile: Mapping[str, Any], t_ref: float | None) -> None:
    """The kernel sum beside the event-timed median and, where measured, the queued GPU time."""
    ksum = profile.get("kernel_sum_ms")
    summary.update(kernel_sum_ms=ksum, outside_ms=profile.get("outside_ms"),
                   kernels=profile.get("kernels"), l2_bytes=profile.get("l2_bytes"), event_median_ms=t_ref,
                   kernel_sum_over_event=(ksum / t_ref if t_ref and ksum is not None else None))
    queued = profile.get("queued")
    if isinstance(queued, Mapping):
        q = queued.get("median_ms")
        summary.update(queued_gpu_ms=q, queued=dict(queued),
                       kernel_sum_over_queued=(ksum / q if q and ksum is not None else None))


def _match(typed: RooflineResult, prof_ops: list[Mapping[str, Any]], summary: dict[str, Any],
           notes: list[str]) -> dict[int, list[KernelTime]]:
    """Each profiled op's kernels on the counted op it matched (op index -> kernels); what did not
    match on either side goes into ``summary``."""
    counted = [(o.op, o.module) for o in typed.ops]
    pairs = align(counted, [(p["op"], p["module"]) for p in prof_ops])
    kernels: dict[int, list[KernelTime]] = {}
    unmatched_ms, unmatched = 0.0, []
    for pos, p in enumerate(prof_ops):
        ks = p.get("kernels") or []
        if pos in pairs:
            index = typed.ops[pairs[pos]].index
            kernels.setdefault(index, []).extend(KernelTime(str(n), float(ms), index) for n, ms in ks)
        else:
            unmatched_ms += sum(float(ms) for _, ms in ks)
            unmatched.append(f"#{p['index']} {p['op']} in {p['module'] or '(model)'}")
    matched_counted = set(pairs.values())
    missing = [f"#{o.index} {o.op} in {o.module or '(model)'}" for i, o in enumerate(typed.ops)
               if i not in matched_counted and o.calls > 0]
    summary.update(profiled_ops=len(prof_ops), counted_ops=len(typed.ops), matched_ops=len(pairs),
                   unmatched_profiled=unmatched[:20], unmatched_profiled_count=len(unmatched),
                   unmatched_counted=missing[:20], unmatched_counted_count=len(missing),
                   unmatched_kernel_ms=unmatched_ms)
    if unmatched or missing:
        notes.append(f"{len(unmatched)} profiled op(s) and {len(missing)} counted op(s) did not match by name "
                     f"(the GPU dispatches other ops there); {unmatched_ms:.4g} ms of kernels are on no counted op")
    return kernels


def _sum_note(summary: dict[str, Any], notes: list[str]) -> None:
    """Say why the kernels do not add up to the event time, when they do not. Below it, the GPU
    waited on the host between kernels (a launch-bound call: on the H200, 2026-12-02, the
    small-batch L3 networks summed to 9-49% of their event time); ``gpu_wait_ms`` is that wait per
    call, time no kernel and so no op of the per-op view accounts for. Above it, the profiled
    forward ran slower than the timed ones (the profiler's own cost on short kernels, or clocks)."""
    ratio, t_ref, ksum = summary.get("kernel_sum_over_event"), summary.get("event_median_ms"), summary.get("kernel_sum_ms")
    if ratio is None or t_ref is None or ksum is None:
        return
    summary["gpu_wait_ms"] = max(0.0, t_ref - ksum)
    queued, q_ratio = summary.get("queued_gpu_ms"), summary.get("kernel_sum_over_queued")
    if ratio < 1 - _SUM_AGREES:
        gpu = (f"; with the host queued ahead the call's GPU time is {queued:.4g} ms, of which the kernels "
               f"are {q_ratio:.0%}" if queued and q_ratio is not None else "")
        notes.append(f"the kernels sum to {ratio:.0%} of the event time: the GPU waited "
                     f"{t_ref - ksum:.4g} ms per call on the host between kernels (launch-bound), "
                     f"time that no op's kernels account for{gpu}")
    elif ratio > 1 + _SUM_AGREES:
        notes.append(f"the kernels sum to {ratio:.0%} of the event time: the profiled forward ran slower "
                     "than the timed ones (the profiler's own cost, or clocks)")


def _breaches(typed: RooflineResult) -> dict[str, Any]:
    """Ops whose kernels together ran faster than the op's kernel floor: per roof, and on every roof
    at once (below the lowest floor: a counting bug, not a peak that was measured low)."""
    per_roof: dict[str, list[dict[str, Any]]] = {}
    everywhere = []
    for o in typed.ops:
        if not o.kernel_ms:
            continue
        below = [name for name, f in o.kernel_floors.items() if f is not None and o.kernel_ms < f * (1 - BREACH_EPS)]
        for name in below:
            per_roof.setdefault(name, []).append({"index": o.index, "op": o.op, "module": o.module,
                                                  "kernel_ms": o.kernel_ms, "floor_ms": o.kernel_floors[name]})
        floors = [f for f in o.kernel_floors.values() if f is not None]
        if floors and o.kernel_ms < min(floors) * (1 - BREACH_EPS):
            everywhere.append({"index": o.index, "op": o.op, "module": o.module, "kernel_ms": o.kernel_ms,
                               "floor_ms": min(floors)})
    return {"by_roof": per_roof, "all_roofs": everywhere}


def l2_figure(calibration: Mapping[str, Any] | None, regime: str = "burst") -> float | None:
    """The fastest L2 read rate a calibration measured (TB/s), small working sets included (the
    fastest is what an L2-resident op's floor may assume), or None when it measured none: the
    record's figure (:meth:`~roofline_ext.peaks.record.CalibrationRecord.l2_figure`), the
    ``l2_tbps`` that :func:`place_profile` holds kernels to."""
    if not calibration:
        return None
    return CalibrationRecord.read(calibration).l2_figure(regime)
