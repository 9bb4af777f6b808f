"""The one-sentence summary of a roofline result (``describe``): every roof, the fractions reached,
and what a time below a floor means."""
from __future__ import annotations

from typing import Any, Mapping

from ..errors import UserError
from ..model.floors import IMPOSSIBLE_MESSAGE, ROOF_NAMES
from ..peaks.datasheet import DatasheetPeaks
from ..peaks.units import UNIT

# A fraction this far above 1 is a real violation, not floating-point noise.
_EPS = 1e-9


def _fmt_ms(ms: float) -> str:
    # Three significant digits ("1.00", "0.412", "12.3"), never an exponent for large times.
    if ms >= 100:
        return f"{ms:.0f}"
    text = f"{ms:#.3g}"
    return f"{ms:.2e}" if "e" in text else text


def _fmt_pct(fraction: float) -> str:
    # Near 100%, one decimal keeps "100%" from hiding a floor beaten by 0.3%.
    if 0.995 <= fraction < 1.005 and fraction != 1:
        return f"{fraction * 100:.1f}%"
    return f"{fraction:.0%}"


_ROOF_PHRASES = {"datasheet": "by the datasheet", "derived": "derived from clocks", "measured": "measured"}


def describe(r: Mapping[str, Any] | None, gpu: str | DatasheetPeaks | None = None, *,
             why_none: str | None = None) -> str:
    """One readable sentence with every roof of a ``roofline()`` result.

    E.g. "Roofline on NVIDIA H200: memory-bound (intensity 0.25 FLOP/byte); floor 0.412 ms by the
    datasheet, 0.438 ms measured; PyTorch reaches 71% / 76%, yours 92% / 98%." A time below a floor
    adds "... faster than the floor of the reference's operations, so an algebraic or structural
    shortcut was taken, or the FLOP/byte counts or the peaks are wrong". ``gpu`` names the GPU in
    the sentence (default: the name the result was computed for). ``why_none``: why ``r`` is None,
    when the caller knows (a task that moves no bytes is not a GPU missing from the table).
    """
    if gpu is not None and not isinstance(gpu, (str, DatasheetPeaks)):
        raise UserError(f"describe(): gpu must be a name or DatasheetPeaks, not {type(gpu).__name__}")
    if r is not None and not isinstance(r, Mapping):
        raise UserError(f"describe() takes a roofline() result (a mapping) or None, not {type(r).__name__}")
    try:
        return _describe(r, gpu, why_none)
    except (KeyError, TypeError, AttributeError) as exc:  # a mapping that is no roofline() result
        raise UserError(f"describe(): not a roofline() result ({type(exc).__name__}: {exc})") from None


def _describe(r: Mapping[str, Any] | None, gpu: str | DatasheetPeaks | None, why_none: str | None) -> str:
    name = gpu.full_name if isinstance(gpu, DatasheetPeaks) else gpu
    if r is None:
        who = f" for {name}" if name else ""
        why = why_none or "the GPU is not in the datasheet table and no derived or measured peaks were given"
        return f"No roofline{who}: {why}."
    name = name or r.get("gpu") or "this GPU"
    if "roofs" not in r:
        return _describe_seed(r, name)

    roofs = [(label, r["roofs"][label]) for label in ROOF_NAMES if r["roofs"].get(label)]
    top = r["roofs"][r["primary_roof"]]
    bound = f"{top['bound']}-bound"
    if top["limiter"] == "compute":
        bound += f" on {UNIT[top['compute_unit']].long if top['compute_unit'] in UNIT else top['compute_unit']}"
    elif top["limiter"] == "simt":
        bound += f" on {UNIT[top['simt_unit']].long} (non-tensor FLOPs)"
    aside = []
    others = [label for label, roof in roofs if roof["bound"] != top["bound"]]
    if others:
        other_bound = "memory" if top["bound"] == "compute" else "compute"
        plural = "s" if len(others) > 1 else ""
        aside.append(f"{other_bound}-bound on the {' and '.join(others)} roof{plural}")
    aside.append(f"intensity {r['arithmetic_intensity']:.3g} FLOP/byte")

    floors = ", ".join(f"{_fmt_ms(roof['t_min_ms'])} ms {_ROOF_PHRASES[label]}" for label, roof in roofs)
    s = f"Roofline on {name}: {bound} ({'; '.join(aside)}); floor {floors}"

    parts = []
    for who, key in (("PyTorch reaches", "ref_fraction"), ("yours", "new_fraction")):
        fractions = [roof[key] for _, roof in roofs]
        if any(f is not None for f in fractions):
            parts.append(f"{who} " + " / ".join(_fmt_pct(f) if f is not None else "n/a" for f in fractions))
    if parts:
        s += "; " + ", ".join(parts)

    beaten = []
    if any(roof["ref_impossible"] for _, roof in roofs):
        beaten.append("PyTorch")
    if any(roof["new_impossible"] for _, roof in roofs):
        beaten.append("yours")
    if beaten:
        where = [label for label, roof in roofs if roof["impossible"]]
        subject = " and ".join(beaten) + (" are" if len(beaten) > 1 else " is")
        s += f" — {subject} {IMPOSSIBLE_MESSAGE} (on the {' and '.join(where)} roof{'s' if len(where) > 1 else ''})"
    return s + "."


def _describe_seed(r: Mapping[str, Any], name: str) -> str:
    # A dict shaped like the seed's (no "roofs"): say what the seed said, flagging >100% the same way.
    s = (f"Roofline on {name}: {r['bound']}-bound (intensity {r['arithmetic_intensity']:.3g} "
         f"FLOP/byte); floor {_fmt_ms(r['t_min_ms'])} ms")
    fractions = []
    if r.get("ref_roofline_frac") is not None:
        fractions.append(("PyTorch reaches", r["ref_roofline_frac"]))
    if r.get("roofline_frac") is not None:
        fractions.append(("yours", r["roofline_frac"]))
    if fractions:
        s += "; " + ", ".join(f"{who} {_fmt_pct(f)}" for who, f in fractions)
    if any(f > 1 + _EPS for _, f in fractions):
        s += f" — {IMPOSSIBLE_MESSAGE}"
    return s + "."
