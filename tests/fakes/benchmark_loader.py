"""A benchmark script (benchmarks/ is scripts, not a package) loaded as a module, for its tests."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(relative: str, name: str | None = None) -> ModuleType:
    """``benchmarks/<relative>`` as a module named ``name`` (default: its stem), registered in
    ``sys.modules`` while it runs (dataclasses look their module up while a class is built)."""
    path = BENCHMARKS / relative
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
