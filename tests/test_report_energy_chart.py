"""The energy roofline chart's layout (``report/energy_chart.py``) on a batch shaped like the H200's
KernelBench run of 2026-12-02 (s14): tasks from almost no FLOPs per byte to GEMMs, KernelBench's long
names crowded at a few intensities, every cost from one calibration. Its x ticks read as numbers,
its legend says the calibration once and covers no point, and every name is inside the figure and
on no other name. The costs and tasks here are made up (the calibration's figures, rounded)."""
from __future__ import annotations

import math
import re

import pytest

from roofline_ext.model.energy import EnergyCost, EnergyCosts, energy_floor, task_energy

from fakes.energy import issue_costs, record

pytest.importorskip("matplotlib")

from roofline_ext.report.charts import literal_text  # noqa: E402
from roofline_ext.report.energy_chart import MAX_NAMED, NAME_CHARS, WIDE_X, energy_figure, plot_energy_roofline  # noqa: E402

CALIBRATION = "calibration 2026-12-02T19:02:26+00:00"
# KernelBench's names as long as they come: level and number, then the operators.
LONG = "ConvTranspose3d_Multiply_Max_GlobalAvgPool_Clamp"


def _costs(suffixes: tuple[str, ...] = (CALIBRATION,)) -> EnergyCosts:
    """The s14 calibration's costs (pJ, rounded), each source ending in one of ``suffixes`` in turn."""
    pj = {"fp32": (3.52, "roofline_ext simt fp32"), "bf16": (0.665, "roofline_ext wgmma bf16"),
          "fp8": (0.337, "roofline_ext wgmma fp8"), "hbm_read": (115.0, "torch sum 1 GiB float32"),
          "hbm_write": (63.0, "torch fill_ 1 GiB float32"), "hbm_copy": (113.0, "torch copy_ 1 GiB float32")}
    return EnergyCosts({k: EnergyCost(k, e * 1e-12, 0.0, f"{src} ({suffixes[i % len(suffixes)]})")
                        for i, (k, (e, src)) in enumerate(pj.items())}, idle_w=131.0)


def _batch(costs: EnergyCosts) -> list:
    """Forty tasks: one of a few FLOPs on a GiB (intensity ~1e-11, far left), a crowd of elementwise
    ones at 0.1-0.3 FLOP/byte, a crowd of convolutions near 300 and one GEMM at the far right; the
    named ones (the ends of the fraction of the floor) fall in each crowd."""
    shapes = [(10.0, 1e9, 1.3)]  # (flops, bytes, measured over floor)
    shapes += [(1e8 * (1 + i / 10), 1e9, 1.2 + i / 100) for i in range(15)]
    shapes += [(3e11 * (1 + i / 20), 1e9, 60 + 10 * i) for i in range(20)]
    shapes += [(1e13 * (1 + i / 5), 1e9, 2.0 + i) for i in range(4)]
    tasks = []
    for i, (flops, nbytes, over) in enumerate(shapes):
        floor = energy_floor(costs, flops=flops, nbytes=nbytes, dtype="bf16")
        tasks.append(task_energy(floor, record(floor.e_min_j * over), label=f"level{1 + i % 3}/{i}_{LONG}"))
    return tasks


@pytest.fixture(scope="module")
def drawn():
    """The batch's figure, drawn, with its axes and renderer."""
    costs = _costs()
    tasks = _batch(costs)
    with literal_text():
        fig = energy_figure(costs, title="40 references against their energy floors",
                            subtitle=f"costs of the {CALIBRATION}", tasks=tasks)
        fig.canvas.draw()
        yield fig, fig.axes[0], fig.canvas.get_renderer(), tasks


def _x_labels(ax) -> list[str]:
    lo, hi = ax.get_xlim()
    return [t.get_text() for t in ax.get_xticklabels() if t.get_text() and lo <= t.get_position()[0] <= hi]


def test_a_wide_intensity_axis_is_labelled_at_powers_of_ten(drawn):
    _, ax, _, _ = drawn
    lo, hi = ax.get_xlim()
    assert hi / lo > WIDE_X  # ~1e-12 to ~1e5: the case whose powers of two read "3.63798e-12"
    labels = _x_labels(ax)
    assert len(labels) >= 4 and "1" in labels, labels
    for label in labels:
        assert len(label) <= 6, labels
        assert math.log10(float(label)) == pytest.approx(round(math.log10(float(label)))), labels
    assert not [t for t in ax.get_xticklabels(minor=True) if t.get_text()]  # the minor decades unlabelled


def test_a_narrow_intensity_axis_keeps_powers_of_two_labelled_plainly():
    costs = issue_costs()  # one ridge (~133 FLOP/byte) and nothing else: a few powers of two
    with literal_text():
        fig = energy_figure(costs, title="t", tasks=[])
        fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert hi / lo <= WIDE_X
    labels = _x_labels(ax)
    assert len(labels) >= 4, labels
    for label in labels:
        value = 1 / float(label[2:]) if label.startswith("1/") else float(label)
        assert "e" not in label and math.log2(value) == round(math.log2(value)), labels


