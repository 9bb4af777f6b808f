"""A timed series and the timing worker's reply, typed: :class:`TimingStats`, :class:`TimingReply`.

Until now a series' statistics (:func:`~roofline_ext.measure.timing.timing_stats`) and the reply of
the timing worker's reference job (``runner.timing_jobs.time_reference``: the header, ``reference``,
``t_ref_ms``, the kernel profile, the energy, the compile job's part) travelled as dicts from the
worker into the result, and every reader opened them by key chains. Here they are records:

- :meth:`TimingStats.from_dict` / :meth:`TimingReply.from_dict` are the validation of a reply: a
  key the readers use must hold its type (``trials`` an integer, ``ci_rel`` a number or null,
  ``mode`` one of ``adaptive``/``fixed``, ...), a required key must be there, and a bad one raises
  :class:`TimingReplyError` naming it (``reference.trials is 2.5, not an integer``).
- :meth:`TimingStats.read` / :meth:`TimingReply.read` are the same records for documents the
  rules never saw (a results file read back): nothing is required and nothing raises; a value of the
  wrong type reads as None and is kept as it was.
- ``to_dict()`` writes the keys the record was made from, in their order, with their values: the
  producer's (:func:`~roofline_ext.measure.timing.series_stats`) are today's keys in today's order
  (``timed_s`` only for an adaptive series), and a reply read back gives its JSON byte for byte.

Why the records keep their keys' order (``keys``) rather than write a fixed one: the reply's order
differs by path (the pool's reference job writes the header first, ``--isolation process`` puts the
candidate before ``reference``, a one-candidate result appends the candidate's keys), results on disk
have older layouts (no ``timer_step_ms`` before 2026-12-06, no interval at all in the first), and a
key present with null (``ci_rel`` under 6 trials, ``kernel_profile: null``) is not a key left out.
The JSON keys are the interface with files already written; the record must never move or drop one.
Keys the record does not type (a fake backend's ``state``, a candidate timing's ``energy``) are kept
in ``extra``, in their place.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Mapping, Sequence, TypeVar

from ..errors import RooflineError

__all__ = ["TimingReplyError", "TimingStats", "TimingReply", "STATS_KEYS", "plain"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_R = TypeVar("_R", bound="_Keyed")


class TimingReplyError(RooflineError):
    """A timing reply, or a series in it, that is not what the timing worker writes: the one-line
    reason names the key (``the timing reply: reference.trials is 2.5, not an integer``)."""


@dataclass(frozen=True)
class _Key:
    """What one key must hold: one of ``types`` (numbers exclude booleans), null where
    ``nullable``, one of ``values`` where given, a series where ``series``, an object where ``obj``."""

    types: tuple[type, ...] = ()
    nullable: bool = False
    values: tuple[str, ...] = ()
    series: bool = False
    obj: bool = False

    def describe(self) -> str:
        if self.values:
            return "one of " + ", ".join(self.values)
        if self.series or self.obj:
            return "an object"
        names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
        text = "a number" if set(self.types) == {int, float} else " or ".join(names[t] for t in self.types)
        return text + (" or null" if self.nullable else "")

    def holds(self, value: Any) -> bool:
        if value is None:
            return self.nullable
        if self.series or self.obj:
            return isinstance(value, Mapping)
        if isinstance(value, bool) and bool not in self.types:
            return False
        return isinstance(value, self.types) and (not self.values or value in self.values)


_NUM = _Key((int, float))
_NUM_OR_NULL = _Key((int, float), nullable=True)
_INT = _Key((int,))
_TEXT = _Key((str,))
_TEXT_OR_NULL = _Key((str,), nullable=True)
_OBJ_OR_NULL = _Key(obj=True, nullable=True)
_SERIES_OR_NULL = _Key(series=True, nullable=True)


def plain(value: Any) -> Any:
    """``value`` as fresh JSON-able containers: every mapping a new dict, every list a new list."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def _frozen(value: Any) -> Any:
    """A value of a reply, detached from the caller's: a mapping read-only at the top, a list a tuple."""
    if isinstance(value, Mapping):
        return MappingProxyType(plain(value))
    if isinstance(value, (list, tuple)):
        return tuple(plain(value))
    return value


