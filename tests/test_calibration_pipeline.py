"""The calibration cache (location, atomic write, lock, corrupt and old files, lookup) and the
policy parts of ``calibrate()`` (sustained window, warnings, the JSON it returns), on the CPU.

The calibration used here is tests/data/calibration-h200-example.json: a hand-made fixture with
realistic H200 figures, not a measurement.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from roofline_ext.calibration import pipeline as cal_run
from roofline_ext.calibration.sustained import sustain
from roofline_ext.peaks import cache as cb
from roofline_ext.peaks.units import ENTRY_KEYS, peak_label
from roofline_ext.report.calibration_table import summary_rows
from roofline_ext.errors import GpuUnavailableError, UserError

from fakes.calibration import FakeTelemetry, fake_bandwidth, fake_compute, fake_device
from fakes.calibration import fake_gpu  # noqa: F401  (the fixture: a fake H200 behind calibrate() and the CLI)

DATA = Path(__file__).parent / "data" / "calibration-h200-example.json"
PYTHON_DIR = str(Path(cb.__file__).resolve().parents[2])


def example(**changes) -> dict:
    cal = json.loads(DATA.read_text())
    cal.update(changes)
    return cal


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv(cb.CACHE_ENV, str(d))
    return d


def assert_warned(capsys, pattern):
    """The cache said why it ignored a file: one ``roofline-ext: warning:`` line on stderr."""
    import re

    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("roofline-ext: warning: ")]
    assert len(lines) == 1 and re.search(pattern, lines[0]), err


# --- location -----------------------------------------------------------------------------------

def test_cache_dir_env_override(cache):
    assert cb.cache_dir() == cache
    assert cb.cache_path("GPU-1234").parent == cache
    assert cb.cache_path("GPU-1234").name == "calibration-GPU-1234.json"


def test_cache_dir_platformdirs(monkeypatch):
    monkeypatch.delenv(cb.CACHE_ENV, raising=False)
    import platformdirs

    assert cb.cache_dir() == Path(platformdirs.user_cache_dir("roofline_ext", appauthor=False))


def test_cache_dir_without_platformdirs_uses_xdg(monkeypatch, tmp_path):
    # The GPU machines lack platformdirs: the cache must still have a home.
    monkeypatch.delenv(cb.CACHE_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "platformdirs", None)  # makes "import platformdirs" fail
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cb.cache_dir() == tmp_path / "xdg" / "roofline_ext"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cb.cache_dir() == Path(os.path.expanduser("~")) / ".cache" / "roofline_ext"


def test_uuid_is_one_safe_path_component(cache):
    assert cb.cache_path("GPU-ab/../cd").name == "calibration-GPU-ab_.._cd.json"
    assert cb.cache_path("GPU-ab/../cd").parent == cache
    with pytest.raises(ValueError):
        cb.cache_path("")


# --- save / load --------------------------------------------------------------------------------

def test_save_then_load_round_trip(cache):
    cal = example()
    path = cb.save(cal)
    assert path == cache / f"calibration-{cal['gpu']['uuid']}.json"
    assert cb.load(cal["gpu"]["uuid"]) == cal
    # No temporary files are left next to it; the lock file is the only other entry.
    assert sorted(p.name for p in cache.iterdir()) == [".lock", path.name]


def test_save_refuses_what_is_not_a_calibration(cache):
    with pytest.raises(ValueError, match="schema version"):
        cb.save({"gpu": {"uuid": "GPU-x"}, "peaks": {"burst": {}}})
    with pytest.raises(ValueError, match="gpu.uuid"):
        cb.save({"schema_version": cb.SCHEMA_VERSION, "peaks": {"burst": {}}})
    bad = example()
    bad["peaks"]["burst"]["fp32"] = -1.0
    with pytest.raises(ValueError, match="positive"):
        cb.save(bad)
    assert not cache.exists() or not list(cache.glob("calibration-*.json"))


def test_missing_file_is_none_without_warning(cache, recwarn):
    assert cb.load("GPU-nothing-here") is None
    assert cb.list_cached() == []
    assert cb.cached_peaks(gpu_name="NVIDIA H200") is None
    assert not recwarn.list


def test_failed_write_leaves_the_old_file_intact(cache, monkeypatch):
    old = example()
    path = cb.save(old)
    before = path.read_bytes()
    new = example(mode="quick")

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    # fsync runs after the new text is written to the temporary file and before the rename: a
    # failure there is a crash mid-write.
    with monkeypatch.context() as m:
        m.setattr(cb.os, "fsync", disk_full)
        with pytest.raises(OSError, match="No space"):
            cb.save(new)
    assert path.read_bytes() == before
    assert [p.name for p in cache.iterdir() if p.suffix == ".tmp"] == []
    assert cb.load(old["gpu"]["uuid"])["mode"] == "full"


def test_interrupted_write_mid_json_leaves_the_old_file_intact(cache, monkeypatch):
    path = cb.save(example())
    before = path.read_bytes()
    real_fdopen = os.fdopen

    class Half:
        """A file that writes half of what it is given, then dies (as a killed process would)."""

        def __init__(self, f):
            self.f = f

        def write(self, text):
            self.f.write(text[: len(text) // 2])
            raise KeyboardInterrupt

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    with monkeypatch.context() as m:
        m.setattr(cb.os, "fdopen", lambda fd, *a, **k: Half(real_fdopen(fd, *a, **k)))
        with pytest.raises(KeyboardInterrupt):
            cb.save(example(mode="quick"))
    assert path.read_bytes() == before
    assert not list(cache.glob("*.tmp"))


def test_stray_temporary_file_is_not_read(cache, recwarn):
    cal = example()
    cb.save(cal)
    (cache / ".calibration-GPU-x.abc.tmp").write_text("{half a calib")
    assert [c["gpu"]["uuid"] for c in cb.list_cached()] == [cal["gpu"]["uuid"]]
    assert not recwarn.list


# --- lock ---------------------------------------------------------------------------------------

_SAVER = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {python_dir!r})
    from roofline_ext.peaks import cache as cb
    cal = json.load(open({data!r}))
    tag = sys.argv[1]
    # A big, distinct payload per writer: an interleaved write would be detected.
    cal["padding"] = tag * 200000
    cal["writer"] = tag
    for i in range(int(sys.argv[2])):
        cal["round"] = i
        cb.save(cal)
""")


