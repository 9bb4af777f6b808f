"""The energy roofline: energy per unit of work, and a task's energy against its energy floor.

    E_min = Σ_unit FLOPs_unit × J/FLOP_unit + Σ_level bytes_level × J/byte_level

from the counts the time floor uses (``model/floors.py``): the tensor FLOPs on the dtype's unit
(``compute_unit_for_dtype``), the non-tensor FLOPs on the CUDA cores (FP32; FP64 for float64), and
the compulsory HBM bytes, split into reads (inputs + parameters) and writes (outputs) when known.

**The costs are above idle.** A figure such as "1.03 pJ/FLOP" (issue 27: cuBLAS BF16 at 687 W on an
H200) is the whole board's power over the rate, idle (78 W there) included. Idle power is paid per
*second*, not per FLOP or byte, and a task whose compute and memory overlap pays it once, so the sum
of two whole-board figures is no floor. The floor therefore sums above-idle costs (0.91 pJ/FLOP in
that run), and the whole-board floor adds idle power over the *time* floor:

    E_min_total = P_idle × t_min + E_min

which is below any run's total energy whenever ``t_min`` is below its time and the above-idle
costs add. They add only approximately: every above-idle figure also holds the power of the card
being awake (clocks up, memory controllers on), which a task running compute and memory at once
pays once, not twice; a task found below its energy floor says so (:data:`BELOW_FLOOR_MESSAGE`).

**The floor per unit is the lowest any measured kernel reached** (:func:`lowest_costs`): the tool's
own kernels and the same-run library products (cuBLAS GEMMs, torch ``copy_``/``sum``/``fill_``), the
least J/FLOP (or J/byte) among them. Energy per operation falls at lower clocks, so a card held at
lower clocks can be more frugal still (:data:`LOWER_CLOCKS_NOTE`, in every floor).

HBM bytes: per pattern (``hbm_read``, ``hbm_write``, ``hbm_copy``: J per byte *moved*, a copy's
reads and writes both counted), the floor takes the cheapest way the measured patterns can move the
task's reads and writes (:func:`memory_energy`). ``l2`` is kept as a cost (the chart draws it) but is
not in the floor: compulsory bytes are HBM bytes, and an HBM byte's figure already holds its trip
through L2.

Pure Python: no GPU, no NVML. The measuring (``measure/energy.py``) gives
:class:`EnergyMeasurement` records; this module turns them into costs, floors and fractions.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import UserError
from ..measure.compute import PRECISIONS
from ..measure.energy import EnergyMeasurement
from ..peaks.record import CalibrationRecord, EnergyEntry
from ..peaks.units import UNITS
from .floors import compute_unit_for_dtype
from .results import RooflineResult

__all__ = [
    "COMPUTE_KEYS",
    "MEMORY_KEYS",
    "HBM_KEYS",
    "ORIGINS",
    "EnergyCost",
    "EnergyKernel",
    "EnergyCosts",
    "EnergyTerm",
    "EnergyFloor",
    "TaskEnergy",
    "EnergyMeasurement",
    "lowest_costs",
    "memory_energy",
    "energy_floor",
    "energy_floor_for",
    "task_energy",
    "LOWER_CLOCKS_NOTE",
    "BELOW_FLOOR_MESSAGE",
]

#: Precisions with an energy per FLOP (per OP for INT8): the registry's units that the tool's own
#: kernels measure (``measure.compute.PRECISIONS``), in the registry's order; not spelled again here.
COMPUTE_KEYS = tuple(u for u in UNITS if u in PRECISIONS)
#: HBM patterns with an energy per byte moved.
HBM_KEYS = ("hbm_read", "hbm_write", "hbm_copy")
#: Every memory level/pattern with an energy per byte (L2 where it could be isolated).
MEMORY_KEYS = (*HBM_KEYS, "l2")
#: Who wrote the kernel a cost was measured on.
ORIGINS = ("own", "library")

LOWER_CLOCKS_NOTE = ("the energy floor is the lowest energy per FLOP and per byte that a measured kernel reached "
                     "on this card at the clocks it ran at; energy per operation falls at lower clocks, so a "
                     "card held at lower clocks can be more frugal still")
BELOW_FLOOR_MESSAGE = ("less energy than the floor of the reference's operations: an algebraic or structural "
                       "shortcut was taken, the FLOP/byte counts or the energy costs are wrong, or the per-unit "
                       "costs do not add for this task (overlapped compute and memory share the power of an awake "
                       "card)")

# A fraction this far above 1 is a real violation, not floating-point noise (as the time floor's).
_EPS = 1e-9


def _number(name: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise UserError(f"{name} must be a finite number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise UserError(f"{name} must be {'positive' if positive else 'non-negative'}, got {value!r}")
    return float(value)


def _unit_word(key: str) -> str:
    return "byte" if key in MEMORY_KEYS else ("OP" if key == "int8" else "FLOP")


# --------------------------------------------------------------------------------------------------
# Costs
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EnergyCost:
    """The energy of one unit of work on one unit or level: ``key`` (a :data:`COMPUTE_KEYS` or
    :data:`MEMORY_KEYS` name), ``j_per_unit`` above idle (J per FLOP, OP or byte moved) and its
    ``uncertainty`` (same unit), ``j_total_per_unit`` the whole board's (idle included; None where
    unknown), ``source`` the kernel it was measured on and ``origin`` ("own" or "library").
    ``bytes_per_unit``: the HBM bytes that kernel had to move per unit of work (a library GEMM of
    n x n matrices reads A and B and writes C: 3 n² elements per 2 n³ FLOPs; the tool's own compute
    kernels work from registers and shared memory: 0). Their energy is inside ``j_per_unit``, so
    the floor takes it back out before it adds a task's own bytes (:func:`energy_floor`)."""

    key: str
    j_per_unit: float
    uncertainty: float
    source: str
    origin: str = "own"
    j_total_per_unit: float | None = None
    bytes_per_unit: float = 0.0

    def __post_init__(self) -> None:
        if self.key not in COMPUTE_KEYS + MEMORY_KEYS:
            raise UserError(f"unknown energy cost {self.key!r}; expected one of: "
                            f"{', '.join(COMPUTE_KEYS + MEMORY_KEYS)}")
        if self.origin not in ORIGINS:
            raise UserError(f"energy cost origin must be one of {', '.join(ORIGINS)}, got {self.origin!r}")
        # A cost of zero or less is a measurement the counter could not resolve, not a free unit:
        # a floor built on it would be no floor at all.
        _number(f"{self.key} energy per {_unit_word(self.key)}", self.j_per_unit, positive=True)
        _number(f"{self.key} energy uncertainty", self.uncertainty)
        if self.j_total_per_unit is not None:
            _number(f"{self.key} whole-board energy per {_unit_word(self.key)}", self.j_total_per_unit, positive=True)
        _number(f"{self.key} HBM bytes per {_unit_word(self.key)}", self.bytes_per_unit)

    @property
    def pj_per_unit(self) -> float:
        return self.j_per_unit * 1e12

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "j_per_unit": self.j_per_unit, "pj_per_unit": self.pj_per_unit,
                "uncertainty": self.uncertainty, "j_total_per_unit": self.j_total_per_unit,
                "per": _unit_word(self.key), "source": self.source, "origin": self.origin,
                "bytes_per_unit": self.bytes_per_unit}


