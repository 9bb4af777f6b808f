"""roofline-ext report: one self-contained HTML file, opened in a real headless Chromium.

Inputs are TEST FIXTURES (tests/data: the example calibration, the fleet fixture, the analyze
fixture) plus a check made on this machine. In CI (.ci/run installs Debian's chromium and sets
CI=true) a missing browser fails the test; elsewhere it skips with the reason.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0"]


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    if os.environ.get("CI") == "true":
        pytest.fail("chromium is not installed, and CI must open the report in it (.ci/run installs it)")
    pytest.skip("chromium is not installed here (Debian: apt-get install chromium); .ci/run installs it in CI")


def dump_dom(page: Path, tmp_path: Path) -> tuple[str, list[str], float]:
    """(the DOM after load, the console lines Chromium logged, wall seconds)."""
    profile = tmp_path / f"profile-{time.monotonic_ns()}"
    t0 = time.monotonic()
    proc = subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                           page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console, wall


class _Numbers(HTMLParser):
    """Every element with data-src: (data-src, data-value, its text, data-scale or None)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[list] = []
        self._open: list | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-src" in a:
            self._open = [a["data-src"], a["data-value"], "", a.get("data-scale")]
            self.found.append(self._open)

    def handle_data(self, data):
        if self._open is not None:
            self._open[2] += data

    def handle_endtag(self, tag):
        self._open = None


def _check_numbers(found, docs) -> None:
    """Every number on the page is the value at its data-src, printed as the page prints it (in
    another unit where data-scale says so)."""
    from roofline_ext.report.html import fmt, pct

    for src, value, text, scale in found:
        name, _, pointer = src.partition("#")
        expected = _resolve(docs[name], pointer)
        assert repr(expected) == value, (src, expected, value)
        shown = (fmt(expected), pct(expected)) if scale is None else (fmt(expected * float(scale)),)
        assert text in shown, (src, expected, text)


def _resolve(doc, pointer: str):
    for part in pointer.lstrip("/").split("/") if pointer else []:
        part = part.replace("~1", "/").replace("~0", "~")
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    from roofline_ext.cli.app import main

    d = tmp_path_factory.mktemp("inputs")
    fleet = d / "fleet.json"
    assert main(["fleet", "--from", str(DATA / "fleet-h200-fixture"), "-o", str(fleet), "--json"]) == 4
    here = d / "check-here.json"
    main(["check", "--json", "-o", str(here)])
    return [DATA / "calibration-h200-example.json", DATA / "fleet-h200-fixture" / "check-gpu-node-02.json", fleet,
            DATA / "analyze-h200-fixture.json", here]


def _report(inputs, tmp_path_factory, name):
    """``roofline-ext report`` of ``inputs`` into a fresh folder: the page's path."""
    pytest.importorskip("matplotlib")
    from roofline_ext.cli.app import main

    out = tmp_path_factory.mktemp(name) / f"{name}.html"
    assert main(["report", *map(str, inputs), "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def page(inputs, tmp_path_factory):
    return _report(inputs, tmp_path_factory, "report")


def test_report_is_one_self_contained_file(page):
    text = page.read_text()
    assert page.stat().st_size <= 2 * 1024 * 1024
    assert "<svg" in text and "<style>" in text
    # Nothing to fetch: no external src/href, no stylesheet or script file, and a CSP that forbids it.
    assert not re.search(r"""(?<![-\w])(src|href)\s*=\s*["'](?!#|data:)""", text)
    assert "default-src 'none'" in text
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids)), "SVG ids collide across charts"


