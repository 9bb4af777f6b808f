"""The HTML report's building blocks, shared by its sections (``html.py``, ``html_energy.py``):
one input file's documents (:class:`Source`), the escaping and number cells every table uses (each
number names the file and JSON pointer it came from), and the inline SVG of a chart. Apart from the
page so that a section module can use them without importing the page (no import cycle)."""
from __future__ import annotations

import html
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..peaks.datasheet import lookup, normalize_name


@dataclass(frozen=True)
class Source:
    """One input file and the roofline-ext documents found in it, each with its JSON pointer."""

    label: str  # how data-src names the file: its index and base name, "0:check.json"
    path: str
    calibrations: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    checks: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    fleets: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    analyses: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    energies: tuple[tuple[str, Mapping[str, Any]], ...] = ()  # benchmarks/energy_roofline.py's JSON


# --- small HTML helpers ---------------------------------------------------------------------------

def esc(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def fmt(v: Any) -> str:
    """How the page prints a number: four significant figures, as the CLI tables do."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "-"
    return f"{v:.4g}"


def pct(v: Any) -> str:
    return f"{v:.1%}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def _sourced(tag: str, src: str, pointer: str, value: Any, text: str | None, scale: float | None) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return f'<{tag} class="n">-</{tag}>'
    shown = (fmt(value) if scale is None else fmt(value * scale)) if text is None else text
    scaled = "" if scale is None else f' data-scale="{esc(repr(scale))}"'
    return (f'<{tag} class="n" data-src="{esc(src)}#{esc(pointer)}" data-value="{esc(repr(value))}"{scaled}>'
            f"{esc(shown)}</{tag}>")


def num(src: str, pointer: str, value: Any, text: str | None = None, scale: float | None = None) -> str:
    """A numeric cell that names where its number came from (see the module docstring); ``scale``
    prints ``value × scale`` (J as pJ) and says so."""
    return _sourced("td", src, pointer, value, text, scale)


def num_span(src: str, pointer: str, value: Any, text: str | None = None, scale: float | None = None) -> str:
    """:func:`num` inside a sentence."""
    return _sourced("span", src, pointer, value, text, scale)


def cell(text: Any) -> str:
    return f"<td>{esc(text)}</td>"


def badge(verdict: Any) -> str:
    v = esc(verdict)
    return f'<span class="v {v}" data-verdict="{v}">{v}</span>'


def table(headers: Sequence[str], rows: Iterable[str], cls: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(f"<tr>{r}</tr>" for r in rows)
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def json_pointer(*parts: Any) -> str:
    """An RFC 6901 JSON pointer to the value at ``parts`` (each escaped): "/tasks/0/t_ref_ms"."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


# --- charts -----------------------------------------------------------------------------------------

def same_part(a: str | None, b: str | None) -> bool:
    if not a or not b:
        return False
    if normalize_name(a) == normalize_name(b):
        return True
    sa, sb = lookup(a), lookup(b)
    return sa is not None and sa is sb


def _svg_inline(svg: str, prefix: str) -> str:
    """matplotlib's SVG as an element of the page: no XML prolog, ids unique across charts."""
    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)
    return re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)


def render_svg(draw: Any, prefix: str) -> str:
    """Run ``draw(path)`` (a charts.py function writing .svg) and return the SVG for the page."""
    import matplotlib

    with tempfile.TemporaryDirectory(prefix="roofline-report-") as tmp:
        path = Path(tmp) / "chart.svg"
        # Text stays text (smaller, and the numbers on the chart can be read off the page); a fixed
        # hash salt makes the same inputs give the same file.
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "roofline-ext"}):
            draw(path)
        return _svg_inline(path.read_text(encoding="utf-8"), prefix)
