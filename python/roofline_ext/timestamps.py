"""The one way results say when they were made: UTC, ISO 8601, to the second (rank 0)."""
from __future__ import annotations

import datetime as _dt


def utc_now() -> str:
    """``2026-12-01T20:37:17+00:00``: what every result's ``date`` holds."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
