"""What a check measures and with what: the metrics in order, the repetitions, each metric's setup
from the calibration, and the types a backend gives back. Pure: no device, no measurement.

Its own module so that the real backend (:mod:`.native`) and the runner (:mod:`.run`) both read it
without importing each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol

from ..errors import UserError
from ..measure.bandwidth import CONFIG_KEYS, DEFAULT_CONFIGS
from ..peaks.record import CalibrationRecord

#: Order of the measurements (BF16 first: it is the one most sensitive to a warm card).
ORDER = ("bf16", "fp32", "hbm_read", "hbm_copy", "h2d", "d2h")
HBM_MIN_BYTES = 2 << 30
HBM_REPS, HBM_WARMUP = 10, 3
COMPUTE_REPS, COMPUTE_WARMUP, COMPUTE_TARGET_MS = 10, 3, 2.0
HOSTLINK_BYTES, HOSTLINK_REPS, HOSTLINK_WARMUP = 256 << 20, 10, 2
HBM_PATTERN = {"hbm_read": "read", "hbm_copy": "copy"}
_PATH_PREFERENCE = ("wgmma", "mma.sync", "simt")  # fastest first, where a GPU has several


@dataclass(frozen=True)
class Measured:
    """What a backend's measurement gives the check: the figure and how it was reached."""

    value: float
    cv: float | None
    detail: Mapping[str, Any] = field(default_factory=dict)
    telemetry: Mapping[str, Any] | None = None


class CheckProgress(Protocol):
    """What a check reports while it runs (report/check_table.py draws it with the progress bar)."""

    def plan(self, total: int) -> None:
        """``total`` steps to come: every metric of every GPU, skipped ones included."""

    def start(self, name: str) -> None: ...
    def advance(self, name: str) -> None: ...


class CheckBackend(Protocol):
    """The calls a check makes; :class:`~roofline_ext.check.native_backend.NativeCheckBackend` is the real one."""

    def availability(self) -> Any: ...
    def devices(self) -> list[Any]: ...
    def health(self, dev: Any) -> Any: ...
    def calibration(self, dev: Any) -> Mapping[str, Any] | None: ...
    def compute_paths(self, index: int) -> Mapping[str, Mapping[str, Mapping[str, Any]]]: ...
    def free_bytes(self, index: int) -> int | None: ...
    def measure(self, index: int, metric: str, setup: Mapping[str, Any]) -> Measured: ...
    def package_version(self) -> str: ...


# --- what to measure (pure) ------------------------------------------------------------------------

def hbm_buffer_bytes(l2_bytes: int | None, free_bytes: int | None) -> int:
    """max(8 x L2, 2 GiB) per buffer, capped so a copy's two buffers fit with a margin; whole MiB."""
    want = max(8 * (l2_bytes or 0), HBM_MIN_BYTES)
    if free_bytes:
        margin = max(512 << 20, int(free_bytes * 0.05))
        want = min(want, max(0, free_bytes - margin) // 2)
    size = (want >> 20) << 20
    if size <= 0:
        raise UserError(f"too little free device memory ({free_bytes} bytes) for the HBM check")
    return size


def calibration_record(cal: Mapping[str, Any] | None) -> CalibrationRecord:
    """The card's calibration as a record, as stored (a backend hands it over; an empty one for None)."""
    return CalibrationRecord.read(cal or {})


def hbm_config(cal: Mapping[str, Any] | None, pattern: str) -> dict[str, Any]:
    """The calibration's winning configuration of ``pattern``, else the default list's first."""
    hbm = calibration_record(cal).burst_entry("hbm")
    cfg = (hbm.pattern_config(pattern) if hbm is not None else None) or DEFAULT_CONFIGS[pattern][0]
    return {k: v for k, v in dict(cfg).items() if k in CONFIG_KEYS}


def compute_setup(cal: Mapping[str, Any] | None, precision: str,
                  caps: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | str:
    """The path and kernel configuration to run ``precision`` with, or why it cannot run here."""
    supported = [p for p, c in (caps.get(precision) or {}).items() if c.get("supported")]
    if not supported:
        reasons = "; ".join(f"{p}: {c.get('reason')}" for p, c in (caps.get(precision) or {}).items())
        return reasons or f"this build reports no path for {precision}"
    entry = calibration_record(cal).burst_entry(precision)
    if entry is not None and entry.path in supported:
        return {"precision": precision, "path": entry.path, "config": dict(entry.config)}
    path = next(p for p in _PATH_PREFERENCE if p in supported)
    return {"precision": precision, "path": path, "config": {}}


def plan(dev: Any, cal: Mapping[str, Any] | None, caps: Mapping[str, Any], free: int | None
         ) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Setups per metric and the metrics that cannot run on this GPU (with the reason)."""
    setups: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for prec in ("bf16", "fp32"):
        s = compute_setup(cal, prec, caps)
        if isinstance(s, str):
            skipped[prec] = s
        else:
            setups[prec] = s
    size = hbm_buffer_bytes(getattr(dev, "l2_bytes", None), free)
    for metric, pattern in HBM_PATTERN.items():
        setups[metric] = {"pattern": pattern, "config": hbm_config(cal, pattern), "buffer_bytes": size}
    for metric in ("h2d", "d2h"):
        setups[metric] = {"bytes": HOSTLINK_BYTES}
    return {m: setups[m] for m in ORDER if m in setups}, skipped
