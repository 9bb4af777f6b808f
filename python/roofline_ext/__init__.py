"""roofline_ext: how close to the hardware's limit is this kernel?

Nothing here touches CUDA or NVML at import time: the package imports on a machine with no GPU,
no driver and no CUDA build. Device work starts at the first call that needs it, and the public
names below are resolved lazily so that ``import roofline_ext`` stays cheap (no torch either).

The subpackages follow the data flow, lowest layer first (docs/architecture.md):
``peaks`` → ``device`` → ``measure`` → ``calibration`` → ``tasks`` → ``model`` → ``report`` →
``runner`` → ``cli``. No public name here shares its name with a module, so importing a
subpackage never shadows a function.
"""
from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__

# public name -> module (relative to this package) that defines it
_EXPORTS = {
    "availability": "device.status",
    "Availability": "device.status",
    "Reason": "device.status",
    "devices": "device.listing",
    "Device": "device.listing",
    "lookup": "peaks.datasheet",
    "DatasheetPeaks": "peaks.datasheet",
    "derived_peaks": "peaks.derived",
    "MeasuredPeaks": "peaks.measured",
    "roofline": "model.floors",
    "roofline_result": "model.floors",
    "RooflineResult": "model.results",
    "Roof": "model.results",
    "OpResult": "model.results",
    "KernelTime": "model.results",
    "UnfusedBound": "model.results",
    "OpCount": "tasks.opcounts",
    "attach_ops": "model.ops",
    "describe": "report.text",
    "load_task": "tasks.loading",
    "count_task": "tasks.counting",
    "measure_bandwidth": "measure.bandwidth",
    "measure_compute": "measure.compute",
    "calibrate": "calibration.pipeline",
    "analyze_task": "runner.analyze",
    "judge_kernel": "runner.judging",
    "kept_server": "runner.server_start",
    "Judgement": "model.verdict",
    "Verdict": "model.verdict",
    "RooflineError": "errors",
    "UserError": "errors",
    "GpuUnavailableError": "errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'roofline_ext' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