def test_opens_in_chromium_without_console_errors_and_numbers_match(page, inputs, tmp_path):
    dom, console, wall = dump_dom(page, tmp_path)
    assert console == [], console
    load_ms = int(re.search(r'data-load-ms="(\d+)"', dom).group(1))
    assert load_ms <= 2000, f"the page took {load_ms} ms to load"
    assert "Check verdicts" in dom and "Fleet" in dom and "Calibrations and rooflines" in dom and "<svg" in dom
    docs = {f"{i}:{p.name}": json.loads(p.read_text()) for i, p in enumerate(inputs)}
    parser = _Numbers()
    parser.feed(dom)
    assert len(parser.found) > 200
    _check_numbers(parser.found, docs)
    # Spot checks by eye-readable text: the fixture's figures are on the page as printed.
    assert "4.585" in dom and "949.3" in dom and "93.5%" in dom


def test_the_console_check_can_fail(tmp_path):
    """A page that logs an error, or tries to fetch something, is caught by the same check."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src "
                   "'none'; script-src 'unsafe-inline'\"><script>console.error('deliberate')</script></head><body>"
                   "<img src=\"http://192.0.2.1/x.png\"></body></html>")
    _, console, _ = dump_dom(bad, tmp_path)
    assert any("deliberate" in c for c in console) and any("Content Security Policy" in c for c in console)


@pytest.mark.parametrize("case", ["dir", "device", "input", "missing-input", "not-json", "not-ours", "no-folder"])
def test_bad_input_is_one_line_and_exit_2(case, tmp_path, capsys):
    from roofline_ext.cli.app import main

    cal = str(DATA / "calibration-h200-example.json")
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    # (a FIFO: a character device such as /dev/null is written through, never refused)
    __import__("os").mkfifo(tmp_path / "pipe.html")
    argv = {"dir": [cal, "-o", str(tmp_path)], "device": [cal, "-o", str(tmp_path / "pipe.html")],
            "input": [cal, "-o", cal],
            "missing-input": [str(tmp_path / "nope.json"), "-o", str(tmp_path / "r.html")],
            "not-json": [str(junk), "-o", str(tmp_path / "r.html")],
            "not-ours": [str(other), "-o", str(tmp_path / "r.html")],
            "no-folder": [cal, "-o", str(tmp_path / "no" / "r.html")]}[case]
    assert main(["report", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("roofline-ext: error:"), err
    assert not (tmp_path / "r.html").exists()


def test_report_file_is_readable_by_others(page):
    assert page.stat().st_mode & 0o044  # not the temporary file's 0600


# --------------------------------------------------------------------------------------------------
# The energy roofline (issue 27): from a calibration's energy section and from the energy benchmark
# --------------------------------------------------------------------------------------------------
#
# Real data: benchmarks/results/energy-h200-2026-12-02.json (its own compute rows are errors; its HBM
# rows and the library rows are measurements). The calibration with an energy section and the
# analyses with energy are TEST FIXTURES built here from that file's figures, each labelled.

H200_ENERGY = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "energy-h200-2026-12-02.json"
EXAMPLE_CAL = DATA / "calibration-h200-example.json"


def _bench() -> dict:
    return json.loads(H200_ENERGY.read_text())


def _repeat(bench: dict, name: str, i: int = 0) -> dict:
    return next(f for f in bench["figures"] if f["name"] == name)["repeats"][i]


def _calibration_with_energy(bench: dict) -> dict:
    """The example calibration (a fixture) with, as its energy section, the H200 benchmark's own
    HBM read/write/copy rows (repeat 0): what a calibration's energy phase writes for those units."""
    cal = json.loads(EXAMPLE_CAL.read_text())
    cal["fixture"] = ("TEST FIXTURE: the example calibration, with the H200 energy benchmark's own HBM rows "
                      "(2026-12-02, repeat 0) as its energy section. NOT a calibration that ran.")
    entries = {}
    for key, pattern in (("hbm_read", "read"), ("hbm_write", "write"), ("hbm_copy", "copy")):
        r = _repeat(bench, f"roofline_ext HBM {pattern} 1 GiB")
        tel, m = r["telemetry"], r["measurement"]
        entries[key] = {"key": key, "label": f"HBM {pattern}", "per": "byte", "unit": "J/byte", "origin": "own",
                        "status": "ok", "reason": None, "source": r["cost"]["source"], "kernel": r["cost"]["source"],
                        "path": pattern, "j_per_unit": r["j_per_unit"], "j_total_per_unit": r["j_total_per_unit"],
                        "uncertainty": r["uncertainty_j_per_unit"], "pj_per_unit": r["pj_per_unit"],
                        "relative_uncertainty": r["relative_uncertainty"], "power_w": r["power_w"],
                        "idle_w": r["idle_w"], "window_s": r["window_s"], "kernel_duty": r["kernel_duty"],
                        "resolution_j": m["resolution_j"], "update_interval_s": m["update_interval_s"],
                        "sm_clock_mhz": tel["sm_clock_mhz"], "mem_clock_mhz": tel["mem_clock_mhz"],
                        "temperature_c": tel["temperature_c"], "throttle_reasons": tel["throttle_reasons"]}
    m = _repeat(bench, "roofline_ext HBM read 1 GiB")["measurement"]
    cal["energy"] = {"status": "measured", "reason": None,
                     "counter": {"update_interval_s": m["update_interval_s"], "resolution_j": m["resolution_j"]},
                     "idle": {"power_w": m["idle_w"], "uncertainty_w": m["uncertainty_idle_w"],
                              "window_s": m["idle_window_s"]},
                     "entries": entries}
    return cal


