"""The typed results of a check: one ``DeviceCheck`` per GPU inside a ``CheckReport``."""
from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any, Mapping

from .outcome import EXIT_CODES, EXIT_NO_GPU, IDLE, MetricCheck, Situation, StateItem, Verdict

#: Bumped when the JSON layout of a check changes incompatibly (fleet --from refuses others).
CHECK_SCHEMA_VERSION = 1
CHECK_KIND = "roofline_ext.check"


@dataclass(frozen=True)
class DeviceCheck:
    index: int | None
    name: str
    uuid: str
    pci_bus_id: str
    sku: str | None
    verdict: Verdict
    reason: str
    metrics: tuple[MetricCheck, ...]
    state: tuple[StateItem, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)
    calibration: Mapping[str, Any] | None = None  # date, mode, path of the calibration compared with
    reference: Mapping[str, Any] | None = None  # sku, kind, source of the SKU reference
    tolerances: Mapping[str, float] = field(default_factory=dict)
    wall_s: float | None = None
    #: Who else used the GPU while it was checked (busy: the figures are shared).
    situation: Situation = IDLE

    def metric(self, key: str) -> MetricCheck | None:
        return next((m for m in self.metrics if m.key == key), None)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "uuid": self.uuid, "pci_bus_id": self.pci_bus_id,
                "sku": self.sku, "verdict": self.verdict.value, "reason": self.reason,
                "metrics": {m.key: m.to_dict() for m in self.metrics},
                "state": {s.key: s.to_dict() for s in self.state}, "skipped": dict(self.skipped),
                "calibration": None if self.calibration is None else dict(self.calibration),
                "reference": None if self.reference is None else dict(self.reference),
                "tolerances": dict(self.tolerances), "wall_s": self.wall_s, "situation": self.situation.to_dict()}


@dataclass(frozen=True)
class CheckReport:
    """What ``roofline-ext check`` prints as JSON: the overall verdict and every GPU's."""

    verdict: Verdict
    reason: str
    devices: tuple[DeviceCheck, ...]
    availability: Mapping[str, Any]
    date: str
    package_version: str
    host: str = field(default_factory=socket.gethostname)
    wall_s: float | None = None
    no_gpu: bool = False
    #: ``check --strict``: busy GPUs were judged on their figures as measured.
    strict: bool = False

    @property
    def busy(self) -> bool:
        """Another process shared at least one of the GPUs checked."""
        return any(d.situation.busy for d in self.devices)

    @property
    def exit_code(self) -> int:
        return EXIT_NO_GPU if self.no_gpu else EXIT_CODES[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": CHECK_SCHEMA_VERSION, "kind": CHECK_KIND, "date": self.date,
                "package_version": self.package_version, "host": self.host, "verdict": self.verdict.value,
                "reason": self.reason, "exit_code": self.exit_code, "strict": self.strict, "busy": self.busy,
                "availability": dict(self.availability),
                "wall_s": self.wall_s, "devices": [d.to_dict() for d in self.devices]}
