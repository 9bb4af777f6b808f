"""``roofline-ext calibrate``: --show, the no-GPU errors, argument checks, and that ``analyze``
shows the measured roof once a calibration is cached. GPU runs are marked ``gpu``.

The cached calibration used here is tests/data/calibration-h200-example.json, a hand-made fixture.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roofline_ext.calibration.pipeline import calibrate
from roofline_ext.peaks import cache as cb
from roofline_ext.device.status import availability
from roofline_ext.cli import main

DATA = Path(__file__).parent / "data" / "calibration-h200-example.json"
PYTHON_DIR = str(Path(cb.__file__).resolve().parents[1])

no_gpu_here = pytest.mark.skipif(availability().ok, reason="a GPU is present: the no-GPU path cannot run")


def example() -> dict:
    return json.loads(DATA.read_text())


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv(cb.CACHE_ENV, str(d))
    return d


def cli(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real ``roofline-ext`` entry point in a child process (exit codes as a shell sees them)."""
    full_env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "roofline_ext.cli", *args], capture_output=True,
                          text=True, env=full_env, timeout=timeout)


# --- --show -------------------------------------------------------------------------------------

def test_show_with_nothing_cached(cache, capsys):
    assert main(["calibrate", "--show"]) == 0
    out = capsys.readouterr().out
    assert "No calibration cached" in out and str(cache) in out