def _gemm_task(n: int, dtype: str, itemsize: int) -> dict:
    """The analyze fixture's matmul task, counted again for an n×n×n GEMM (exact counts)."""
    fixture = json.loads((DATA / "analyze-h200-fixture.json").read_text())
    t = json.loads(json.dumps(next(x for x in fixture["tasks"] if x["task"] == "matmul_4096")))
    t.pop("by_op", None)
    flops, elems = 2 * n ** 3, n * n
    t.update(task=f"matmul_{dtype}_{n}", path=f"(fixture) matmul {n}", flops=flops, simt_flops=0,
             bytes=3 * elems * itemsize, input_bytes=2 * elems * itemsize, param_bytes=0, output_bytes=elems * itemsize,
             dtype=f"torch.{dtype}", dtypes=[f"torch.{dtype}"], compute_dtype=f"torch.{dtype}",
             arithmetic_intensity=flops / (3 * elems * itemsize), inputs=[f"{dtype}[{n}, {n}]"] * 2,
             outputs=[f"{dtype}[{n}, {n}]"], t_ref_ms=None, t_new_ms=None, ref_roofline_frac=None)
    return t


def _with_energy(task: dict, costs, reference: dict, candidate: dict | None = None) -> dict:
    """``task`` as ``analyze --energy --energy-costs`` leaves it: the floor from its counts at
    ``costs`` and each measured variant against it (the runner's attach_energy_floor, by hand)."""
    from roofline_ext.errors import UserError
    from roofline_ext.measure.energy import EnergyMeasurement
    from roofline_ext.model.energy import energy_floor, task_energy

    task["energy"] = {"reference": dict(reference)}
    if candidate is not None:
        task["candidates"] = [{"candidate": "candidate.py", "sample": None, "verdict": "correct",
                               "energy": dict(candidate)}]
    try:
        floor = energy_floor(costs, flops=task["flops"], simt_flops=task["simt_flops"], nbytes=task["bytes"],
                             dtype=task["dtype"], read_bytes=task["input_bytes"], write_bytes=task["output_bytes"],
                             t_min_s=task["t_min_ms"] * 1e-3)
    except UserError as exc:
        task["energy"]["floor_error"] = str(exc)
        return task
    task["energy"]["floor"] = floor.to_dict()
    for e in [task["energy"]["reference"]] + [c["energy"] for c in task.get("candidates") or []]:
        te = task_energy(floor, EnergyMeasurement.from_dict(e))
        e.update(fraction_of_floor=te.fraction, fraction_of_floor_total=te.fraction_total,
                 below_floor=te.below_floor, below_floor_beyond_uncertainty=te.below_floor_beyond_uncertainty)
    return task