@dataclass(frozen=True, kw_only=True)
class _Keyed:
    """What both records share: the keys they were made from (in order) and the values they do not
    type (``extra``), so that ``to_dict()`` gives back every key in its place."""

    keys: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    SPEC: ClassVar[Mapping[str, _Key]] = {}
    REQUIRED: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def _parse(cls: type[_R], doc: Any, where: str, strict: bool, required: Sequence[str]) -> _R:
        if not isinstance(doc, Mapping):
            raise TimingReplyError(f"{where} is {_short(doc)}, not an object")
        missing = [k for k in required if k not in doc]
        if strict and missing:
            raise TimingReplyError(f"{where} has no {missing[0]!r}")
        typed: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in doc.items():
            spec = cls.SPEC.get(key)
            if spec is None or not spec.holds(value):
                if spec is not None and strict:
                    raise TimingReplyError(f"{where}.{key} is {_short(value)}, not {spec.describe()}")
                extra[key] = _frozen(value)  # not typed here (unknown, or of the wrong type): kept as it was
            elif spec.series and value is not None:
                typed[key] = TimingStats._parse(value, f"{where}.{key}", strict,
                                                TimingStats.REQUIRED if strict else ())
            else:
                typed[key] = _frozen(value)
        return cls(keys=tuple(doc), extra=MappingProxyType(extra), **typed)

    def has(self, key: str) -> bool:
        """Whether the document had ``key`` (null or not)."""
        return key in self.keys

    def to_dict(self) -> dict[str, Any]:
        """The keys the record was made from, in their order, as fresh JSON-able values."""
        out: dict[str, Any] = {}
        for key in self.keys:
            value = self.extra[key] if key in self.extra else getattr(self, key)
            out[key] = value.to_dict() if isinstance(value, _Keyed) else plain(value)
        return out

    def with_values(self: _R, **values: Any) -> _R:
        """The same record with ``values`` set; a key it did not have goes after the others."""
        known = {k: self._typed(k, v) for k, v in values.items() if k in self.SPEC}
        extra = {k: v for k, v in self.extra.items() if k not in known}
        extra.update({k: _frozen(v) for k, v in values.items() if k not in self.SPEC})
        keys = self.keys + tuple(k for k in values if k not in self.keys)
        return dataclasses.replace(self, keys=keys, extra=MappingProxyType(extra), **known)

    def _typed(self, key: str, value: Any) -> Any:
        if self.SPEC[key].series and isinstance(value, Mapping) and not isinstance(value, _Keyed):
            return TimingStats.from_dict(value, where=key)
        return value if isinstance(value, _Keyed) else _frozen(value)

    def without(self: _R, *names: str) -> _R:
        """The same record without the keys ``names`` (typed ones read None again)."""
        cleared = {k: None for k in names if k in self.SPEC}
        extra = {k: v for k, v in self.extra.items() if k not in names}
        return dataclasses.replace(self, keys=tuple(k for k in self.keys if k not in names),
                                   extra=MappingProxyType(extra), **cleared)


def _short(value: Any) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: A series' keys, in the order :func:`~roofline_ext.measure.timing.timing_stats` writes them.
STATS_KEYS = ("median_ms", "mean_ms", "best_ms", "p10_ms", "p90_ms", "cv", "trials", "warmup", "mode",
              "confidence", "ci_low_ms", "ci_high_ms", "ci_rel", "precision", "precision_reached", "stopped",
              "timer_step_ms", "timed_s", "backlog_share", "host_bound")
MODES = ("adaptive", "fixed")
STOPS = ("precision", "resolution", "host-bound", "max-time", "max-trials", "fixed")