def _legend_texts(ax) -> tuple[list[str], str]:
    legend = ax.get_legend()
    # An entry's source may wrap onto lines of its own: read it as one line.
    return [" ".join(t.get_text().split()) for t in legend.get_texts()], legend.get_title().get_text()


def test_the_calibration_every_cost_shares_is_said_once_not_per_entry(drawn):
    _, ax, _, _ = drawn
    entries, title = _legend_texts(ax)
    assert not [e for e in entries if "calibration" in e], entries
    assert "torch sum 1 GiB float32" in " ".join(entries)  # the kernel of each cost stays
    assert CALIBRATION.split()[-1] in title.replace("\n", " ")
    # Sources from different calibrations: each keeps its own, and the legend has no title.
    with literal_text():
        ax2 = energy_figure(_costs(("calibration A", "calibration B")), title="t").axes[0]
    entries, title = _legend_texts(ax2)
    assert sum("(calibration A)" in e for e in entries) == 3 and sum("(calibration B)" in e for e in entries) == 3
    assert title == ""


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _inside(inner, outer) -> bool:
    return outer.x0 <= inner.x0 and inner.x1 <= outer.x1 and outer.y0 <= inner.y0 and inner.y1 <= outer.y1


def test_the_legend_is_beside_the_axes_inside_the_figure(drawn):
    fig, ax, renderer, _ = drawn
    legend = ax.get_legend().get_window_extent(renderer)
    assert _inside(legend, fig.bbox)
    assert not _overlap(legend, ax.get_window_extent(renderer))  # so on no point and no line


def test_every_name_is_inside_the_figure_and_on_no_other_name(drawn):
    fig, ax, renderer, _ = drawn
    names = ax.texts
    assert len(names) == MAX_NAMED
    boxes = [n.get_window_extent(renderer) for n in names]
    frame = ax.get_window_extent(renderer)
    for n, box in zip(names, boxes):
        assert _inside(box, fig.bbox) and _inside(box, frame), n.get_text()
    clashes = [(names[i].get_text(), names[j].get_text()) for i in range(len(boxes)) for j in range(i)
               if _overlap(boxes[i], boxes[j])]
    assert not clashes


def test_a_name_in_the_right_half_is_left_of_its_point(drawn):
    _, ax, renderer, _ = drawn
    frame = ax.get_window_extent(renderer)
    right = 0
    for n in ax.texts:
        x, _ = ax.transData.transform(n.xy)
        if x > frame.x0 + frame.width / 2:
            right += 1
            assert n.get_window_extent(renderer).x1 < x, n.get_text()
    assert right >= 6  # the convolutions' crowd and the GEMMs


def test_long_names_are_cut_keeping_their_level_and_number(drawn):
    _, ax, _, tasks = drawn
    for n in ax.texts:
        name, _, ratio = n.get_text().partition(": ")
        assert re.match(r"level\d/\d+_", name) and len(name) <= NAME_CHARS, name
        assert name.endswith("\u2026") and LONG.startswith(name[name.index("_") + 1:-1])
        assert re.fullmatch(r"[\d.]+x its floor", ratio) and "e+" not in ratio, ratio
    labels = {t.label for t in tasks}
    assert all(any(lab.startswith(n.get_text().split("\u2026")[0]) for lab in labels) for n in ax.texts)


def test_a_variant_keeps_its_tag_when_its_name_is_cut(tmp_path):
    costs = _costs()
    floor = energy_floor(costs, flops=1e12, nbytes=1e9, dtype="bf16")
    tasks = [task_energy(floor, record(floor.e_min_j * 2), label=f"level2/96_{LONG}"),
             task_energy(floor, record(floor.e_min_j * 3), label=f"level2/96_{LONG} (yours)")]
    text = plot_energy_roofline(costs, tmp_path / "e.svg", title="t", tasks=tasks).read_text()
    assert "level2/96_ConvTranspose3d_Multi\u2026: 2x its floor" in text
    assert "level2/96_ConvTranspose3d_Multi\u2026 (yours): 3x its floor" in text
    for t in tasks:  # the gids keep the whole label
        assert f'id="energy:task:{t.label}"' in text and f'id="energy:task:{t.label}:floor"' in text


def test_the_batch_saves_with_every_point(tmp_path, drawn):
    _, _, _, tasks = drawn
    costs = _costs()
    png = plot_energy_roofline(costs, tmp_path / "batch.png", title="t", tasks=tasks).read_bytes()
    assert png.startswith(b"\x89PNG")
    svg = plot_energy_roofline(costs, tmp_path / "batch.svg", title="t", tasks=tasks).read_text()
    assert all(f'id="energy:task:{t.label}"' in svg for t in tasks)
