"""Access to the compiled core, ``roofline_ext._core``, imported at first use only.

Importing the extension loads nothing GPU-related (NVML is dlopen-ed and CUDA initialised by the
first call that needs them), but keeping even the import lazy means a broken build is reported as
an availability reason instead of breaking ``import roofline_ext``. The raising accessor, ``core()``,
lives in :mod:`.status` beside the reasons it raises with, so this module imports nothing of ours.
"""
from __future__ import annotations

import functools
from types import ModuleType
from typing import Any


@functools.lru_cache(maxsize=None)
def _import() -> tuple[ModuleType | None, str | None]:
    try:
        from .. import _core
    except ImportError as exc:  # not built, or built for another Python / platform
        return None, f"{type(exc).__name__}: {exc}"
    return _core, None


def core_or_none() -> ModuleType | None:
    """The native module, or None when it cannot be imported."""
    return _import()[0]


def import_error() -> str | None:
    """Why the native module could not be imported (None when it was)."""
    return _import()[1]


def cuda_function(name: str) -> Any:
    """A function of the core's CUDA part (``judge_compare_stats``, say), or None where there is
    none: no core, or a host-only build (``CUDA_COMPILED`` False), which lacks those functions."""
    mod = core_or_none()
    return getattr(mod, name, None) if mod is not None and getattr(mod, "CUDA_COMPILED", False) else None


def core_error_kind(exc: BaseException) -> str | None:
    """Which of the core's exception classes ``exc`` is an instance of, most specific first
    (``VerificationError``, ``CudaError``, ``NvmlError``, then ``CoreError``), or None: matched by
    type, against the classes the core registers in every build, host-only ones too."""
    mod = core_or_none()
    if mod is None:
        return None
    for name in ("VerificationError", "CudaError", "NvmlError", "CoreError"):
        cls = getattr(mod, name, None)
        if isinstance(cls, type) and isinstance(exc, cls):
            return name
    return None
