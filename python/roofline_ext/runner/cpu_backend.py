"""The CPU side of a counting worker: nothing to set up, and memory checked after every task.

A counting worker gets one task and exits, unless the pool reuses counting workers
(``Pool(reuse_counting=True)``); then the process state a task could change is compared in
:mod:`roofline_ext.runner.process_state`. What is left here is
memory: a task that keeps large tensors alive (in a cache of some module, say) would make every
later task in the worker run with less, so a worker that has grown by more than
:data:`GROWTH_LIMIT_BYTES` since it started is replaced.
"""
from __future__ import annotations

import gc
from typing import Any

GROWTH_LIMIT_BYTES = 1 << 30
_start_rss: dict[Any, int] = {}


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            import os

            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):  # not Linux: no check
        return 0


def setup(device: Any) -> dict[str, Any]:
    _start_rss[device] = _rss_bytes()
    return {"worker": "counting", "rss_bytes": _start_rss[device]}


def cleanup(device: Any) -> list[str]:
    gc.collect()
    grown = _rss_bytes() - _start_rss.get(device, 0)
    if grown > GROWTH_LIMIT_BYTES:
        return [f"the worker grew by {grown / 2**20:.0f} MiB while it ran its tasks"]
    return []