def _slower(m: dict, factor: float) -> dict:
    """TEST FIXTURE, NOT A MEASUREMENT: the recorded window ``m`` as if each call had drawn ``factor``
    times the energy above idle (a candidate slower than cuBLAS), through the record's own constructor."""
    from roofline_ext.measure.energy import EnergyMeasurement

    above = m["window_j"] - m["idle_w"] * m["window_s"]
    keep = {k: m[k] for k in ("calls", "window_s", "idle_w", "idle_window_s", "resolution_j", "update_interval_s",
                              "poll_gap_s", "idle_poll_gap_s", "updates")}
    return EnergyMeasurement.from_window(window_j=m["idle_w"] * m["window_s"] + factor * above, **keep).to_dict()


@pytest.fixture(scope="module")
def energy_inputs(tmp_path_factory):
    from roofline_ext.calibration.energy_phase import skipped
    from roofline_ext.model.energy import EnergyCosts

    d = tmp_path_factory.mktemp("energy-inputs")
    bench = _bench()
    costs = EnergyCosts.from_dict(bench["costs"])
    cal = d / "calibration-energy.json"
    cal.write_text(json.dumps(_calibration_with_energy(bench)))
    no_counter = json.loads(EXAMPLE_CAL.read_text())
    no_counter["energy"] = skipped("measuring energy needs NVML's Python bindings, which are not installed")
    skipped_cal = d / "calibration-skipped.json"
    skipped_cal.write_text(json.dumps(no_counter))
    # The tf32 GEMM the benchmark measured (torch.matmul 8192^3), as an analysed task: the reference's
    # energy is the recorded window of repeat 0; the candidate's is a labelled fixture (1.5x of it).
    gemm = _gemm_task(8192, "float32", 4)
    ref = _repeat(bench, "torch.matmul tf32 8192^3 (cuBLAS)")["measurement"]
    batch = {"gpu": gemm["gpu"], "complete": True, "summary": {"total": 1, "ok": 1, "failed": 0, "failures": []},
             "fixture": "TEST FIXTURE: counts exact, reference energy recorded on the H200 (2026-12-02), "
                        "candidate energy made up (1.5x)",
             "tasks": [_with_energy(gemm, costs, ref, _slower(ref, 1.5))]}
    analyses = d / "analyze-energy.json"
    analyses.write_text(json.dumps(batch))
    # torch sum of 4 GiB float32, one analysed task (one FP32 FLOP per element): the benchmark measured
    # no FP32 cost (its own compute rows are errors), so the analysis could give no floor.
    total = _gemm_task(8192, "float32", 4)
    total.update(task="sum_4gib", flops=0, simt_flops=1 << 30, bytes=(4 << 30) + 4, input_bytes=4 << 30,
                 output_bytes=4, arithmetic_intensity=(1 << 30) / ((4 << 30) + 4))
    single = d / "analyze-sum.json"
    single.write_text(json.dumps(_with_energy(total, costs, _repeat(bench, "torch sum 4 GiB float32")["measurement"])))
    return [H200_ENERGY, cal, skipped_cal, EXAMPLE_CAL, analyses, single]


@pytest.fixture(scope="module")
def energy_page(energy_inputs, tmp_path_factory):
    return _report(energy_inputs, tmp_path_factory, "energy")