def test_concurrent_saves_from_processes_leave_one_whole_file(cache, tmp_path):
    script = tmp_path / "saver.py"
    script.write_text(_SAVER.format(python_dir=PYTHON_DIR, data=str(DATA)))
    env = dict(os.environ, **{cb.CACHE_ENV: str(cache)})
    procs = [subprocess.Popen([sys.executable, str(script), tag, "15"], env=env) for tag in "ABCD"]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    cal = cb.load(example()["gpu"]["uuid"])
    assert cal is not None and cal["writer"] in "ABCD"
    assert cal["padding"] == cal["writer"] * 200000 and cal["round"] == 14
    assert not list(cache.glob("*.tmp"))


def test_concurrent_saves_from_threads(cache):
    errors = []

    def writer(tag: str) -> None:
        cal = example(writer=tag, padding=tag * 50000)
        try:
            for _ in range(10):
                cb.save(cal)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in "EFGHIJ"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    cal = cb.load(example()["gpu"]["uuid"])
    assert cal["padding"] == cal["writer"] * 50000


def test_save_waits_for_the_lock(cache, tmp_path):
    """A writer holding the lock blocks another process's save until it lets go."""
    script = tmp_path / "saver.py"
    script.write_text(_SAVER.format(python_dir=PYTHON_DIR, data=str(DATA)))
    env = dict(os.environ, **{cb.CACHE_ENV: str(cache)})
    with cb._locked(cache):
        proc = subprocess.Popen([sys.executable, str(script), "Z", "1"], env=env)
        time.sleep(1.5)
        assert proc.poll() is None, "save() went ahead while another process held the lock"
        assert not list(cache.glob("calibration-*.json"))
    assert proc.wait(timeout=60) == 0
    assert cb.load(example()["gpu"]["uuid"])["writer"] == "Z"


# --- corrupt and old files ----------------------------------------------------------------------

def test_corrupt_file_is_ignored_with_a_warning_naming_it(cache, capsys):
    uuid = example()["gpu"]["uuid"]
    path = cb.cache_path(uuid)
    cache.mkdir(parents=True)
    path.write_text('{"schema_version": 1, "gpu": {"uuid": "GPU-')  # truncated
    assert cb.load(uuid) is None
    assert_warned(capsys, r"corrupt JSON")
    assert cb.cached_peaks(gpu_name="NVIDIA H200") is None
    assert_warned(capsys, "corrupt")
    # A fresh calibration replaces it.
    cb.save(example())
    assert cb.load(uuid) is not None


