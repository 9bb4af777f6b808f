"""``analyze --verbose``: where a run's time went, from the pool's timeline (issue 28: a lone task
says where its time went)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from roofline_ext import cli
from roofline_ext.runner.batch import timeline_text
from roofline_ext.timestamps import process_age_s

ROOT = Path(__file__).resolve().parent.parent


def test_the_timeline_text_counts_from_the_command_start():
    text = timeline_text([(0.01, "fork server started"), (2.0, "fork server ready"), (2.5, "count t: 0.40 s")],
                         1.0, 2.6).splitlines()
    assert text[0].startswith("roofline-ext: where the time went")
    assert text[1].split()[0] == "1.00" and "imported" in text[1]
    assert [line.split()[0] for line in text[2:]] == ["1.01", "3.00", "3.50", "3.60"]
    assert "stopped" in text[-1]
    # no /proc: the pool's own clock, without the start-up line
    assert timeline_text([(0.5, "x")], None, 1.0).splitlines()[1].split()[0] == "0.50"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_the_process_age_is_this_process_s():
    age = process_age_s()
    assert age is not None and 0.0 <= age < 24 * 3600


@pytest.mark.slow  # through the pool: a fork server that imports torch
@pytest.mark.skipif(sys.platform != "linux", reason="the pool needs Linux")
def test_analyze_verbose_says_where_the_time_went(capsys):
    from roofline_ext.runner.server_start import no_kept_server

    with no_kept_server():  # the command's own fork server, whose start and readiness are events here
        rc = cli.main(["analyze", str(ROOT / "examples" / "softmax.py"), "--gpu", "H100", "--verbose"])
    err = capsys.readouterr().err
    assert rc == 0
    lines = err.splitlines()
    start = next(i for i, line in enumerate(lines) if "where the time went" in line)
    events = lines[start + 1:]
    assert any("fork server ready" in e for e in events) and any("count softmax:" in e for e in events)
    times = [float(e.split()[0]) for e in events if e.strip() and e.split()[0].replace(".", "").isdigit()]
    assert times == sorted(times) and len(times) >= 4  # in order, start-up to the end