@dataclass(frozen=True)
class EnergyKernel:
    """One measured kernel of a unit: its name, who wrote it, its work per call (FLOPs, OPs or bytes
    moved) and the :class:`EnergyMeasurement` of its calls; :meth:`cost` is its energy per unit."""

    key: str
    name: str
    work_per_call: float
    measurement: EnergyMeasurement
    origin: str = "own"
    hbm_bytes_per_call: float = 0.0  # what the kernel had to move (EnergyCost.bytes_per_unit)

    def cost(self) -> EnergyCost:
        work = _number(f"{self.name}: work per call", self.work_per_call, positive=True)
        m = self.measurement
        if m.j_per_call_above_idle <= 0:
            raise UserError(f"{self.name}: {m.j_per_call_above_idle:.3g} J per call above idle (± "
                            f"{m.uncertainty_above_idle_j:.2g} J): too little for the counter; measure "
                            "more work per call")
        return EnergyCost(key=self.key, j_per_unit=m.j_per_call_above_idle / work,
                          uncertainty=m.uncertainty_above_idle_j / work, source=self.name, origin=self.origin,
                          j_total_per_unit=m.j_per_call_total / work,
                          bytes_per_unit=_number(f"{self.name}: HBM bytes per call", self.hbm_bytes_per_call) / work)