@pytest.mark.parametrize("mutate, match", [
    (lambda c: c.update(schema_version=0), "schema version 0"),
    (lambda c: c.update(schema_version=cb.SCHEMA_VERSION + 1), "schema version"),
    (lambda c: c.pop("schema_version"), "schema version None"),
    (lambda c: c.pop("peaks"), "no peaks.burst"),
    (lambda c: c["peaks"]["burst"].update(fp32="fast"), "not a finite positive number"),
])
def test_old_or_malformed_schema_is_ignored_with_a_warning(cache, mutate, match, capsys):
    cal = example()
    uuid = cal["gpu"]["uuid"]
    mutate(cal)
    cache.mkdir(parents=True)
    cb.cache_path(uuid).write_text(json.dumps(cal))
    assert cb.load(uuid) is None
    assert_warned(capsys, match)
    assert cb.list_cached() == []
    assert_warned(capsys, match)


def test_file_of_another_gpu_under_this_uuid_is_ignored(cache, capsys):
    cal = example()
    cache.mkdir(parents=True)
    cb.cache_path("GPU-other").write_text(json.dumps(cal))
    assert cb.load("GPU-other") is None
    assert_warned(capsys, "belongs to")


def test_non_object_json_is_ignored(cache, capsys):
    cache.mkdir(parents=True)
    cb.cache_path("GPU-x").write_text("[1, 2, 3]")
    assert cb.load("GPU-x") is None
    assert_warned(capsys, "not a JSON object")


# --- lookup -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["NVIDIA H200", "H200", "h200 sxm", "NVIDIA H200 SXM 141GB"])
def test_cached_peaks_by_gpu_name(cache, name):
    cb.save(example())
    peaks = cb.cached_peaks(gpu_name=name)
    assert peaks["bandwidth_tbps"] == 4.312 and peaks["bf16"] == 949.3 and peaks["fp8"] == 1873.0


@pytest.mark.parametrize("name", ["H100", "NVIDIA H200 NVL", "A100"])
def test_cached_peaks_other_gpu_is_none(cache, name):
    cb.save(example())
    assert cb.cached_peaks(gpu_name=name) is None


def test_cached_peaks_by_uuid_and_regime(cache):
    cal = example()
    cb.save(cal)
    uuid = cal["gpu"]["uuid"]
    assert cb.cached_peaks(uuid=uuid)["fp32"] == 65.6
    sustained = cb.cached_peaks(uuid=uuid, regime="sustained")
    assert sustained == {"bandwidth_tbps": 4.287, "fp32": 64.1, "bf16": 738.4}
    assert cb.cached_peaks(uuid="GPU-unknown") is None
    with pytest.raises(UserError, match="regime"):
        cb.cached_peaks(uuid=uuid, regime="peak")


def test_quick_calibration_has_no_sustained_peaks(cache, capsys):
    cal = example(mode="quick", sustained=None)
    del cal["peaks"]["sustained"]
    cb.save(cal)
    assert cb.cached_peaks(gpu_name="H200")["fp32"] == 65.6
    assert cb.cached_peaks(gpu_name="H200", regime="sustained") is None
    assert_warned(capsys, "no sustained figures")


def test_newest_calibration_of_a_name_wins(cache):
    older = example(date="2026-01-01T00:00:00+00:00")
    newer = example(date="2026-03-01T00:00:00+00:00")
    older["gpu"] = dict(older["gpu"], uuid="GPU-older")
    newer["gpu"] = dict(newer["gpu"], uuid="GPU-newer")
    newer["peaks"]["burst"]["fp32"] = 60.0
    cb.save(newer)
    cb.save(older)  # written last, but measured first
    assert [c["gpu"]["uuid"] for c in cb.list_cached()] == ["GPU-newer", "GPU-older"]
    assert cb.cached_peaks(gpu_name="NVIDIA H200")["fp32"] == 60.0


def test_cached_peaks_are_accepted_by_roofline(cache):
    """The mapping goes straight into roofline(measured=...): every key must be one it knows."""
    from roofline_ext.model.floors import roofline

    cb.save(example())
    for regime in ("burst", "sustained"):
        measured = cb.cached_peaks(gpu_name="H200", regime=regime)
        r = roofline(2 * 8192**3, 3 * 8192 * 8192 * 2, "bf16", "H200", None, measured=measured)
        assert r["roofs"]["measured"]["bandwidth_tbps"] == measured["bandwidth_tbps"]
        assert r["roofs"]["measured"]["compute_tflops"] == measured["bf16"]


