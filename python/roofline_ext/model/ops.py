"""Per-op floors, the unfused bound, and each kernel of the reference against its op's floor.

Three numbers per roof (datasheet, derived, measured):

``fused floor``
    The task's floor (:mod:`.floors`): all FLOPs and the compulsory bytes at once. The only floor.
``unfused bound``
    The sum of every op's own floor: each op of the forward pass is a kernel of its own that reads
    its inputs and writes its outputs (its own bytes, :mod:`roofline_ext.tasks.opcounts`), on the
    same peaks. What perfect kernels reach *without fusing anything*. It is **not a floor**: fused
    kernels beat it, which is the point.
``fusion headroom``
    unfused / fused: how much of the gap between eager PyTorch and the floor only fusion can buy.

Each op's floor is :func:`.floors.floor` with the task's peaks on that roof (the task's compute
dtype: the roof the task is judged on). unfused >= fused always: every op's floor is the largest of
its three terms, the sum of maxima is at least the maximum of the sums, the FLOPs add up to the
task's exactly, and the unfused traffic is at least the compulsory traffic (each input a kernel
reads, each output one writes).

Kernels (``--time``): an op's kernels, together, are held to the op's floor under the L2/HBM rule
(:func:`memory_ms`): an op whose data (inputs + outputs) fits in the L2 cache is on the L2 roof, a
larger one on HBM for all but one L2's worth of its bytes. The time an op's kernels take above that
floor is the time it loses; the ops and kernels that lose most come first.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Sequence

from ..errors import UserError
from .floors import MixedRoof, floor
from .results import KernelTime, OpResult, Roof, RooflineResult, UnfusedBound

__all__ = ["attach_ops", "attach_kernels", "memory_ms", "op_floor_ms", "L2_RULE", "by_loss", "by_floor",
           "by_module"]

#: The rule, in words, for outputs and docs.
L2_RULE = ("an op whose data (inputs + outputs) fits in the L2 cache is held to the L2 roof; a larger "
           "op to HBM for all its bytes but one L2's worth (which may still be in L2 from the op before)")


def _hbm(roof: Roof, read_bytes: float, write_bytes: float) -> float | None:
    """The HBM figure for one op: a measured roof's read:write envelope at the op's own ratio (an
    element-wise op may reach the 2:1 point while the task as a whole sits at 1:2), else the roof's."""
    if isinstance(roof, MixedRoof):
        return roof.bandwidth_at(read_bytes, write_bytes)
    return roof.bandwidth_tbps


def _op_floor(roof: Roof, flops: float, simt: float, nbytes: float, memory: float | None = None,
              bandwidth: float | None = None) -> tuple[float | None, str | None]:
    """(t_min_ms, limiter) of work on ``roof``'s peaks; ``memory``: a memory term in ms of our own
    (the L2/HBM rule) instead of bytes on HBM; ``bandwidth``: the op's HBM figure (:func:`_hbm`;
    default the roof's). None where the roof lacks a peak this work needs."""
    try:
        f = floor(flops, 0 if memory is not None else nbytes, simt, roof.compute_tflops, roof.simt_tflops,
                  roof.bandwidth_tbps if bandwidth is None else bandwidth)
    except UserError:
        return None, None
    if memory is None:
        return f["t_min_ms"], f["limiter"]
    t = max(f["t_compute_ms"], f["t_simt_ms"], memory)
    if t == memory and memory > 0:
        return t, "memory"
    return t, ("compute" if f["t_compute_ms"] >= f["t_simt_ms"] else "simt")


def op_floor_ms(roof: Roof, flops: float, simt_flops: float, nbytes: float) -> float | None:
    """One op's own floor on ``roof`` (its memory term on HBM, as the task's)."""
    return _op_floor(roof, flops, simt_flops, nbytes)[0]


def attach_ops(result: RooflineResult, ops: Sequence[Any]) -> RooflineResult:
    """``result`` with every op's floor on each of its roofs and the unfused bound per roof.

    ``ops``: :class:`roofline_ext.tasks.opcounts.OpCount` rows (or mappings with their fields), the
    per-op counts of the same count ``result`` was made from."""
    if not isinstance(result, RooflineResult):
        raise UserError(f"attach_ops takes a RooflineResult, got {type(result).__name__}")
    if isinstance(ops, (str, bytes)) or not isinstance(ops, Iterable):
        raise UserError(f"attach_ops takes a sequence of op counts, got {type(ops).__name__}")
    rows = []
    sums = {name: 0.0 for name, roof in result.roofs.items() if roof is not None}
    for o in ops:
        o = o if not isinstance(o, Mapping) else _Row(o)
        nbytes = o.read_bytes + o.write_bytes
        floors: dict[str, float | None] = {}
        limiters: dict[str, str | None] = {}
        for name, roof in result.roofs.items():
            if roof is None:
                floors[name] = limiters[name] = None
                continue
            t, limiters[name] = _op_floor(roof, o.flops, o.simt_flops, nbytes,
                                          bandwidth=_hbm(roof, o.read_bytes, o.write_bytes))
            floors[name] = t
            if t is not None and name in sums:
                sums[name] += t
            else:
                sums.pop(name, None)  # a roof some op has no floor on has no unfused bound
        rows.append(OpResult(index=o.index, op=o.op, module=o.module, flops=int(o.flops),
                             simt_flops=int(o.simt_flops), read_bytes=int(o.read_bytes),
                             write_bytes=int(o.write_bytes), calls=int(o.calls), note=o.note, floors=floors,
                             limiters=limiters))
    unfused = {name: UnfusedBound(fused_floor_ms=result.roofs[name].t_min_ms, unfused_bound_ms=total)  # type: ignore[union-attr]
               for name, total in sums.items()}
    return dataclasses.replace(result, ops=tuple(rows), unfused=unfused)