def test_show_json_with_nothing_cached(cache, capsys):
    assert main(["calibrate", "--show", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_show_prints_the_cached_table(cache, capsys):
    cb.save(example())
    assert main(["calibrate", "--show"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H200 [GPU-00000000-fixture-0000-000000000000], full calibration of 2026-05-10 09:30 UTC" in out
    for text in ("HBM (TB/s)", "4.312", "89.8%", "mem 3201 MHz", "L2 (TB/s)", "10.94", "FP16 (TFLOP/s)",
                 "BF16 (TFLOP/s)", "949.3", "738.4 (78%)", "1470 MHz, 699 W", "wgmma", "INT8 (TOP/s)",
                 "TEST FIXTURE", "% clock-derived", str(cache)):
        assert text in out, text


def test_show_json_round_trips(cache, capsys):
    cal = example()
    cb.save(cal)
    assert main(["calibrate", "--show", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [cal]


def test_show_warns_about_a_corrupt_file_and_goes_on(cache, capsys):
    cb.save(example())
    bad = cb.cache_path("GPU-broken")
    bad.write_text("{not json")
    assert main(["calibrate", "--show"]) == 0
    captured = capsys.readouterr()
    assert "4.312" in captured.out
    warning = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warning) == 1 and str(bad) in warning[0] and "corrupt JSON" in warning[0]


def test_show_plot_draws_the_cached_calibration(cache, tmp_path, capsys):
    cb.save(example())
    out = tmp_path / "cached.png"
    assert main(["calibrate", "--show", "--plot", str(out)]) == 0
    assert out.stat().st_size > 50_000
    assert str(out) in capsys.readouterr().err


def test_show_plot_with_nothing_cached_is_an_error(cache, tmp_path, capsys):
    assert main(["calibrate", "--show", "--plot", str(tmp_path / "x.png")]) == 2
    assert "no cached calibration" in capsys.readouterr().err


def test_show_works_in_a_fresh_process(cache):
    cb.save(example())
    r = cli("calibrate", "--show", env={cb.CACHE_ENV: str(cache)})
    assert r.returncode == 0, r.stderr
    assert "949.3" in r.stdout and "BF16" in r.stdout


# --- no GPU -------------------------------------------------------------------------------------

@no_gpu_here
@pytest.mark.parametrize("args", [["calibrate"], ["calibrate", "--quick"], ["calibrate", "--device", "all"],
                                  ["calibrate", "--device", "1", "--json"]])
def test_no_gpu_exits_3_with_one_line(cache, capsys, args):
    assert main(args) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("roofline-ext: error: ")
    assert availability().message in lines[0]
    assert not cache.exists()  # nothing cached, nothing half-written


@no_gpu_here
def test_no_gpu_exit_code_in_a_real_process(cache):
    r = cli("calibrate", "--quick", env={cb.CACHE_ENV: str(cache)})
    assert r.returncode == 3
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


@no_gpu_here
def test_calibrate_api_without_gpu_raises():
    from roofline_ext.errors import GpuUnavailableError

    with pytest.raises(GpuUnavailableError):
        calibrate(0, quick=True)


# --- argument checks (before anything is measured) ------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--device", "first"], "--device must be a CUDA index"),
    (["--sustained", "-5"], "--sustained must be 0"),
    (["--plot", "chart.pdf"], ".png or .svg"),
    (["--energy-window", "0.5"], "--energy-window must be a number of seconds from 1 to 600"),
    (["--energy-window", "nan"], "--energy-window must be a number of seconds from 1 to 600"),
])
def test_bad_arguments_exit_2(cache, capsys, args, message):
    assert main(["calibrate", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_help_lists_the_options(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--device", "--quick", "--sustained", "--json", "--plot", "--no-cache", "--show"):
        assert opt in out


# --- a calibration run, with the GPU faked (see fakes/calibration.py's fake_gpu) ---------------------------

from fakes.calibration import fake_device, fake_gpu  # noqa: E402,F401  (fixture shared with the API tests)


def test_quick_run_prints_the_table_and_caches(fake_gpu, cache, capsys):
    assert main(["calibrate", "--quick"]) == 0
    captured = capsys.readouterr()
    assert "NVIDIA H200 [GPU-11111111-2222-3333-4444-555555555555], quick calibration" in captured.out
    for text in ("HBM (TB/s)", "4.312", "89.8%", "BF16 (TFLOP/s)", "949.3", "wgmma", "1935 MHz (kernel 1800), 680 W", "90.7% (k 97.5%)", "k / kernel"):
        assert text in captured.out, text
    assert "sustained" not in captured.out
    # Not a terminal: progress is one line per step on stderr, then where the result went.
    assert "roofline-ext: quick calibration: HBM bandwidth" in captured.err
    assert "roofline-ext: cached in " in captured.err and str(cache) in captured.err
    assert cb.load("GPU-11111111-2222-3333-4444-555555555555")["mode"] == "quick"


def test_quick_run_over_a_full_one_says_so(fake_gpu, cache, capsys):
    full = example()
    full["gpu"]["uuid"] = "GPU-11111111-2222-3333-4444-555555555555"
    cb.save(full)
    assert main(["calibrate", "--quick", "--no-progress"]) == 0
    assert "replaces the full one of 2026-05-10T09:30:00+00:00" in capsys.readouterr().err
    assert cb.load(full["gpu"]["uuid"])["mode"] == "quick"


def test_full_run_json_no_cache_no_progress(fake_gpu, cache, capsys):
    assert main(["calibrate", "--sustained", "0.3", "--json", "--no-cache", "--no-progress"]) == 0
    captured = capsys.readouterr()
    cal = json.loads(captured.out)
    assert cal["mode"] == "full" and set(cal["sustained"]["entries"]) == {"hbm", "fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8"}
    assert captured.err == ""
    assert not cache.exists()


def test_full_run_table_has_sustained_side_by_side(fake_gpu, cache, capsys):
    assert main(["calibrate", "--sustained", "0.3", "--no-progress"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.strip("│ ").startswith("BF16"))
    assert "949.3" in row and "1470 MHz, 699 W" in row and "(78%)" in row


def test_full_run_shows_every_sustained_hbm_pattern(fake_gpu, cache, capsys):
    assert main(["calibrate", "--sustained", "0.3", "--no-progress"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the note may wrap
    assert "sustained HBM, every pattern in turn in one window" in out
    for name in ("read", "write", "copy", "triad"):
        assert f"{name} " in out.split("sustained HBM, every pattern", 1)[1]


def test_the_recorded_h200_calibration_shows_its_sustained_patterns():
    import json
    from pathlib import Path

    from roofline_ext.report.calibration_table import sustained_hbm_patterns

    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    cal = json.loads((results / "calibration-energy-h200-2026-12-02-1.json").read_text())
    line = sustained_hbm_patterns(cal)
    assert line is not None and "read 4.693 (100.0%)" in line and "copy 4.297 (99.9%)" in line
    assert line.endswith("the HBM roof is write's")
    # A calibration from before every pattern was sustained has none to show.
    assert sustained_hbm_patterns(json.loads((results / "calibration-full-h200-2026-12-01.json").read_text())) is None


def test_warnings_go_to_stderr(fake_gpu, cache, capsys):
    fake_gpu["devices"] = [fake_device(mig_mode="enabled")]
    assert main(["calibrate", "--quick", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "roofline-ext: warning: GPU 0: MIG is enabled" in err


def test_device_all_prints_the_spread(fake_gpu, cache, tmp_path, capsys):
    fake_gpu["devices"] = [fake_device(0), fake_device(1, uuid="GPU-99999999-2222-3333-4444-555555555555")]
    chart = tmp_path / "roof.svg"
    assert main(["calibrate", "--device", "all", "--quick", "--no-progress", "--plot", str(chart)]) == 0
    captured = capsys.readouterr()
    assert "Burst peaks across 2 GPUs" in captured.out
    spread_row = next(line for line in captured.out.splitlines() if "BF16" in line and "0.0%" in line)
    assert spread_row.count("949.3") == 4  # GPU 0, GPU 1, min, max
    assert (tmp_path / "roof-gpu0.svg").exists() and (tmp_path / "roof-gpu1.svg").exists()
    assert len(cb.list_cached()) == 2


def test_device_all_json(fake_gpu, cache, capsys):
    fake_gpu["devices"] = [fake_device(0), fake_device(1, uuid="GPU-99999999-2222-3333-4444-555555555555")]
    assert main(["calibrate", "--device", "all", "--quick", "--json", "--no-progress", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["gpu"]["index"] for c in doc["devices"]] == [0, 1]
    assert doc["spread"]["bandwidth_tbps"]["spread"] == 0.0


def test_unknown_device_index(fake_gpu, cache, capsys):
    assert main(["calibrate", "--device", "7", "--quick"]) == 2
    assert "no CUDA device 7" in capsys.readouterr().err


# --- analyze picks up the cached calibration ----------------------------------------------------

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return []
'''


@pytest.fixture
def task_file(tmp_path) -> Path:
    p = tmp_path / "matmul.py"
    p.write_text(TASK)
    return p


def test_analyze_shows_the_measured_roof_when_cached(cache, task_file, capsys, analyze_in_process):
    pytest.importorskip("torch")
    # Nothing cached: no measured roof.
    assert analyze_in_process(task_file, "--gpu", "H200", "--dtype", "bf16", "--json") == 0
    before = json.loads(capsys.readouterr().out)
    assert before["roofs"]["measured"] is None

    cb.save(example())
    assert analyze_in_process(task_file, "--gpu", "H200", "--dtype", "bf16", "--json") == 0
    after = json.loads(capsys.readouterr().out)
    measured = after["roofs"]["measured"]
    assert measured["bandwidth_tbps"] == 4.312 and measured["compute_tflops"] == 949.3
    assert after["roofs"]["datasheet"]["compute_tflops"] == 989.4  # side by side

    assert analyze_in_process(task_file, "--gpu", "H200", "--dtype", "bf16") == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.strip().startswith("measured"))
    assert "949.3" in row and "4.312" in row
    assert "measured" in text.splitlines()[0]  # the sentence names the measured floor too


def test_analyze_sustained_regime(cache, task_file, capsys, analyze_in_process):
    pytest.importorskip("torch")
    cb.save(example())
    assert analyze_in_process(task_file, "--gpu", "H200", "--dtype", "bf16", "--regime", "sustained",
                              "--json") == 0
    measured = json.loads(capsys.readouterr().out)["roofs"]["measured"]
    assert measured["compute_tflops"] == 738.4 and measured["bandwidth_tbps"] == 4.287


def test_analyze_ignores_a_calibration_of_another_gpu(cache, task_file, capsys, analyze_in_process):
    pytest.importorskip("torch")
    cb.save(example())
    assert analyze_in_process(task_file, "--gpu", "H100", "--dtype", "bf16", "--json") == 0
    assert json.loads(capsys.readouterr().out)["roofs"]["measured"] is None


# --- on a GPU -----------------------------------------------------------------------------------

@pytest.mark.gpu
def test_quick_calibration_on_the_gpu(tmp_path, monkeypatch):
    """Quick calibration, start-up included, in <= 15 s; burst figures within physical bounds."""
    cache = tmp_path / "cache"
    out = tmp_path / "quick.json"
    t0 = time.monotonic()
    r = cli("calibrate", "--quick", "--json", "--no-progress", env={cb.CACHE_ENV: str(cache)}, timeout=120)
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    out.write_text(r.stdout)
    cal = json.loads(r.stdout)
    assert wall <= 15.0, f"quick calibration took {wall:.1f} s"
    assert cal["mode"] == "quick" and cal["schema_version"] == cb.SCHEMA_VERSION
    entries = cal["burst"]["entries"]
    assert set(entries) >= {"hbm", "fp32", "tf32", "fp16", "bf16"}
    for key, e in entries.items():
        assert e["value"] > 0 and e["telemetry"] is not None, key
        if e.get("fraction_of_clock_derived") is not None:
            # Above the silicon's ceiling at the observed clock is a bug; far below it, a broken kernel.
            assert 0.5 < e["fraction_of_clock_derived"] <= 1.0, (key, e["fraction_of_clock_derived"])
    hbm = entries["hbm"]
    assert 0.5 * hbm["clock_derived"] < hbm["value"] < hbm["clock_derived"]
    # Cached under the GPU's UUID and read back by the lookup analyze uses.
    monkeypatch.setenv(cb.CACHE_ENV, str(cache))
    # The cache keeps everything but the raw sweeps, which go to a file of their own beside it.
    assert cb.load(cal["gpu"]["uuid"]) == {k: v for k, v in cal.items() if k != "raw"}
    assert json.loads(cb.raw_path(cal["gpu"]["uuid"]).read_text())["raw"] == cal["raw"]
    assert cb.cached_peaks(uuid=cal["gpu"]["uuid"])["bandwidth_tbps"] == hbm["value"]
    assert cb.cached_peaks(gpu_name=cal["gpu"]["name"])["bf16"] == entries["bf16"]["value"]
