"""roofline_ext: how close to the hardware's limit is this kernel?

Nothing here touches CUDA or NVML at import time: the package imports on a machine with no GPU,
no driver and no CUDA build. Device work starts at the first call that needs it, and the public
names below are resolved lazily so that ``import roofline_ext`` stays cheap (no torch either).
"""
from __future__ import annotations

import importlib
import sys
import types

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "availability": "availability",
    "Availability": "availability",
    "Reason": "availability",
    "devices": "devices",
    "Device": "devices",
    "lookup": "datasheet",
    "DatasheetPeaks": "datasheet",
    "derived_peaks": "derived",
    "roofline": "roofline",
    "describe": "roofline",
    "load_task": "tasks",
    "count_task": "counting",
    "measure_bandwidth": "bandwidth",
    "measure_compute": "compute",
    "calibrate": "calibration",
    "RooflineError": "errors",
    "UserError": "errors",
    "GpuUnavailableError": "errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'roofline_ext' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__


class _Package(types.ModuleType):
    """Keeps the public functions when a submodule of the same name is imported.

    ``roofline_ext.availability`` is a function living in ``roofline_ext/availability.py`` (likewise
    ``devices``, ``roofline``). Importing a submodule makes Python set the package attribute of that
    name to the module object, which would turn ``roofline_ext.availability()`` into "module is not
    callable". Exported names therefore always resolve to the function.
    """

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and _EXPORTS.get(name) == name:
            # Drop any stale cached function so __getattr__ resolves it afresh from the module.
            self.__dict__.pop(name, None)
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
