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
    """Every element with data-src: (data-src, data-value, its text)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[list[str]] = []
        self._open: list | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-src" in a:
            self._open = [a["data-src"], a["data-value"], ""]
            self.found.append(self._open)

    def handle_data(self, data):
        if self._open is not None:
            self._open[2] += data

    def handle_endtag(self, tag):
        self._open = None


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


@pytest.fixture(scope="module")
def page(inputs, tmp_path_factory):
    pytest.importorskip("matplotlib")
    from roofline_ext.cli.app import main

    out = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["report", *map(str, inputs), "-o", str(out)]) == 0
    return out


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
    from roofline_ext.report.html import fmt, pct

    for src, value, text in parser.found:
        name, _, pointer = src.partition("#")
        expected = _resolve(docs[name], pointer)
        assert repr(expected) == value, (src, expected, value)
        assert text in (fmt(expected), pct(expected)), (src, expected, text)
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