class _Row:
    """A mapping with an OpCount's fields, read as one (counts that crossed a process as a dict)."""

    def __init__(self, d: Mapping[str, Any]) -> None:
        self.index, self.op, self.module = int(d["index"]), str(d["op"]), str(d.get("module") or "")
        self.flops, self.simt_flops = d.get("flops", 0), d.get("simt_flops", 0)
        self.read_bytes, self.write_bytes = d.get("read_bytes", 0), d.get("write_bytes", 0)
        self.calls, self.note = d.get("calls", 1), d.get("note")


def memory_ms(nbytes: float, hbm_tbps: float | None, l2_tbps: float | None, l2_bytes: int | None) -> tuple[float, str]:
    """The memory term (ms) of an op's kernels under the L2/HBM rule (:data:`L2_RULE`), and the
    level it puts the op on (``"l2"`` or ``"hbm"``).

    Bytes that may come from L2 are charged at ``l2_tbps``; with no L2 figure they are charged
    nothing (no measured rate bounds them, and a floor must stay a floor). Without ``l2_bytes``
    every byte is on HBM."""
    if not nbytes:
        return 0.0, "l2"
    if not l2_bytes:
        return (nbytes / (hbm_tbps * 1e12) * 1e3 if hbm_tbps else 0.0), "hbm"
    in_l2 = min(nbytes, l2_bytes)
    t = in_l2 / (l2_tbps * 1e12) * 1e3 if l2_tbps else 0.0
    if nbytes > l2_bytes and hbm_tbps:
        t += (nbytes - l2_bytes) / (hbm_tbps * 1e12) * 1e3
    return t, ("l2" if nbytes <= l2_bytes else "hbm")


def attach_kernels(result: RooflineResult, kernels: Mapping[int, Sequence[KernelTime]], *,
                   l2_bytes: int | None, l2_tbps: float | None) -> RooflineResult:
    """``result`` (with ops) with each op's profiled kernels, their sum, and the op's floor under the
    L2/HBM rule on every roof; each kernel's ``lost_ms`` on the primary roof."""
    rows = []
    for op in result.ops:
        ks = list(kernels.get(op.index, ()))
        floors: dict[str, float | None] = {}
        level = None
        for name, roof in result.roofs.items():
            if roof is None:
                floors[name] = None
                continue
            mem, level = memory_ms(op.bytes, _hbm(roof, op.read_bytes, op.write_bytes), l2_tbps, l2_bytes)
            floors[name] = _op_floor(roof, op.flops, op.simt_flops, op.bytes, mem)[0]
        total = sum(k.ms for k in ks) if ks else None
        primary = floors.get(result.primary_roof)
        if ks and total and primary is not None:
            ks = [dataclasses.replace(k, lost_ms=k.ms * (1 - primary / total)) for k in ks]
        rows.append(dataclasses.replace(op, kernels=tuple(ks), kernel_ms=total, kernel_floors=floors,
                                        memory_level=level))
    return dataclasses.replace(result, ops=tuple(rows))


# --- orders for tables -----------------------------------------------------------------------------

def by_floor(ops: Sequence[OpResult], roof: str) -> list[OpResult]:
    """Ops by their own floor on ``roof``, largest first."""
    return sorted(ops, key=lambda o: (-(o.floors.get(roof) or 0.0), o.index))


def by_loss(ops: Sequence[OpResult], roof: str) -> list[OpResult]:
    """Timed ops by the time their kernels take above their kernel floor on ``roof``, most first."""
    def lost(o: OpResult) -> float:
        f = o.kernel_floors.get(roof)
        return (o.kernel_ms or 0.0) - (f or 0.0) if o.kernel_ms is not None else float("-inf")
    return sorted(ops, key=lambda o: (-lost(o), o.index))


def by_module(ops: Sequence[OpResult], roof: str) -> list[tuple[str, float, list[OpResult]]]:
    """(module, the sum of its ops' floors on ``roof``, its ops) for every module, largest first."""
    groups: dict[str, list[OpResult]] = {}
    for o in ops:
        groups.setdefault(o.module, []).append(o)
    out = [(m, sum(o.floors.get(roof) or 0.0 for o in os_), os_) for m, os_ in groups.items()]
    return sorted(out, key=lambda g: -g[1])