@dataclass(frozen=True, kw_only=True)
class TimingStats(_Keyed):
    """One timed series (the reference's, a candidate's, the compiled model's): the statistics of
    its event times in ms, how many trials and warm-up calls, and how well the median is known
    (``ci_low_ms``/``ci_high_ms``: its 95% interval; ``ci_rel`` the interval's relative half-width,
    None under 6 trials; ``precision_reached``: ``ci_rel <= precision``). None: the series did not
    have the key (an older layout) or it was null; ``keys`` tells which."""

    median_ms: float | None = None
    mean_ms: float | None = None
    best_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    cv: float | None = None
    trials: int | None = None
    warmup: int | None = None
    mode: str | None = None
    confidence: float | None = None
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    ci_rel: float | None = None
    precision: float | None = None
    precision_reached: bool | None = None
    stopped: str | None = None
    timer_step_ms: float | None = None
    timed_s: float | None = None  # the timed trials' wall seconds: an adaptive series only
    # An adaptive series since 2026-12-06 (session 18): the share of its chunks' wall the GPU still had
    # queued work once the host had queued them, and whether that makes it host-bound (measure/timing.py).
    backlog_share: float | None = None
    host_bound: bool | None = None
    # A reference's series since 2026-12-06 (measure/task_timing.py): the card over it (NVML summary:
    # clocks, power, temperature min/median/max, reasons; or {"error": why}) and the host just before.
    telemetry: Mapping[str, Any] | None = None
    host: Mapping[str, Any] | None = None

    SPEC: ClassVar[Mapping[str, _Key]] = {
        "median_ms": _NUM, "mean_ms": _NUM, "best_ms": _NUM, "p10_ms": _NUM, "p90_ms": _NUM, "cv": _NUM,
        "trials": _INT, "warmup": _INT, "mode": _Key((str,), values=MODES), "confidence": _NUM,
        "ci_low_ms": _NUM_OR_NULL, "ci_high_ms": _NUM_OR_NULL, "ci_rel": _NUM_OR_NULL, "precision": _NUM,
        "precision_reached": _Key((bool,)), "stopped": _Key((str,), values=STOPS),
        "timer_step_ms": _NUM_OR_NULL, "timed_s": _NUM,
        "backlog_share": _NUM, "host_bound": _Key((bool,)), "telemetry": _OBJ_OR_NULL, "host": _OBJ_OR_NULL,
    }
    # A series without its median is no timing; the other keys came over versions (and the runner's
    # test stand-ins write fewer), so they are held to their types where present.
    REQUIRED: ClassVar[tuple[str, ...]] = ("median_ms",)

    @classmethod
    def of(cls, **values: Any) -> TimingStats:
        """A series from its values, its keys in the order given (the producer's)."""
        unknown = [k for k in values if k not in cls.SPEC]
        if unknown:
            raise TypeError(f"not a key of a timed series: {', '.join(unknown)}")
        return cls(keys=tuple(values), **values)

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "the timing") -> TimingStats:
        """A series from a worker's reply, validated (:class:`TimingReplyError` names a bad key)."""
        return cls._parse(doc, where, True, cls.REQUIRED)

    @classmethod
    def read(cls, doc: Any) -> TimingStats | None:
        """A series from a document never validated (a results file): None unless an object;
        a value of the wrong type reads as None. Never raises; a record passes through."""
        if isinstance(doc, TimingStats):
            return doc
        return cls._parse(doc, "", False, ()) if isinstance(doc, Mapping) else None

    @property
    def sm_clock_mhz(self) -> float | None:
        """The median SM clock over the series, where the card was read."""
        return ((self.telemetry or {}).get("sm_clock_mhz") or {}).get("median")

    @property
    def host_pace_us(self) -> float | None:
        """The host's pace just before the series (a fixed Python loop's median us), where read."""
        return (self.host or {}).get("pace_us")

    @property
    def host_paces_us(self) -> tuple[float, ...]:
        """The host's pace just before and just after the series, those that were read."""
        host = self.host or {}
        return tuple(float(v) for v in (host.get("pace_us"), host.get("pace_after_us")) if isinstance(v, (int, float)))

    @property
    def has_interval(self) -> bool:
        """Whether the series says how well its median is known (the first layout did not)."""
        return self.has("ci_rel")


