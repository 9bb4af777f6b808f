"""The HBM roof at a given read:write mix, from the envelope a calibration measured.

HBM moves reads and writes over one bus that turns around between them, so a kernel that reads as
much as it writes (a copy) reaches less than one that only reads or only writes. The calibration's
``hbm_mix`` entry holds the envelope: for read:write byte ratios from read-only to write-only
(``{"1:0": 4.70, "4:1": ..., "1:1": 4.30, ..., "0:1": 4.70}`` in TB/s), the best verified kernel of
exactly that ratio. :func:`mix_bandwidth` reads it at a task's own ratio.

Between two measured ratios the roof is interpolated **linearly in time per byte** (1 / TB/s)
against the read fraction ``reads / (reads + writes)``. That is what running the two measured
kernels one after the other achieves: a task of read fraction f between measured fractions f0 < f1
can move a share (f1 - f) / (f1 - f0) of its bytes at f0's rate and the rest at f1's, and its time
per byte is then exactly that linear mix. So the interpolated roof is a rate the card demonstrably
reaches (the measured roof never promises more than a measured kernel delivered), it lies between
the two neighbours (never above the faster, never below the slower: a harmonic mean of them) and it
moves monotonically from one to the other, inventing no bump and no dip the card did not show.
Outside the measured ratios it is the nearest end point. Pure arithmetic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["parse_ratio", "read_fraction", "ratio_label", "envelope_points", "mix_bandwidth",
           "mix_roof", "MixRoof", "INTERPOLATION"]

#: How a ratio between two measured ones is read off the envelope (said in every result).
INTERPOLATION = "linear in time per byte between the two nearest measured ratios"


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
    return [(f, v) for f, v, _ in _labelled_points(envelope)]


def ratio_label(read_bytes: float, write_bytes: float) -> str:
    """A task's read:write ratio in words, the smaller side 1: ``"1:1"``, ``"3:1"``, ``"1:2.5"``,
    ``"1:0"`` (read only), ``"0:1"`` (write only)."""
    read_fraction(read_bytes, write_bytes)  # the same checks
    if write_bytes == 0:
        return "1:0"
    if read_bytes == 0:
        return "0:1"
    if read_bytes >= write_bytes:
        return f"{read_bytes / write_bytes:.3g}:1"
    return f"1:{write_bytes / read_bytes:.3g}"


@dataclass(frozen=True)
class MixRoof:
    """The envelope read at one task's ratio: the figure and exactly which points gave it."""

    ratio: str
    read_fraction: float
    tbps: float
    # "point" (a measured ratio), "interpolated" (between ``points``), "end" (outside the measured
    # ratios: the nearest end point).
    rule: str
    # The envelope points used, {"R:W": TB/s}: one for "point"/"end", the two neighbours otherwise.
    points: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "read_fraction": self.read_fraction, "tbps": self.tbps,
                "rule": self.rule, "points": dict(self.points),
                "interpolation": INTERPOLATION if self.rule == "interpolated" else None}


def _labelled_points(envelope: Mapping[str, Any]) -> list[tuple[float, float, str]]:
    """(read fraction, TB/s, label) of every usable point, as :func:`envelope_points` keeps them."""
    if isinstance(envelope.get("points"), Mapping):
        envelope = envelope["points"]
    best: dict[float, tuple[float, str]] = {}
    for label, value in envelope.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            continue
        f = read_fraction(*parse_ratio(label))
        if f not in best or float(value) > best[f][0]:
            best[f] = (float(value), str(label))
    return sorted((f, v, label) for f, (v, label) in best.items())


def mix_roof(envelope: Mapping[str, Any], read_bytes: float, write_bytes: float) -> MixRoof:
    """The envelope's bandwidth at the ratio ``read_bytes : write_bytes``, with the points used.

    Linear in time per byte between the two nearest measured ratios (see the module's docstring),
    the nearest end point outside them. Raises ValueError for an envelope with no usable point or
    for no traffic."""
    points = _labelled_points(envelope)
    if not points:
        raise ValueError("the read:write envelope has no measured point")
    f = read_fraction(read_bytes, write_bytes)
    label = ratio_label(read_bytes, write_bytes)
    for fp, v, name in points:
        if math.isclose(f, fp, rel_tol=0, abs_tol=1e-12):
            return MixRoof(label, f, v, "point", {name: v})
    if f < points[0][0]:
        return MixRoof(label, f, points[0][1], "end", {points[0][2]: points[0][1]})
    if f > points[-1][0]:
        return MixRoof(label, f, points[-1][1], "end", {points[-1][2]: points[-1][1]})
    for (f0, v0, n0), (f1, v1, n1) in zip(points, points[1:]):
        if f0 < f < f1:
            w = (f - f0) / (f1 - f0)
            tbps = 1.0 / ((1.0 - w) / v0 + w / v1)
            # Rounding must not carry the harmonic mean outside its neighbours.
            tbps = min(max(tbps, min(v0, v1)), max(v0, v1))
            return MixRoof(label, f, tbps, "interpolated", {n0: v0, n1: v1})
    raise AssertionError("unreachable: f lies between the first and last point")  # pragma: no cover


def mix_bandwidth(envelope: Mapping[str, Any], read_bytes: float, write_bytes: float) -> float:
    """The envelope's bandwidth (TB/s) at the read:write ratio ``read_bytes : write_bytes``
    (:func:`mix_roof`'s figure). Raises ValueError for an envelope with no usable point or for no
    traffic."""
    return mix_roof(envelope, read_bytes, write_bytes).tbps