def test_a_calibration_with_library_peers_points_each_cost_at_the_figure_it_came_from(tmp_path_factory):
    # The H200 calibration of session 13: torch's sum, fill_ and copy_ moved bytes for less than the
    # own kernels, so those three costs are the peers' and their numbers must trace to energy.peers.
    cal = H200_ENERGY.parent / "calibration-energy-h200-2026-12-02-s13-peers-1.json"
    text = _report([cal], tmp_path_factory, "peers").read_text()
    parser = _Numbers()
    parser.feed(text)
    _check_numbers(parser.found, {f"0:{cal.name}": json.loads(cal.read_text())})
    for key in ("hbm_read", "hbm_write", "hbm_copy"):
        assert f"/energy/peers/{key}/0/" in text, key
    assert "/energy/entries/bf16/" in text and "/energy/peers/bf16/" not in text  # cuBLAS drew more
    assert "torch copy_ 1 GiB float32" in text and "own kernels and library peers" in text


def test_an_energy_floor_comes_back_from_its_json():
    from roofline_ext.errors import UserError
    from roofline_ext.model.energy import EnergyCosts, EnergyFloor, energy_floor

    costs = EnergyCosts.from_dict(_bench()["costs"])
    floor = energy_floor(costs, flops=2 * 8192 ** 3, nbytes=3 * 8192 ** 2 * 4, dtype="float32",
                         read_bytes=2 * 8192 ** 2 * 4, write_bytes=8192 ** 2 * 4, t_min_s=2.2e-3)
    back = EnergyFloor.from_dict(json.loads(json.dumps(floor.to_dict())))
    # to_dict writes each term's uncertainty times its count: the per-unit figure is divided back.
    assert [t.uncertainty for t in back.terms] == pytest.approx([t.uncertainty for t in floor.terms], rel=1e-12)
    assert [t.key for t in back.terms] == ["tf32", "hbm_read", "hbm_write"]
    assert {k: v for k, v in back.to_dict().items() if k != "terms"} == \
        {k: v for k, v in floor.to_dict().items() if k != "terms"}
    assert [{k: v for k, v in t.to_dict().items() if k != "uncertainty_j"} for t in back.terms] == \
        [{k: v for k, v in t.to_dict().items() if k != "uncertainty_j"} for t in floor.terms]
    assert back.arithmetic_intensity == floor.arithmetic_intensity and back.pj_per_flop == floor.pj_per_flop
    for bad, words in (([], "must be an object"), ({**floor.to_dict(), "e_min_j": -1.0}, "non-negative"),
                       ({k: v for k, v in floor.to_dict().items() if k != "nbytes"}, "without 'nbytes'")):
        with pytest.raises(UserError, match=words):
            EnergyFloor.from_dict(bad)