@dataclass(frozen=True, kw_only=True)
class TimingReply(_Keyed):
    """The reply of the timing worker's reference job, with the compile job's part where
    ``--compile`` (``runner/batch``), or the one process's reply of ``--isolation process`` (which
    has the candidate's keys too): the reference's series and its median ``t_ref_ms``, the header
    (task, device, dtype, seed, where the inputs and weights were made), the kernel profile
    (``--ops``), the energy (``--energy``), and the compiled model's time, series and correctness
    or why it has none. A one-candidate result's ``timing`` adds that candidate's keys
    (:meth:`with_values`). Mappings (correctness, the profile, the energy) stay as the worker wrote
    them, read-only."""

    t_ref_ms: float | None = None
    reference: TimingStats | None = None
    task: str | None = None
    device: str | None = None
    dtype: str | None = None
    seed: int | None = None
    inputs: str | None = None
    weights: str | None = None
    kernel_profile: Mapping[str, Any] | None = None
    energy: Mapping[str, Any] | None = None
    t_compile_ms: float | None = None
    compiled: TimingStats | None = None
    compiled_correctness: Mapping[str, Any] | None = None
    compile_s: float | None = None
    compile_cache_hit: bool | None = None
    compile_error_kind: str | None = None
    compile_error: str | None = None
    candidate: str | None = None
    correctness: Mapping[str, Any] | None = None
    candidate_timing: TimingStats | None = None
    t_new_ms: float | None = None
    speedup: float | None = None

    SPEC: ClassVar[Mapping[str, _Key]] = {
        "t_ref_ms": _NUM, "reference": _SERIES_OR_NULL, "task": _TEXT, "device": _TEXT, "dtype": _TEXT,
        "seed": _INT, "inputs": _TEXT, "weights": _TEXT, "kernel_profile": _OBJ_OR_NULL, "energy": _OBJ_OR_NULL,
        "t_compile_ms": _NUM_OR_NULL, "compiled": _SERIES_OR_NULL, "compiled_correctness": _OBJ_OR_NULL,
        "compile_s": _NUM_OR_NULL, "compile_cache_hit": _Key((bool,), nullable=True),
        "compile_error_kind": _TEXT_OR_NULL, "compile_error": _TEXT_OR_NULL, "candidate": _TEXT_OR_NULL,
        "correctness": _OBJ_OR_NULL, "candidate_timing": _SERIES_OR_NULL, "t_new_ms": _NUM_OR_NULL,
        "speedup": _NUM_OR_NULL,
    }
    #: What every reply of a reference job has: the floor's fraction needs ``t_ref_ms``.
    REQUIRED: ClassVar[tuple[str, ...]] = ("t_ref_ms", "reference")

    @classmethod
    def from_dict(cls, doc: Any, *, required: Sequence[str] | None = None,
                  where: str = "the timing reply") -> TimingReply:
        """The worker's reply, validated: each key this record types holds its type, the
        ``required`` keys (:attr:`REQUIRED` unless given) are there, and every series in it is
        :meth:`TimingStats.from_dict`'s. Raises :class:`TimingReplyError` naming the bad key."""
        return cls._parse(doc, where, True, cls.REQUIRED if required is None else required)

    @classmethod
    def read(cls, doc: Any) -> TimingReply | None:
        """A result's ``timing`` read back from a file: None unless a non-empty object; a value of
        the wrong type reads as None. Never raises; a record passes through."""
        if isinstance(doc, TimingReply):
            return doc
        return cls._parse(doc, "", False, ()) if isinstance(doc, Mapping) and doc else None

    @classmethod
    def of_result(cls, result: Mapping[str, Any]) -> TimingReply | None:
        """The ``timing`` of a task's result as JSON (``TaskResult.to_dict()``, or one read back
        from a file), typed: what the text report, the batch table and the CSV read instead of
        ``(result.get("timing") or {}).get("reference")`` chains. None: the task was not timed."""
        return cls.read(result.get("timing"))

    @property
    def compiled_correct(self) -> Any:
        """Whether the compiled model gave the reference's outputs: its correctness' ``ok`` as the
        worker wrote it (None: not compiled, or it does not say)."""
        return (self.compiled_correctness or {}).get("ok")

    @property
    def compile_asked(self) -> bool:
        """Whether ``--compile`` ran (its job came back with a time or with why it has none)."""
        return self.has("compiled_correctness") or self.has("compile_error")