# --- presenting ---------------------------------------------------------------------------------

def test_summary_rows_show_burst_and_sustained_side_by_side():
    rows = {r["key"]: r for r in summary_rows(example())}
    assert list(rows) == list(ENTRY_KEYS)
    bf16 = rows["bf16"]
    assert bf16["burst"].startswith("949.3") and bf16["sustained"].startswith("738.4 (78%)")
    assert bf16["sustained_at"] == "1470 MHz, 699 W" and bf16["path"] == "wgmma"
    assert rows["hbm"]["burst_at"].startswith("mem 3201 MHz")
    assert rows["hbm"]["fraction_of_datasheet"] == "89.8%"
    assert rows["l2"]["fraction_of_datasheet"] is None
    assert peak_label("int8") == "INT8 (TOP/s)" and peak_label("bandwidth_tbps") == "HBM (TB/s)"


def test_summary_rows_say_why_a_unit_is_unsupported():
    cal = example()
    del cal["burst"]["entries"]["fp8"]
    cal["burst"]["unsupported"] = {"fp8": "no FP8 tensor cores before Ada/Hopper"}
    rows = {r["key"]: r for r in summary_rows(cal)}
    assert rows["fp8"]["burst"] == "unsupported" and "Ada" in rows["fp8"]["path"]


# --- the sustained window -----------------------------------------------------------------------

def fake_clock(seconds, floor=1470.0):
    # Falls linearly over the first half of the window, then holds.
    return lambda t: max(floor, 1980.0 - (1980.0 - floor) * t / (seconds / 2))


@pytest.mark.parametrize("settles", [True, False])
def test_sustained_figure_is_taken_once_clocks_settle(settles):
    seconds = 0.6
    clock = fake_clock(seconds) if settles else (lambda t: 1980.0 - 800.0 * t / seconds)
    fake = FakeTelemetry(clock)
    t0 = time.monotonic()
    calls = []

    def run_once(reps):
        calls.append(reps)
        time.sleep(0.02)
        return 949.3 * clock(time.monotonic() - t0) / 1980.0  # the figure follows the clock

    reported = []
    s = sustain(run_once, seconds, fake(0), reported.append)
    assert s["duration_s"] >= seconds and s["iterations"] == len(calls) >= 10
    assert reported[-1] >= 1.0 and reported == sorted(reported)
    lo, hi = s["window_s"]
    assert lo >= seconds * 2 / 3 - 0.05 and hi == s["duration_s"]
    if settles:
        assert s["settled"] is True
        assert s["value"] == pytest.approx(949.3 * 1470 / 1980, rel=0.01)
        assert s["sm_clock_mhz"] == pytest.approx(1470, abs=1)
    else:
        assert s["settled"] is False
    assert s["power_w"] == 699.0 and s["telemetry"]["samples"] > 0
    assert s["timeline"] and s["clock_timeline"]
    # Calls are resized towards _SUSTAINED_CALL_S from their measured wall time.
    assert calls[1] > calls[0]


# --- calibrate() end to end, with the GPU faked (tests/fakes/calibration.py) --------------------
# The measurement modules are replaced by results of their own types carrying realistic H200
# figures, so what is tested is calibration's policy: the plan, the entries, the peaks mapping,
# the sustained phase, the warnings and the JSON that comes out (and that save() accepts).