@dataclass(frozen=True)
class EnergyCosts:
    """The costs a floor is built on, one per key (the lowest measured, :func:`lowest_costs`), the
    card's idle power (None where unmeasured) and, per key, every cost that was considered."""

    costs: Mapping[str, EnergyCost]
    idle_w: float | None = None
    considered: Mapping[str, tuple[EnergyCost, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, cost in self.costs.items():
            if cost.key != key:
                raise UserError(f"energy cost filed under {key!r} is for {cost.key!r}")
        if self.idle_w is not None:
            _number("idle power", self.idle_w)
        # Frozen means frozen: the mappings handed in may be the caller's own dicts.
        object.__setattr__(self, "costs", MappingProxyType(dict(self.costs)))
        object.__setattr__(self, "considered", MappingProxyType(dict(self.considered)))

    def get(self, key: str) -> EnergyCost | None:
        return self.costs.get(key)

    def require(self, key: str) -> EnergyCost:
        cost = self.costs.get(key)
        if cost is None:
            have = ", ".join(sorted(self.costs)) or "none"
            raise UserError(f"no measured energy per {_unit_word(key)} for {key} (have: {have}); measure it "
                            "first (a full 'roofline-ext calibrate', or benchmarks/energy_roofline.py)")
        return cost

    def to_dict(self) -> dict[str, Any]:
        return {"idle_w": self.idle_w, "costs": {k: c.to_dict() for k, c in self.costs.items()},
                "considered": {k: [c.to_dict() for c in v] for k, v in self.considered.items()},
                "note": LOWER_CLOCKS_NOTE}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EnergyCosts:
        """What :meth:`to_dict` wrote (benchmarks/energy_roofline.py's ``costs``), or a calibration
        document with an ``energy`` section (:meth:`from_calibration`: the cache file, or
        ``calibrate --json``), validated as costs handed in are: a missing field or a bad number is
        one ``UserError`` line."""
        # A calibration (by its kind, or by the sections only a calibration has): its energy part.
        if isinstance(d, Mapping) and "costs" not in d and (
                d.get("kind") == "roofline_ext.calibration" or "energy" in d or {"gpu", "peaks"} <= set(d)):
            return cls.from_calibration(d)
        if not isinstance(d, Mapping) or not isinstance(d.get("costs"), Mapping):
            raise UserError("energy costs: expected an object with a 'costs' mapping (the benchmark's JSON) "
                            "or a calibration with an 'energy' section")

        def cost(c: Any) -> EnergyCost:
            if not isinstance(c, Mapping):
                raise UserError(f"energy costs: each cost must be an object, got {type(c).__name__}")
            try:
                return EnergyCost(key=c["key"], j_per_unit=c["j_per_unit"], uncertainty=c["uncertainty"],
                                  source=c["source"], origin=c.get("origin", "own"),
                                  j_total_per_unit=c.get("j_total_per_unit"),
                                  bytes_per_unit=c.get("bytes_per_unit") or 0.0)
            except KeyError as exc:
                raise UserError(f"energy costs: a cost has no {exc.args[0]!r}") from None

        considered = {k: tuple(cost(c) for c in v) for k, v in (d.get("considered") or {}).items()}
        return cls(costs={k: cost(c) for k, c in d["costs"].items()}, idle_w=d.get("idle_w"), considered=considered)

    @classmethod
    def from_calibration(cls, cal: Mapping[str, Any] | CalibrationRecord) -> EnergyCosts:
        """The costs a calibration's energy part measured (``energy`` of ``calibrate()``'s document):
        per unit its own kernel's J per unit above idle, with the uncertainty and whole-board figure,
        and the idle power measured at the start of the phase. Only figures that counted become costs;
        a calibration whose energy was skipped, failed or never measured (one cached before the phase
        existed) is a ``UserError`` saying which.

        Per unit the lowest figure wins (:func:`lowest_costs`), the tool's own kernel's or a library
        peer's measured beside it (``energy.peers``): on the H200 (2026-12-02) torch's elementwise
        kernels moved a byte for about 110 pJ against the own copy kernel's 138, and with the own
        kernels alone eight KernelBench L1 references came out below their floor. A calibration
        made before the peers were measured gives the own kernels' costs only."""
        record = cal if isinstance(cal, CalibrationRecord) else CalibrationRecord.read(cal)
        section = record.energy
        where = f"the calibration of {record.gpu.name or 'a GPU'} ({record.date or 'undated'})"
        if section is None:
            raise UserError(f"{where} has no energy part (made before calibration measured energy, or a quick one); "
                            "run a full 'roofline-ext calibrate'")
        if section.status == "skipped":
            raise UserError(f"{where} measured no energy: {section.reason}")
        counted, peers = section.counted(), section.counted_peers()
        if not counted and not peers:
            why = "; ".join(f"{k}: {e.status}: {e.reason}" for k, e in section.entries.items()) or "no entries"
            raise UserError(f"{where} has no energy figure that counted ({why})")

        def cost(e: EnergyEntry, origin: str) -> EnergyCost:
            # A library GEMM's figure holds the energy of the bytes it moved too (the floor takes them
            # back out): its set-up recorded them per call (``info.hbm_bytes_per_call``).
            info, work = e.doc.get("info"), e.doc.get("work_per_call")
            moved = info.get("hbm_bytes_per_call") if isinstance(info, Mapping) else None
            per = moved / work if isinstance(moved, (int, float)) and isinstance(work, (int, float)) and work > 0 else 0.0
            return EnergyCost(key=e.key, j_per_unit=_number(f"{e.key} energy per unit", e.j_per_unit),
                              uncertainty=_number(f"{e.key} energy uncertainty", e.uncertainty),
                              source=f"{e.source or e.key} (calibration {record.date or 'undated'})",
                              origin=origin, j_total_per_unit=e.j_total_per_unit, bytes_per_unit=float(per))

        measured = [cost(e, "own") for e in counted.values()] + [cost(e, "library") for e in peers]
        return lowest_costs(measured, idle_w=section.idle_w)


def lowest_costs(measured: Iterable[EnergyCost | EnergyKernel], idle_w: float | None = None) -> EnergyCosts:
    """Per key, the lowest energy per unit that any measured kernel reached: the tool's own kernels
    and the same-run library products alike. A floor must not be beaten by a kernel already seen, so
    the least figure wins, whoever wrote it; ``considered`` keeps all of them, lowest first."""
    by_key: dict[str, list[EnergyCost]] = {}
    for m in measured:
        cost = m.cost() if isinstance(m, EnergyKernel) else m
        by_key.setdefault(cost.key, []).append(cost)
    considered = {k: tuple(sorted(v, key=lambda c: c.j_per_unit)) for k, v in by_key.items()}
    return EnergyCosts(costs={k: v[0] for k, v in considered.items()}, idle_w=idle_w, considered=considered)


# --------------------------------------------------------------------------------------------------
# The floor
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EnergyTerm:
    """One term of the floor: ``count`` units of work on ``key`` at its cost."""

    key: str
    count: float
    j_per_unit: float
    uncertainty: float
    source: str

    @property
    def energy_j(self) -> float:
        return self.count * self.j_per_unit

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "count": self.count, "j_per_unit": self.j_per_unit, "energy_j": self.energy_j,
                "uncertainty_j": self.count * self.uncertainty, "source": self.source}


def _term(cost: EnergyCost, count: float, j_per_byte: float = 0.0) -> EnergyTerm:
    """``count`` units at ``cost``, less the HBM energy its measuring kernel spent per unit at
    ``j_per_byte`` (never below zero)."""
    j = max(cost.j_per_unit - cost.bytes_per_unit * j_per_byte, 0.0)
    return EnergyTerm(cost.key, count, j, cost.uncertainty, cost.source)


def memory_energy(costs: EnergyCosts, nbytes: float, read_bytes: float | None = None,
                  write_bytes: float | None = None) -> tuple[tuple[EnergyTerm, ...], str]:
    """The cheapest way the measured HBM patterns move the task's compulsory bytes: (terms, rule).

    With the split (reads R, writes W): reads at ``hbm_read``, writes at ``hbm_write``, or
    min(R, W) read-write pairs at ``hbm_copy`` (2 bytes moved per pair) and the rest at read/write,
    whichever is less. A pattern not measured is stood in for by the cheapest measured one (lower
    is the safe side of a floor). Without the split, every byte at the cheapest measured pattern."""
    nbytes = _number("nbytes", nbytes)
    hbm = {k: c for k in HBM_KEYS if (c := costs.get(k)) is not None}
    if nbytes == 0:
        return (), "no bytes"
    if not hbm:
        raise UserError("no measured energy per byte for any HBM pattern (hbm_read, hbm_write, hbm_copy); "
                        "measure it first (a full 'roofline-ext calibrate', or benchmarks/energy_roofline.py)")
    cheapest = min(hbm.values(), key=lambda c: c.j_per_unit)
    if read_bytes is None or write_bytes is None or read_bytes + write_bytes <= 0:
        return (_term(cheapest, nbytes),), f"every byte at the cheapest measured HBM pattern ({cheapest.key})"
    r, w = _number("read_bytes", read_bytes), _number("write_bytes", write_bytes)
    # The split gives the ratio; nbytes stays the count (they agree for the runner's counts).
    scale = nbytes / (r + w)
    r, w = r * scale, w * scale
    read = hbm.get("hbm_read", cheapest)
    write = hbm.get("hbm_write", cheapest)

    def moves(pairs: float) -> tuple[tuple[EnergyTerm, ...], list[str]]:
        """``pairs`` read-write pairs at hbm_copy, the other reads and writes alone; and the patterns
        this needed that were not measured."""
        parts = [(copy, 2 * pairs, "hbm_copy"), (read, r - pairs, "hbm_read"), (write, w - pairs, "hbm_write")]
        used = [(c, n, k) for c, n, k in parts if n > 0 and c is not None]
        return tuple(_term(c, n) for c, n, _ in used), [k for _, _, k in used if k not in hbm]

    copy = hbm.get("hbm_copy")
    options = [(*moves(0.0), "reads at hbm_read, writes at hbm_write")]
    if copy is not None and min(r, w) > 0:
        options.append((*moves(min(r, w)), "read-write pairs at hbm_copy, the rest at hbm_read/hbm_write"))
    terms, missing, rule = min(options, key=lambda o: sum(t.energy_j for t in o[0]))
    if missing:
        rule += f" ({', '.join(missing)} not measured: {cheapest.key}, the cheapest measured, stands in)"
    return terms, rule


@dataclass(frozen=True)
class EnergyFloor:
    """The energy floor of one call of a task: ``e_min_j`` above idle (the sum of ``terms``),
    ``uncertainty_j`` (the terms' uncertainties added, their costs being measured apart), and
    ``e_min_total_j`` = idle power × ``t_min_s`` + ``e_min_j`` where both are known."""

    flops: float
    simt_flops: float
    nbytes: float
    compute_unit: str
    simt_unit: str
    terms: tuple[EnergyTerm, ...]
    memory_rule: str
    e_min_j: float
    uncertainty_j: float
    t_min_s: float | None
    idle_w: float | None
    e_min_total_j: float | None
    note: str = LOWER_CLOCKS_NOTE

    @property
    def arithmetic_intensity(self) -> float:
        return (self.flops + self.simt_flops) / self.nbytes if self.nbytes else math.inf

    @property
    def pj_per_flop(self) -> float | None:
        """The floor per FLOP of the task (the chart's y), None without FLOPs."""
        work = self.flops + self.simt_flops
        return self.e_min_j / work * 1e12 if work else None

    def to_dict(self) -> dict[str, Any]:
        return {"flops": self.flops, "simt_flops": self.simt_flops, "nbytes": self.nbytes,
                "compute_unit": self.compute_unit, "simt_unit": self.simt_unit,
                "terms": [t.to_dict() for t in self.terms], "memory_rule": self.memory_rule,
                "e_min_j": self.e_min_j, "uncertainty_j": self.uncertainty_j, "t_min_s": self.t_min_s,
                "idle_w": self.idle_w, "e_min_total_j": self.e_min_total_j,
                "arithmetic_intensity": self.arithmetic_intensity, "pj_per_flop": self.pj_per_flop,
                "note": self.note}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EnergyFloor:
        """The floor again from what :meth:`to_dict` wrote (an analysis's ``energy.floor``), so a
        report can draw a task from its JSON. The derived keys (``arithmetic_intensity``,
        ``pj_per_flop``, each term's ``energy_j``) are recomputed, not read. A term's per-unit
        uncertainty is its ``uncertainty_j`` over its count, since :meth:`to_dict` writes only the
        product; it comes back equal to the last bits of a float. A missing key or a bad number is one
        ``UserError`` line."""
        if not isinstance(d, Mapping):
            raise UserError(f"an energy floor must be an object, got {type(d).__name__}")

        def optional(key: str) -> float | None:
            return None if d.get(key) is None else _number(f"energy floor {key}", d[key])

        def term(t: Any) -> EnergyTerm:
            if not isinstance(t, Mapping):
                raise UserError(f"an energy floor's term must be an object, got {type(t).__name__}")
            count = _number("energy floor term count", t["count"])
            spread = _number("energy floor term uncertainty_j", t["uncertainty_j"])
            return EnergyTerm(key=str(t["key"]), count=count,
                              j_per_unit=_number("energy floor term j_per_unit", t["j_per_unit"]),
                              uncertainty=spread / count if count else 0.0, source=str(t["source"]))

        try:
            terms = d["terms"]
            if not isinstance(terms, list):
                raise UserError(f"an energy floor's terms must be a list, got {type(terms).__name__}")
            return cls(flops=_number("energy floor flops", d["flops"]),
                       simt_flops=_number("energy floor simt_flops", d["simt_flops"]),
                       nbytes=_number("energy floor nbytes", d["nbytes"]), compute_unit=str(d["compute_unit"]),
                       simt_unit=str(d["simt_unit"]), terms=tuple(term(t) for t in terms),
                       memory_rule=str(d["memory_rule"]), e_min_j=_number("energy floor e_min_j", d["e_min_j"]),
                       uncertainty_j=_number("energy floor uncertainty_j", d["uncertainty_j"]),
                       t_min_s=optional("t_min_s"), idle_w=optional("idle_w"), e_min_total_j=optional("e_min_total_j"),
                       note=str(d.get("note") or LOWER_CLOCKS_NOTE))
        except KeyError as exc:
            raise UserError(f"an energy floor without {exc.args[0]!r}") from None


def energy_floor(costs: EnergyCosts, *, flops: float, nbytes: float, dtype: Any, simt_flops: float = 0.0,
                 read_bytes: float | None = None, write_bytes: float | None = None, t_min_s: float | None = None,
                 strict_fp32: bool = False) -> EnergyFloor:
    """The energy floor of one call: ``flops`` on the dtype's unit (as the time floor maps it:
    float32 on TF32 unless ``strict_fp32``), ``simt_flops`` on the CUDA cores (FP64 for float64),
    ``nbytes`` of compulsory HBM traffic (``read_bytes``/``write_bytes`` its split, for the pattern
    rule), and ``t_min_s``, the time floor, for the whole-board floor. Raises ``UserError`` for a
    count that is not a non-negative number or a cost the work needs that was not measured."""
    unit = compute_unit_for_dtype(dtype, strict_fp32)
    flops = _number("flops", flops)
    simt_flops = _number("simt_flops", simt_flops or 0.0)
    nbytes = _number("nbytes", nbytes)
    simt_unit = "fp64" if unit == "fp64" else "fp32"
    terms: list[EnergyTerm] = []
    # A compute cost measured on a kernel that moved bytes (a library GEMM) holds their energy too;
    # added to the task's own bytes it would count them twice, and a task that is that very GEMM
    # would come out below its floor (5.6% for cuBLAS TF32 8192³ on the H200, 2026-12-02). Those
    # bytes are taken back out at the dearest measured HBM cost: no byte costs more than that, so
    # what is left is no more than the kernel's compute really spent, and that GEMM as a task
    # (its bytes then charged at most that dear) is at or above its floor.
    hbm = [c.j_per_unit for k in HBM_KEYS if (c := costs.get(k)) is not None]
    per_byte = max(hbm) if hbm else 0.0
    if flops:
        terms.append(_term(costs.require(unit), flops, per_byte))
    if simt_flops:
        terms.append(_term(costs.require(simt_unit), simt_flops, per_byte))
    mem_terms, rule = memory_energy(costs, nbytes, read_bytes, write_bytes)
    terms.extend(mem_terms)
    e_min = sum(t.energy_j for t in terms)
    uncertainty = sum(t.count * t.uncertainty for t in terms)
    t_min = _number("t_min_s", t_min_s) if t_min_s is not None else None
    total = costs.idle_w * t_min + e_min if t_min is not None and costs.idle_w is not None else None
    return EnergyFloor(flops=flops, simt_flops=simt_flops, nbytes=nbytes, compute_unit=unit, simt_unit=simt_unit,
                       terms=tuple(terms), memory_rule=rule, e_min_j=e_min, uncertainty_j=uncertainty,
                       t_min_s=t_min, idle_w=costs.idle_w, e_min_total_j=total)


def energy_floor_for(result: RooflineResult, costs: EnergyCosts, *, read_bytes: float | None = None,
                     write_bytes: float | None = None, roof: str | None = None) -> EnergyFloor:
    """:func:`energy_floor` from the counts of a time floor (a :class:`RooflineResult`): its FLOPs,
    SIMT FLOPs, bytes and unit, and ``t_min`` of ``roof`` (default: the result's primary roof; the
    measured roof is the one that belongs with measured energy, where the analysis has one)."""
    name = roof or result.primary_roof
    chosen = result.roofs.get(name)
    if chosen is None:
        raise UserError(f"the analysis has no {name!r} roof (has: {', '.join(k for k, v in result.roofs.items() if v)})")
    return energy_floor(costs, flops=result.flops, simt_flops=result.simt_flops, nbytes=result.nbytes,
                        dtype=result.unit, read_bytes=read_bytes, write_bytes=write_bytes,
                        t_min_s=chosen.t_min_ms * 1e-3)


# --------------------------------------------------------------------------------------------------
# A measured task against its floor
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskEnergy:
    """A task's measured energy per call against its floor.

    ``fraction``: floor over measured, above idle (≤ 1 for a task that respects the floor, as the
    time floor's fraction); ``fraction_total``: the whole-board floor over the whole-board energy.
    ``below_floor``: either fraction above 1 (or nothing measured above idle though the floor is
    positive), the energy counterpart of a time below the time floor; ``below_floor_beyond_uncertainty``:
    below even with the floor lowered and the measurement raised by their uncertainties, i.e. not
    the counter's granularity."""

    label: str
    floor: EnergyFloor
    measurement: EnergyMeasurement
    fraction: float | None
    fraction_total: float | None
    below_floor: bool
    below_floor_beyond_uncertainty: bool

    @property
    def message(self) -> str | None:
        return BELOW_FLOOR_MESSAGE if self.below_floor else None

    @property
    def pj_per_flop(self) -> float | None:
        """The measured energy above idle per FLOP of the task (the chart's y)."""
        work = self.floor.flops + self.floor.simt_flops
        return self.measurement.j_per_call_above_idle / work * 1e12 if work else None

    def to_dict(self) -> dict[str, Any]:
        m = self.measurement
        return {"label": self.label, "j_per_call_above_idle": m.j_per_call_above_idle,
                "j_per_call_total": m.j_per_call_total, "uncertainty_above_idle_j": m.uncertainty_above_idle_j,
                "uncertainty_total_j": m.uncertainty_total_j, "idle_w": m.idle_w, "window_s": m.window_s,
                "fraction": self.fraction, "fraction_total": self.fraction_total, "below_floor": self.below_floor,
                "below_floor_beyond_uncertainty": self.below_floor_beyond_uncertainty, "message": self.message,
                "floor": self.floor.to_dict(), "measurement": m.to_dict()}


def task_energy(floor: EnergyFloor, measurement: EnergyMeasurement, label: str = "reference") -> TaskEnergy:
    """Hold a measured call's energy against its floor (see :class:`TaskEnergy`)."""
    above = measurement.j_per_call_above_idle
    fraction = floor.e_min_j / above if above > 0 else None
    total = measurement.j_per_call_total
    fraction_total = floor.e_min_total_j / total if floor.e_min_total_j is not None and total > 0 else None
    below = ((fraction is not None and fraction > 1 + _EPS)
             or (fraction_total is not None and fraction_total > 1 + _EPS)
             or (above <= 0 < floor.e_min_j))
    beyond = floor.e_min_j - floor.uncertainty_j > above + measurement.uncertainty_above_idle_j
    return TaskEnergy(label=label, floor=floor, measurement=measurement, fraction=fraction,
                      fraction_total=fraction_total, below_floor=below, below_floor_beyond_uncertainty=beyond)
