"""The one way results say when they were made (UTC, ISO 8601, to the second), and how old this
process is (rank 0)."""
from __future__ import annotations

import datetime as _dt
import os as _os


def utc_now() -> str:
    """``2026-12-01T20:37:17+00:00``: what every result's ``date`` holds."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def process_age_s() -> float | None:
    """Seconds since this process started (Linux ``/proc``, to the clock tick), or None elsewhere:
    what ``--verbose`` counts the interpreter's and the imports' start-up from."""
    try:
        with open("/proc/self/stat") as f:  # the name in parentheses may hold spaces: split after it
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / _os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None