def test_the_energy_roofline_is_on_the_page_with_every_figure_from_its_file(energy_page, energy_inputs):
    text = energy_page.read_text()
    docs = {f"{i}:{p.name}": json.loads(p.read_text()) for i, p in enumerate(energy_inputs)}
    parser = _Numbers()
    parser.feed(text)
    _check_numbers(parser.found, docs)
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids)), "SVG ids collide across charts"
    # Two energy charts (the calibration's, the benchmark's), each with the GEMM and its candidate.
    assert len(re.findall(r'id="c\d+-energy:task:matmul_float32_8192"', text)) == 2
    assert len(re.findall(r'id="c\d+-energy:task:matmul_float32_8192 \(yours\):floor"', text)) == 2
    assert text.count("<h4>Energy roofline</h4>") == 1 and "<h2>Energy rooflines</h2>" in text
    start = text.index("<h4>Energy roofline</h4>")
    cal_part = text[start:text.index("<h3>", start)]  # up to the next calibration's block
    bench_part = text[text.index("<h2>Energy rooflines</h2>"):]
    srcs = {src.split("#")[0] for src, *_ in parser.found}
    assert {"0:energy-h200-2026-12-02.json", "1:calibration-energy.json", "4:analyze-energy.json"} <= srcs
    # The costs: the benchmark's lowest of own and library (torch sum 110.8 pJ/byte reads), the
    # calibration's own kernels only (116.4); BF16 only where it was measured.
    assert "110.8" in bench_part and "torch sum 4 GiB float32" in bench_part and "0.9841" in bench_part
    assert "116.4" in cal_part and "roofline_ext HBM read 1 GiB" in cal_part and "<td>BF16</td>" not in cal_part
    # No compute cost in the calibration (memory lines only): no legend key for dashed compute lines.
    assert "compute energy alone" not in cal_part and "compute energy alone" in bench_part
    # The recorded cuBLAS GEMM comes out BELOW the floor its own J/FLOP plus the HBM bytes make
    # (the per-unit costs do not add for a kernel whose memory traffic is inside its J/FLOP figure);
    # the made-up slower candidate does not.
    gemm = json.loads(energy_inputs[4].read_text())["tasks"][0]
    assert gemm["energy"]["reference"]["below_floor"] is True
    assert gemm["candidates"][0]["energy"]["below_floor"] is False
    row = re.search(r"<tr><td>matmul_float32_8192</td>.*?</tr>", bench_part).group(0)
    assert 'data-below-floor="true"' in row and "<td>these</td>" in row
    row = re.search(r"<tr><td>matmul_float32_8192 \(yours\)</td>.*?</tr>", bench_part).group(0)
    ref_fraction = gemm["energy"]["reference"]["fraction_of_floor"]
    assert ref_fraction == pytest.approx(1.056, abs=0.001)  # 5.6% below: the recorded repeat 0
    assert "<td>no</td>" in row and f"{ref_fraction / 1.5:.1%}" in row  # 1.5x the energy: the fraction / 1.5
    assert "BELOW the energy floor" in bench_part
    # On the calibration's chart the floor recorded was built on the benchmark's costs: said so.
    assert "other costs" in cal_part and "<td>these</td>" not in cal_part
    # A task measured without a floor: one line, the reason the analysis recorded.
    assert "sum_4gib: energy measured, but no energy floor (no measured energy per FLOP for fp32" in bench_part
    # A calibration without energy, or whose energy was skipped: one muted line each, no chart.
    assert "No energy roofline: the calibration of NVIDIA H200 (2026-05-10T09:30:00+00:00) has no energy part" in text
    assert "No energy roofline: the calibration of NVIDIA H200 (2026-05-10T09:30:00+00:00) measured no energy: " \
           "measuring energy needs NVML" in text


def test_the_energy_page_opens_in_chromium_without_console_errors(energy_page, tmp_path):
    dom, console, _ = dump_dom(energy_page, tmp_path)
    assert console == [], console
    assert "Energy rooflines" in dom and "energy:task:matmul_float32_8192" in dom


def test_without_matplotlib_the_energy_part_says_no_chart_and_keeps_its_tables(energy_inputs, tmp_path):
    # A fresh interpreter in which matplotlib cannot be imported (None in sys.modules stops the import).
    out = tmp_path / "no-mpl.html"
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from roofline_ext.cli.app import main\n"
            f"raise SystemExit(main(['report', *{[str(p) for p in energy_inputs]!r}, '-o', {str(out)!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = out.read_text()
    assert "<svg" not in text
    bench_part = text[text.index("<h2>Energy rooflines</h2>"):]
    assert "No chart: charts need matplotlib" in bench_part
    assert "110.8" in bench_part and "<td>matmul_float32_8192</td>" in bench_part


@pytest.mark.parametrize("case", ["zero-cost", "not-an-object"])
def test_a_broken_energy_benchmark_file_is_one_line_and_exit_2(case, tmp_path, capsys):
    from roofline_ext.cli.app import main

    bench = _bench()
    if case == "zero-cost":
        bench["costs"]["costs"]["bf16"]["j_per_unit"] = 0.0
    else:
        bench["costs"]["costs"]["bf16"] = 3
    bad = tmp_path / "energy.json"
    bad.write_text(json.dumps(bench))
    assert main(["report", str(bad), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "/costs" in err[0] and "bf16" in err[0], err
    assert not (tmp_path / "r.html").exists()