def test_quick_calibration_plan_and_result(fake_gpu, cache):
    progress = []
    cal = fake_gpu["calibrate"](0, quick=True, progress=lambda d, t, s: progress.append((d, t, s)))
    assert fake_gpu["calls"] == [("bandwidth", 0, True)] + [("compute", 0, p, True) for p in cal_run.QUICK_PRECISIONS]
    assert cal["mode"] == "quick" and cal["schema_version"] == cb.SCHEMA_VERSION
    assert cal["sustained"] is None and "sustained" not in cal["peaks"]
    assert cal["peaks"]["burst"] == {"bandwidth_tbps": 4.312, "fp32": 65.6, "tf32": 478.1, "fp16": 951.7,
                                     "bf16": 949.3}
    hbm = cal["burst"]["entries"]["hbm"]
    assert hbm["path"] == "copy" and {k: v["tbps"] for k, v in hbm["patterns"].items()} == {"read": 4.21, "copy": 4.312}
    assert hbm["patterns"]["copy"]["buffer_bytes"] == 4 << 30
    assert hbm["datasheet"] == 4.8 and hbm["fraction_of_datasheet"] == pytest.approx(4.312 / 4.8)
    assert hbm["clock_derived"] == pytest.approx(4.8144, abs=1e-3)
    assert hbm["mem_clock_mhz"] == 3201 and hbm["power_w"] == 470.0
    bf16 = cal["burst"]["entries"]["bf16"]
    assert bf16["path"] == "wgmma" and bf16["other_paths"] == {"mma.sync": pytest.approx(949.3 * 0.66)}
    assert bf16["sm_clock_mhz"] == 1935.0 and bf16["telemetry"]["power_w"]["median"] == 680.0
    assert bf16["kernel_clock_mhz"] == 1800.0
    assert bf16["fraction_of_clock_derived_at_kernel_clock"] == pytest.approx(949.3 / (4096 * 132 * 1800e6 / 1e12))
    row = {r["key"]: r for r in summary_rows(cal)}["bf16"]
    assert row["burst_at"] == "1935 MHz (kernel 1800), 680 W"
    assert row["fraction_of_clock_derived"] == "90.7% (k 97.5%)"
    assert cal["gpu"]["uuid"] == "GPU-11111111-2222-3333-4444-555555555555"
    assert cal["driver_version"] == "570.124.06" and cal["package_version"]
    assert cal["datasheet"]["sku"] == "H200" and cal["datasheet"]["peaks"]["bf16"] == 989.4
    # No other process (NVML counts only us), ECC on, idle and cool at start: nothing to warn about.
    assert cal["warnings"] == []
    assert cal["state_at_start"]["other_compute_processes"] == 0
    # Progress runs monotonically to the end and names each step.
    done = [d for d, _, _ in progress]
    assert done == sorted(done) and progress[-1][0] == pytest.approx(progress[-1][1])
    assert any("BF16 throughput: bf16 fake: measured" in s for _, _, s in progress)
    # What calibrate returns is what save writes and load reads.
    # The raw sweeps go beside it, so the file every analyze parses stays small.
    uuid = cb.save(cal).stem[len("calibration-"):]
    assert cb.load(uuid) == {k: v for k, v in cal.items() if k != "raw"}
    assert json.loads(cb.raw_path(uuid).read_text())["raw"] == cal["raw"]


def test_full_calibration_with_sustained_phase(fake_gpu, cache, tmp_path):
    cal = fake_gpu["calibrate"](0, sustained_s=0.3)
    # HBM: one runner per pattern (read, write, copy, triad), in turn in one window; then each unit.
    expected = [("sustain", 0, "hbm")] * 4 + [("sustain", 0, f) for f in cal_run.SUSTAINED_FAMILIES if f != "hbm"]
    assert [c for c in fake_gpu["calls"] if c[0] == "sustain"] == expected
    assert [c[2] for c in fake_gpu["calls"] if c[0] == "compute"] == list(cal_run.FULL_PRECISIONS)
    assert set(cal["burst"]["entries"]) == {"hbm", "l2", *cal_run.FULL_PRECISIONS}
    assert cal["peaks"]["burst"]["l2_bandwidth_tbps"] == 10.94
    sus = cal["sustained"]["entries"]
    # Every unit of the burst phase is sustained, not one per family.
    assert set(sus) == {"hbm", *cal_run.FULL_PRECISIONS}
    bf16 = sus["bf16"]
    assert bf16["value"] == pytest.approx(949.3 * 0.778, rel=0.01)
    assert bf16["ratio_to_burst"] == pytest.approx(0.778, rel=0.01)
    assert bf16["sm_clock_mhz"] == 1470.0 and bf16["power_w"] == 699.0 and bf16["path"] == "wgmma"
    assert bf16["fraction_of_clock_derived"] == pytest.approx(bf16["value"] / (4096 * 132 * 1470e6 / 1e12))
    assert sus["hbm"]["clock_derived"] == pytest.approx(4.8144, abs=1e-3)
    assert cal["peaks"]["sustained"] == {"bandwidth_tbps": sus["hbm"]["value"],
                                         **{p: sus[p]["value"] for p in cal_run.FULL_PRECISIONS}}
    for e in sus.values():  # each with its own clocks, power, reasons and throttle counts
        assert e["sm_clock_mhz"] and e["power_w"] == 699.0 and isinstance(e["throttle_reasons"], list)
        assert e["throttle"]["reps"] >= 3 and e["throttle"]["flagged"] == 0 and e["throttle"]["discarded"] == 0
    # Each phase's wall seconds, and totals that add up.
    timing = cal["timing"]
    phases = timing["phases_s"]
    assert {"setup", "bandwidth", *cal_run.FULL_PRECISIONS, *(f"sustained_{f}" for f in sus)} <= set(phases)
    assert all(v >= 0 for v in phases.values())
    assert sum(v for k, v in phases.items() if k.startswith("sustained_")) == pytest.approx(timing["sustained_s"], abs=0.05)
    assert sum(phases[f"sustained_{f}"] for f in sus) >= 0.3 * len(sus)
    assert timing["total_s"] >= timing["burst_s"] + timing["sustained_s"]
    assert timing["budget_s"] is None and timing["within_budget"] is None and timing["sustained_window_s"] == 0.3
    # The whole thing caches, reads back for analyze, tabulates and draws.
    cb.save(cal)
    assert cb.cached_peaks(gpu_name="NVIDIA H200", regime="sustained")["bf16"] == bf16["value"]
    rows = {r["key"]: r for r in summary_rows(cal)}
    assert rows["bf16"]["sustained_at"].startswith("1470 MHz, 699 W")
    pytest.importorskip("matplotlib")
    from roofline_ext.report.charts import plot_calibration

    assert plot_calibration(cal, tmp_path / "full.png").stat().st_size > 50_000


