"""Typed results of the roofline model, with ``to_dict()`` giving the JSON keys outputs have always had.

Frozen dataclasses, so a result handed to a report or a caller cannot be changed under it; the
dicts that ``to_dict()`` returns are fresh, and callers may add to them (timing adds its fields).
Every JSON *file* the tool writes carries ``schema_version`` (:data:`RESULTS_SCHEMA_VERSION` for
analysis results; the calibration cache has its own), bumped when a key changes meaning or goes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

#: Version of the layout of ``analyze`` JSON output (documents of results). Additions of keys do
#: not bump it; a key changing meaning or disappearing does.
RESULTS_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Roof:
    """One roof (datasheet, derived or measured) applied to one task."""

    source: str
    compute_unit: str | None
    simt_unit: str
    compute_tflops: float | None
    simt_tflops: float | None
    bandwidth_tbps: float | None
    # Where each peak came from: a measured roof borrows what calibration did not measure.
    peak_sources: Mapping[str, str | None]
    clock_mhz: float | None
    t_compute_ms: float
    t_simt_ms: float
    t_memory_ms: float
    t_min_ms: float
    bound: str
    limiter: str
    ridge_flop_per_byte: float | None
    ref_fraction: float | None
    new_fraction: float | None
    ref_impossible: bool
    new_impossible: bool

    @property
    def impossible(self) -> bool:
        """A time below this floor: the counts, the peaks, or a shortcut the reference lacks."""
        return self.ref_impossible or self.new_impossible

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["peak_sources"] = dict(self.peak_sources)
        d["impossible"] = self.impossible
        return d


#: What every output says about the unfused bound: it is no floor.
UNFUSED_NOTE = ("the unfused bound is the sum of each op's own floor: what perfect kernels reach without "
                "fusing anything; it is NOT a floor (fusing ops beats it); the fused floor is the floor")


@dataclass(frozen=True)
class KernelTime:
    """One CUDA kernel (or copy) the reference launched, timed by the profiler, and the op it ran for.

    ``lost_ms``: its share of its op's time above the op's kernel floor (the op's kernels share the
    op's floor in proportion to their times), on the roof the result says (``OpResult.kernel_roof``)."""

    name: str
    ms: float
    op_index: int | None
    lost_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class OpResult:
    """One aten op of the reference's forward pass: its counts and its own floor on every roof.

    ``floors``/``limiters``: roof name -> the op's floor (ms) and what limits it, with the memory
    term on HBM, as the task's floor. With ``--time``: ``kernels`` it launched, ``kernel_ms`` their
    sum, and ``kernel_floors``: the op's floor under the L2/HBM rule (docs/counting.md), which the
    kernels are held to; ``memory_level`` says which memory the rule put the op on."""

    index: int
    op: str
    module: str
    flops: int
    simt_flops: int
    read_bytes: int
    write_bytes: int
    calls: int
    note: str | None
    floors: Mapping[str, float | None]
    limiters: Mapping[str, str | None]
    kernels: tuple[KernelTime, ...] = ()
    kernel_ms: float | None = None
    kernel_floors: Mapping[str, float | None] = field(default_factory=dict)
    memory_level: str | None = None

    @property
    def bytes(self) -> int:
        return self.read_bytes + self.write_bytes

    @property
    def arithmetic_intensity(self) -> float | None:
        return (self.flops + self.simt_flops) / self.bytes if self.bytes else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "op": self.op, "module": self.module, "flops": self.flops,
            "simt_flops": self.simt_flops, "read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
            "bytes": self.bytes, "arithmetic_intensity": self.arithmetic_intensity, "calls": self.calls,
            "note": self.note, "floors_ms": dict(self.floors), "limiters": dict(self.limiters),
            "kernel_ms": self.kernel_ms, "kernels": [k.to_dict() for k in self.kernels],
            "kernel_floors_ms": dict(self.kernel_floors), "memory_level": self.memory_level,
        }


@dataclass(frozen=True)
class UnfusedBound:
    """The three numbers of one roof: the fused floor (the only floor), the unfused bound (the sum
    of the ops' own floors; no floor) and the fusion headroom (unfused / fused)."""

    fused_floor_ms: float
    unfused_bound_ms: float

    @property
    def fusion_headroom(self) -> float | None:
        return self.unfused_bound_ms / self.fused_floor_ms if self.fused_floor_ms else None

    def to_dict(self) -> dict[str, Any]:
        return {"fused_floor_ms": self.fused_floor_ms, "unfused_bound_ms": self.unfused_bound_ms,
                "fusion_headroom": self.fusion_headroom, "unfused_is_a_floor": False}


@dataclass(frozen=True)
class RooflineResult:
    """A task's floors on every roof and how close the reference and the candidate come."""

    arithmetic_intensity: float
    gpu: str | None
    sku: str | None
    dtype: str
    unit: str
    flops: float
    simt_flops: float
    nbytes: float
    t_ref_ms: float | None
    t_new_ms: float | None
    primary_roof: str
    roofs: Mapping[str, Roof | None] = field(default_factory=dict)
    # Per-op results (model.ops.attach_ops); empty unless asked for. ``unfused``: roof -> bounds.
    ops: tuple[OpResult, ...] = ()
    unfused: Mapping[str, UnfusedBound] = field(default_factory=dict)

    @property
    def primary(self) -> Roof:
        roof = self.roofs[self.primary_roof]
        assert roof is not None  # the primary roof is, by construction, one that applies
        return roof

    @property
    def impossible_roofs(self) -> list[str]:
        return [name for name, roof in self.roofs.items() if roof is not None and roof.impossible]

    def to_dict(self) -> dict[str, Any]:
        """The keys of ``roofline()``: the seed's (``arithmetic_intensity``, ``bound``,
        ``t_min_ms``, ``ref_roofline_frac``; ``roofline_frac`` when a candidate was timed) first."""
        top = self.primary
        d: dict[str, Any] = {
            "arithmetic_intensity": self.arithmetic_intensity,
            "bound": top.bound,
            "t_min_ms": top.t_min_ms,
            "ref_roofline_frac": top.ref_fraction,
            "ridge_flop_per_byte": top.ridge_flop_per_byte,
            "gpu": self.gpu,
            "sku": self.sku,
            "dtype": self.dtype,
            "unit": self.unit,
            "flops": self.flops,
            "simt_flops": self.simt_flops,
            "nbytes": self.nbytes,
            "t_ref_ms": self.t_ref_ms,
            "t_new_ms": self.t_new_ms,
            "primary_roof": self.primary_roof,
            "roofs": {name: (roof.to_dict() if roof is not None else None) for name, roof in self.roofs.items()},
            "impossible": bool(self.impossible_roofs),
            "impossible_roofs": self.impossible_roofs,
        }
        if self.t_new_ms is not None:
            d["roofline_frac"] = top.new_fraction
        if self.ops:
            d["ops"] = [op.to_dict() for op in self.ops]
            d["unfused"] = {"roofs": {name: b.to_dict() for name, b in self.unfused.items()},
                            "note": UNFUSED_NOTE}
        return d
