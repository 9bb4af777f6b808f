"""How far below its expectation each check metric may fall before it is a WARN (twice that: FAIL).

Defaults (docs/check.md): HBM and FP32 5% (their burst figures repeat within 1%), BF16 7% (a burst at
the power cap moves a few percent with temperature), the host link 10% (it shares the root complex
with whatever else the host does). ``--tolerance hbm=0.03,bf16=0.1`` overrides; group names stand
for several metrics: ``hbm`` (read and copy), ``compute`` (fp32, bf16), ``hostlink`` (h2d, d2h),
``all``.

Each tolerance also sets the metric's **spread bound** (``spread_bound``): half of it. A figure is
the median of 10 timed launches, whose standard error is about 0.4 x their CV; at a CV of t/2 that
is 0.2 t, small against a PASS band t wide, while a larger spread leaves the median's side of the
band to chance. Idle, every check metric's CV is far below its bound (0.07-0.54% on an H200,
benchmarks/results/check-h200-2026-12-01.json, against bounds of 2.5-5%).
"""
from __future__ import annotations

from typing import Iterable, Mapping

from ..errors import UserError
from ..peaks.reference import CHECK_METRICS

DEFAULT_TOLERANCES: dict[str, float] = {
    "hbm_read": 0.05, "hbm_copy": 0.05, "fp32": 0.05, "bf16": 0.07, "h2d": 0.10, "d2h": 0.10,
}
GROUPS: dict[str, tuple[str, ...]] = {
    "hbm": ("hbm_read", "hbm_copy"), "compute": ("fp32", "bf16"), "hostlink": ("h2d", "d2h"),
    "all": tuple(CHECK_METRICS),
}


#: Spread bound as a fraction of the tolerance (see the module's docstring).
SPREAD_FRACTION = 0.5


def spread_bound(tolerance: float) -> float:
    """The largest CV over the timed launches a verdict at ``tolerance`` may rest on."""
    return SPREAD_FRACTION * tolerance


def _parse_one(item: str) -> tuple[tuple[str, ...], float]:
    key, sep, text = item.partition("=")
    key = key.strip().lower()
    if not sep:
        raise UserError(f"--tolerance takes METRIC=FRACTION (e.g. hbm=0.05), not {item!r}")
    keys = GROUPS.get(key) or ((key,) if key in CHECK_METRICS else None)
    if keys is None:
        known = ", ".join(list(CHECK_METRICS) + list(GROUPS))
        raise UserError(f"--tolerance: unknown metric {key!r}; known: {known}")
    try:
        frac = float(text.strip().rstrip("%")) / (100.0 if text.strip().endswith("%") else 1.0)
    except ValueError:
        raise UserError(f"--tolerance {key}: {text!r} is not a number") from None
    if not 0 < frac < 0.5:
        raise UserError(f"--tolerance {key}: {text} is not a fraction between 0 and 0.5 (e.g. 0.05 or 5%)")
    return keys, frac


def parse_tolerances(specs: Iterable[str] | None, base: Mapping[str, float] | None = None) -> dict[str, float]:
    """The defaults with each ``METRIC=FRACTION`` (comma-separated or repeated) applied in order."""
    out = dict(base or DEFAULT_TOLERANCES)
    for spec in specs or ():
        for item in str(spec).split(","):
            if item.strip():
                keys, frac = _parse_one(item)
                out.update({k: frac for k in keys})
    return out
