"""``analyze TASK --ops``: where the time goes, as text.

Reads the JSON-shaped result (``analyze_task(..., per_op=True)`` or ``--json`` output), so the same
table can be printed from a saved file. Four blocks: the three bounds per roof (the unfused bound
said to be no floor); the ops with the largest floors (with ``--time``: the ops whose kernels lose
the most time above their floors, first); the modules; and, timed, the kernels that lose most.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..model.floors import ROOF_NAMES

__all__ = ["ops_report", "TOP"]

#: Rows per block by default.
TOP = 15


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v:.4g}"


def _mb(v: Any) -> str:
    return "-" if v is None else f"{v / 1e6:.4g}"


def _table(rows: Sequence[Sequence[str]], left: int = 1) -> list[str]:
    """Columns padded; the first ``left`` columns left-aligned, the rest right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
        out.append("  " + "  ".join(cells).rstrip())
    return out


def _roof_of(result: Mapping[str, Any]) -> str:
    """The roof the tables rank by: measured where there is one, else the primary."""
    roofs = result.get("roofs") or {}
    return "measured" if roofs.get("measured") else str(result.get("primary_roof") or "datasheet")


def _module(name: str) -> str:
    return name or "(model)"


def _bounds(result: Mapping[str, Any]) -> list[str]:
    unfused = result.get("unfused") or {}
    roofs = unfused.get("roofs") or {}
    rows = [("roof", "fused floor ms", "unfused bound ms", "fusion headroom")]
    for name in ROOF_NAMES:
        b = roofs.get(name)
        if b:
            h = b.get("fusion_headroom")
            rows.append((name, _ms(b["fused_floor_ms"]), _ms(b["unfused_bound_ms"]), "-" if h is None else f"{h:.3g}x"))
    lines = ["bounds (the fused floor is the floor; the unfused bound, the sum of each op's own floor, is "
             "NOT a floor: it is what perfect kernels reach without fusing anything)"]
    if len(rows) > 1:
        lines += _table(rows)
    compulsory = result.get("bytes")
    lines.append(f"  traffic: unfused {_mb(unfused.get('bytes'))} MB (read {_mb(unfused.get('read_bytes'))}, "
                 f"written {_mb(unfused.get('write_bytes'))}) against {_mb(compulsory)} MB compulsory")
    return lines


def _op_rows(ops: Sequence[Mapping[str, Any]], roof: str, timed: bool, top: int) -> list[str]:
    header = ["#", "op", "module", "GFLOP", "SIMT GFLOP", "MB read", "MB written", f"floor ms ({roof})", "limit"]
    if timed:
        header += ["kernels", "kernel ms", "kernel floor ms", "lost ms", "% of floor"]
    rows = [header]
    for o in ops[:top]:
        f = (o.get("floors_ms") or {}).get(roof)
        calls = f" x{o['calls']}" if o.get("calls", 1) != 1 else ""
        row = [str(o["index"]), f"{o['op']}{calls}", _module(o["module"]), f"{o['flops'] / 1e9:.4g}",
               f"{o['simt_flops'] / 1e9:.4g}", _mb(o["read_bytes"]), _mb(o["write_bytes"]), _ms(f),
               str((o.get("limiters") or {}).get(roof) or "-")]
        if timed:
            kf = (o.get("kernel_floors_ms") or {}).get(roof)
            k = o.get("kernel_ms")
            row += [str(len(o.get("kernels") or ())), _ms(k), _ms(kf),
                    _ms(k - kf if k is not None and kf is not None else None),
                    "-" if not (k and kf) else f"{kf / k:.0%}"]
        rows.append(row)
    return _table(rows, left=3)


def _modules(ops: Sequence[Mapping[str, Any]], roof: str, timed: bool, top: int) -> list[str]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for o in ops:
        groups.setdefault(o["module"], []).append(o)
    total = sum((o.get("floors_ms") or {}).get(roof) or 0.0 for o in ops) or 1.0

    def floor_sum(g):
        return sum((o.get("floors_ms") or {}).get(roof) or 0.0 for o in g)

    ranked = sorted(groups.items(), key=lambda kv: -floor_sum(kv[1]))
    header = ["module", "ops", f"floors ms ({roof})", "share"]
    if timed:
        header += ["kernel ms"]
    rows = [header]
    for name, g in ranked[:top]:
        row = [_module(name), str(len(g)), _ms(floor_sum(g)), f"{floor_sum(g) / total:.0%}"]
        if timed:
            row.append(_ms(sum(o.get("kernel_ms") or 0.0 for o in g)))
        rows.append(row)
    return _table(rows)


def _kernels(result: Mapping[str, Any], ops: Sequence[Mapping[str, Any]], top: int) -> list[str]:
    ks = [(k, o) for o in ops for k in o.get("kernels") or ()]
    ks.sort(key=lambda ko: -(ko[0].get("lost_ms") if ko[0].get("lost_ms") is not None else ko[0]["ms"]))
    prof = result.get("kernel_profile") or {}
    lines = [f"kernels ({prof.get('kernels', len(ks))} profiled, {_ms(prof.get('kernel_sum_ms'))} ms in all "
             f"against {_ms(result.get('t_ref_ms'))} ms event-timed median; memory rule: "
             f"{prof.get('rule', '-')})"]
    rows = [["kernel", "op", "module", "ms", "lost ms"]]
    for k, o in ks[:top]:
        name = k["name"] if len(k["name"]) <= 60 else k["name"][:57] + "..."
        rows.append([name, f"#{o['index']} {o['op']}", _module(o["module"]), _ms(k["ms"]), _ms(k.get("lost_ms"))])
    lines += _table(rows, left=3)
    for note in prof.get("notes") or ():
        lines.append(f"  note: {note}")
    return lines


def ops_report(result: Mapping[str, Any], top: int = TOP) -> str:
    """The per-op report of one analysed task (see module docstring)."""
    ops = list(result.get("ops") or ())
    if not ops:
        return "no per-op results (analyze with --ops)"
    roof = _roof_of(result)
    timed = any(o.get("kernel_ms") is not None for o in ops)
    lines = _bounds(result) + [""]
    if timed:
        def lost(o):
            kf = (o.get("kernel_floors_ms") or {}).get(roof)
            return (o["kernel_ms"] - (kf or 0.0)) if o.get("kernel_ms") is not None else float("-inf")
        ranked = sorted(ops, key=lambda o: (-lost(o), o["index"]))
        lines.append(f"ops whose kernels lose the most time above their floor ({len(ops)} ops; roof: {roof})")
    else:
        ranked = sorted(ops, key=lambda o: (-((o.get("floors_ms") or {}).get(roof) or 0.0), o["index"]))
        lines.append(f"ops with the largest floors ({len(ops)} ops; roof: {roof})")
    lines += _op_rows(ranked, roof, timed, top) + ["", "by module"] + _modules(ops, roof, timed, top)
    if timed:
        lines += [""] + _kernels(result, ops, top)
    return "\n".join(lines)