def test_sustained_zero_skips_the_phase(fake_gpu, cache):
    cal = fake_gpu["calibrate"](0, sustained_s=0)
    assert cal["mode"] == "full" and cal["sustained"] is None
    assert not [c for c in fake_gpu["calls"] if c[0] == "sustain"]


def test_unsupported_precision_is_reported_not_zero(fake_gpu, cache):
    fake_gpu["unsupported"] = {"fp8"}
    cal = fake_gpu["calibrate"](0, sustained_s=0)
    assert "fp8" not in cal["burst"]["entries"] and "fp8" not in cal["peaks"]["burst"]
    assert "not on this GPU" in cal["burst"]["unsupported"]["fp8"]


def test_trust_warnings(fake_gpu, cache):
    fake_gpu["devices"] = [fake_device(mig_mode="enabled", ecc_mode="disabled")]
    fake_gpu["nvml"] = {"compute_processes": 3, "ecc_pending": 1, "sm_clock_mhz": 1200,
                        "clock_event_reason_names": ["sw_thermal_slowdown"], "temperature_c": 71}
    fake_gpu["reasons"] = ("hw_slowdown",)
    cal = fake_gpu["calibrate"](0, quick=True)
    text = "\n".join(cal["warnings"])
    assert "2 other process(es)" in text
    assert "MIG is enabled" in text
    assert "ECC is disabled" in text and "ECC mode change (disabled -> enabled) is pending" in text
    assert "slowed down at start (sw_thermal_slowdown)" in text
    assert "SM clock at start is 1200 MHz, below the 1980 MHz boost clock" in text
    assert "already at 71 C" in text
    assert "FP32 burst figure was reached under hw_slowdown" in text


def test_clocks_that_never_reach_boost_are_flagged(fake_gpu, cache, monkeypatch):
    real = fake_compute

    def slow(precision, reasons=()):
        r = real(precision, reasons)
        for pr in r.precisions.values():
            pr.best.telemetry["sm_clock_mhz"] = {"min": 1400, "median": 1410, "max": 1410}
        return r
    fake_gpu["fake_compute"] = slow
    cal = fake_gpu["calibrate"](0, quick=True)
    assert any("never reached boost" in w and "1410 of 1980 MHz" in w for w in cal["warnings"])


def test_calibrate_bad_index_is_a_user_error(fake_gpu):
    with pytest.raises(UserError, match="no CUDA device 5"):
        fake_gpu["calibrate"](5, quick=True)


def test_calibrate_without_gpu_raises_gpu_unavailable():
    from roofline_ext.device.status import availability

    if availability().ok:
        pytest.skip("a GPU is present")
    with pytest.raises(GpuUnavailableError) as exc:
        cal_run.calibrate(0, quick=True)
    assert exc.value.exit_code == 3


