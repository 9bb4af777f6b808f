"""The HBM roof at a given read:write mix, from the envelope a calibration measured.

HBM moves reads and writes over one bus that turns around between them, so a kernel that reads as
much as it writes (a copy) reaches less than one that only reads or only writes. The calibration's
``hbm_mix`` entry holds the envelope: for read:write byte ratios from read-only to write-only
(``{"1:0": 4.70, "4:1": ..., "1:1": 4.30, ..., "0:1": 4.70}`` in TB/s), the best verified kernel of
exactly that ratio. :func:`mix_bandwidth` reads it at a task's own ratio.

Between two measured ratios the roof is interpolated linearly in the read fraction
``reads / (reads + writes)``: the value moves monotonically from one point to the next and never
leaves the interval between them, so the helper invents no bump and no dip the card did not show.
Outside the measured ratios it is the nearest end point. Pure arithmetic.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

__all__ = ["parse_ratio", "read_fraction", "envelope_points", "mix_bandwidth"]


def parse_ratio(label: str) -> tuple[float, float]:
    """``"4:1"`` → (4.0, 1.0); ValueError for anything that is not two non-negative parts."""
    try:
        r, w = (float(x) for x in str(label).split(":"))
    except ValueError:
        raise ValueError(f"read:write ratio {label!r} is not of the form 'R:W'") from None
    if not (math.isfinite(r) and math.isfinite(w)) or r < 0 or w < 0 or r + w == 0:
        raise ValueError(f"read:write ratio {label!r} needs non-negative parts, not both zero")
    return r, w


def read_fraction(read_bytes: float, write_bytes: float) -> float:
    """The share of the traffic that is read, in [0, 1]."""
    if read_bytes < 0 or write_bytes < 0 or not math.isfinite(read_bytes + write_bytes):
        raise ValueError(f"read and write bytes must be finite and non-negative, got {read_bytes}, {write_bytes}")
    if read_bytes + write_bytes == 0:
        raise ValueError("no traffic: read and write bytes are both zero, so no read:write ratio exists")
    return read_bytes / (read_bytes + write_bytes)


def envelope_points(envelope: Mapping[str, Any]) -> list[tuple[float, float]]:
    """(read fraction, TB/s) of every usable point, by read fraction; accepts the envelope mapping or
    a calibration entry holding it under ``points``. Points that are not finite positive figures are
    left out; two labels of one fraction (``"2:1"`` and ``"4:2"``) keep the faster."""
    if isinstance(envelope.get("points"), Mapping):
        envelope = envelope["points"]
    best: dict[float, float] = {}
    for label, value in envelope.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            continue
        f = read_fraction(*parse_ratio(label))
        best[f] = max(best.get(f, 0.0), float(value))
    return sorted(best.items())


def mix_bandwidth(envelope: Mapping[str, Any], read_bytes: float, write_bytes: float) -> float:
    """The envelope's bandwidth (TB/s) at the read:write ratio ``read_bytes : write_bytes``.

    Linear in the read fraction between the two nearest measured ratios, the nearest end point
    outside them. Raises ValueError for an envelope with no usable point or for no traffic."""
    points = envelope_points(envelope)
    if not points:
        raise ValueError("the read:write envelope has no measured point")
    f = read_fraction(read_bytes, write_bytes)
    if f <= points[0][0]:
        return points[0][1]
    if f >= points[-1][0]:
        return points[-1][1]
    for (f0, v0), (f1, v1) in zip(points, points[1:]):
        if f0 <= f <= f1:
            return v0 + (v1 - v0) * (f - f0) / (f1 - f0)
    raise AssertionError("unreachable: f lies between the first and last point")  # pragma: no cover