def test_sustained_hbm_runs_every_pattern_and_its_roof_is_the_burst_winners(fake_gpu, cache):
    """Issue 27: the sustained HBM roof is the burst winner's pattern sustained (a read-bound task
    is not held to copy's lower figure under --regime sustained), and every pattern keeps its own
    sustained/burst ratio, all four measured in turn in one window."""
    import dataclasses

    real = fake_bandwidth

    def read_fastest(quick):
        r = real(quick)
        read = dataclasses.replace(r.patterns["read"], tbps_median=4.40)
        return dataclasses.replace(r, patterns=dict(r.patterns, read=read), peak=read)
    fake_gpu["fake_bandwidth"] = read_fastest
    cal = fake_gpu["calibrate"](0, sustained_s=0.3)
    assert cal["burst"]["entries"]["hbm"]["path"] == "read" and cal["peaks"]["burst"]["bandwidth_tbps"] == 4.40
    hbm = cal["sustained"]["entries"]["hbm"]
    assert hbm["path"] == "read" and hbm["burst"] == 4.40
    assert hbm["ratio_to_burst"] == pytest.approx(0.994, rel=0.005)
    assert cal["peaks"]["sustained"]["bandwidth_tbps"] == hbm["value"]
    pats = hbm["patterns"]
    assert set(pats) == {"read", "write", "copy", "triad"}
    for name, burst in (("read", 4.40), ("write", 4.05), ("copy", 4.312), ("triad", 4.30)):
        p = pats[name]
        assert p["burst"] == burst and p["ratio_to_burst"] == pytest.approx(0.994, rel=0.005)
        assert p["value"] == pytest.approx(burst * 0.994, rel=0.005) and p["buffer_bytes"] == 4 << 30
        assert p["iterations"] == pats["read"]["iterations"] >= 1  # whole rounds: as many calls each
    assert pats["read"]["value"] == hbm["value"]
    cb.save(cal)  # strict JSON, and the cache takes it


def test_rotating_runners_share_one_window_and_settle_apart():
    """Each runner's figure is settled from its own calls only; the window ends on a whole round."""
    from roofline_ext.calibration.sustained import sustain_rotating

    now = [0.0]
    calls: list[tuple[str, int]] = []

    def runner(label, figure):
        def run(reps):
            calls.append((label, reps))
            now[0] += 0.25
            return figure
        return run
    runners = {"a": runner("a", 1.0), "b": runner("b", 2.0), "c": runner("c", 3.0)}
    out = sustain_rotating(runners, 10.0, FakeTelemetry(lambda t: 1980.0)(0), lambda f: None, clock=lambda: now[0])
    assert [c[0] for c in calls[:6]] == ["a", "b", "c", "a", "b", "c"] and len(calls) % 3 == 0
    assert {k: v["value"] for k, v in out.items()} == {"a": 1.0, "b": 2.0, "c": 3.0}
    assert len({v["iterations"] for v in out.values()}) == 1
    assert out["a"]["duration_s"] >= 10.0


def test_non_finite_numbers_in_raw_results_become_null(fake_gpu, cache, monkeypatch):
    real = fake_bandwidth

    def with_inf(quick):
        r = real(quick)
        r.patterns["read"].sweep.append({"config": {}, "tbps_median": float("inf"), "cv": float("nan")})
        return r
    fake_gpu["fake_bandwidth"] = with_inf
    cal = fake_gpu["calibrate"](0, quick=True)
    sweep = cal["raw"]["bandwidth"]["patterns"]["read"]["sweep"]
    assert sweep[-1] == {"config": {}, "tbps_median": None, "cv": None}
    cb.save(cal)  # strict JSON


# --- the settling arithmetic, pure ----------------------------------------------------------------

def _samples(clock_at, duration, step=0.01):
    return [{"t_s": i * step, "sm_clock_mhz": clock_at(i * step), "mem_clock_mhz": 3201, "power_w": 699.0,
             "temperature_c": 60, "reasons": 0} for i in range(int(duration / step) + 1)]


def test_settle_takes_the_median_of_the_last_third_and_says_settled():
    from roofline_ext.calibration.sustained import settle

    # Figure falls from 950 to 740 over the first third, then holds: settled, 740 is the figure.
    duration = 30.0
    points = [(t + 0.5, 950.0 - 210.0 * min(1.0, t / 10.0)) for t in range(30)]
    samples = _samples(lambda t: 1980.0 - 510.0 * min(1.0, t / 10.0), duration, step=0.5)
    s = settle(points, [(t, 1400.0) for t, _ in points], samples, duration)
    assert s["value"] == pytest.approx(740.0) and s["settled"] is True
    assert s["sm_clock_mhz"] == pytest.approx(1470.0) and s["kernel_clock_mhz"] == 1400.0
    assert s["window_s"][0] >= 20.0 and s["iterations"] == 30


def test_settle_says_not_settled_when_the_figure_still_falls():
    from roofline_ext.calibration.sustained import settle

    duration = 30.0
    points = [(t + 0.5, 950.0 - 5.0 * t) for t in range(30)]  # falls the whole window
    s = settle(points, [], _samples(lambda t: 1980.0 - 10.0 * t, duration, step=0.5), duration)
    assert s["settled"] is False and s["kernel_clock_mhz"] is None


def test_settle_of_a_window_too_short_to_tell_is_none():
    from roofline_ext.calibration.sustained import settle

    # Every call ended in the last third: nothing to compare the figure with.
    s = settle([(0.25, 900.0), (0.28, 901.0), (0.29, 899.0)], [], [], 0.3)
    assert s["settled"] is None and s["value"] == 900.0 and s["telemetry"] is None


def test_settle_flags_throttled_calls_and_leaves_them_out():
    from roofline_ext.calibration.sustained import settle

    # 30 calls of 1 s; in the last third, calls 22 and 25 ran under hw_slowdown (bit 0x8), call 27
    # at 1100 MHz (below 90% of the window's 1470): flagged, left out of the median. The power cap
    # (bit 0x1) is on throughout, as on a tensor unit at 700 W, and flags nothing.
    names = {0x1: "sw_power_cap", 0x8: "hw_slowdown"}

    def names_of(mask):
        return [n for bit, n in names.items() if mask & bit]

    duration = 30.0
    windows = [(float(t), t + 1.0) for t in range(30)]
    slow = {22: 0x8, 25: 0x8}
    points = [(t + 0.5, 500.0 if t in slow or t == 27 else 740.0) for t in range(30)]
    samples = [{"t_s": t + 0.5, "sm_clock_mhz": 1100.0 if t == 27 else 1470.0, "power_w": 699.0,
                "reasons": 0x1 | slow.get(t, 0)} for t in range(30)]
    s = settle(points, [], samples, duration, windows=windows, names_of=names_of)
    th = s["throttle"]
    assert (th["reps"], th["flagged"], th["discarded"]) == (10, 3, 3)
    assert th["by_reason"] == {"hw_slowdown": 2, "low_clock": 1}
    assert s["value"] == 740.0  # the median of the 7 clean calls
    # Throttled throughout (every call under hw_slowdown): nothing is left out; that is what it sustains.
    hot = [dict(x, reasons=0x9) for x in samples]
    s = settle(points, [], hot, duration, windows=windows, names_of=names_of)
    assert s["throttle"]["flagged"] == 10 and s["throttle"]["discarded"] == 0
    # Without call windows nothing can be placed: no report, the plain median.
    assert settle(points, [], samples, duration)["throttle"] is None


def test_the_sustained_window_shrinks_to_fit_the_budget():
    fit = cal_run._fit_window
    # An H200: ~25 s of burst leaves 275 s; 8 units x (25 + 3) + 10 = 234 s: the default fits as is.
    assert fit(25.0, 275.0, 8) == 25.0
    # A slow burst (100 s) leaves 200 s: (200 - 10) / 8 - 3 = 20.75 s each.
    assert fit(25.0, 200.0, 8) == pytest.approx(20.8, abs=0.05)
    # Never below 10 s (too short to tell settled from falling), and never above what was asked.
    assert fit(25.0, 50.0, 8) == cal_run.MIN_SUSTAINED_S and fit(5.0, 50.0, 8) == 5.0
    # The default fits the budget with the burst phase an H200 takes (~30 s) and room to spare.
    units = len(cal_run.SUSTAINED_FAMILIES)
    assert 30 + units * (cal_run.DEFAULT_SUSTAINED_S + 3) + 10 <= cal_run.FULL_BUDGET_S


def test_a_budget_is_recorded_and_a_run_over_it_is_warned_about(fake_gpu, cache):
    cal = fake_gpu["calibrate"](0, sustained_s=0.2, budget_s=0.05, families=("hbm", "fp32"))
    assert cal["timing"]["budget_s"] == 0.05 and cal["timing"]["within_budget"] is False
    assert any("over its 0.05 s budget" in w for w in cal["warnings"])
    quick = fake_gpu["calibrate"](0, quick=True)
    assert quick["timing"]["budget_s"] == cal_run.QUICK_BUDGET_S and quick["timing"]["within_budget"] is True
    assert quick["timing"]["sustained_s"] == 0 and quick["timing"]["sustained_window_s"] is None
