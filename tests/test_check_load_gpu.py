"""`check` beside a concurrent load (issue 29), on a real GPU (marked gpu).

Three loads in another process (tests/fakes/check_load_process.py): the issue's mixed GEMM + HBM load, an
HBM-only and a GEMM-only one. Beside each, `roofline-ext check` runs as a user runs it (its own
process, --json) and must give no wrong data, no PASS on a metric whose spread exceeds its bound,
and the busy verdict naming the load (never "slow card"); idle, it must PASS with runs that agree
within 1% and figures inside the physical ceilings and at or above torch's copy_. Then, under each
load, every measuring kernel family verifies and every fault injection still fails, and a check
whose BF16 data is really wrong FAILs though the card is busy.

Set ROOFLINE_CHECK_LOAD_JSON=FILE to record every run (benchmarks/results/check-under-load-*.json).
Run this file in a pytest process of its own (or first): the idle runs can PASS only while no other
process, this one included, holds a context on the GPU. When this process already holds one, the
idle runs must instead name it as the process that makes the GPU busy.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

LOAD_SCRIPT = Path(__file__).parent / "fakes" / "check_load_process.py"
#: Loaded checks per load kind: 10 in all.
RUNS = {"mixed": 4, "hbm": 3, "gemm": 3}
IDLE_RUNS = 3
IDLE_GAP_S = 2.0
METRICS = ("bf16", "fp32", "hbm_read", "hbm_copy", "h2d", "d2h")
RECORD: dict = {"loaded": [], "strict": [], "idle": [], "verify_under_load": {}, "wrong_data_under_load": None}


@pytest.fixture(scope="module", autouse=True)
def _record():
    yield
    path = os.environ.get("ROOFLINE_CHECK_LOAD_JSON")
    if path:
        from roofline_ext.device.listing import device

        d = device(0)
        RECORD.update({"kind": "roofline_ext.check_under_load", "date": dt.date.today().isoformat(),
                       "gpu": {"name": d.name, "uuid": d.uuid, "driver": d.driver_version,
                               "cuda_driver": d.cuda_driver_version},
                       "loads": {"mixed": "bf16 8192^3 products and x.mul_(1.0) on 4 GiB, 10 of each per "
                                 "synchronise (issue 29)", "hbm": "x.mul_(1.0) on 4 GiB only",
                                 "gemm": "bf16 8192^3 products only"}})
        Path(path).write_text(json.dumps(RECORD, indent=1, allow_nan=False))


def _core():
    from roofline_ext.device.status import core

    return core()


def _holds_context() -> bool:
    """Whether this (pytest) process already has a CUDA context on GPU 0 (NVML's process list)."""
    from roofline_ext.device.health import read_health
    from roofline_ext.device.listing import device

    procs = read_health(device(0).pci_bus_id).compute_processes or ()
    return any(p.pid == os.getpid() for p in procs)


def _check(*extra: str) -> dict:
    """`roofline-ext check --json` in a process of its own, as a prolog runs it."""
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "roofline_ext.cli", "check", "--json", "--no-progress", *extra],
                          capture_output=True, text=True, timeout=180)
    doc = json.loads(proc.stdout)
    assert proc.returncode == doc["exit_code"], proc.stderr
    assert "roofline-ext: GPU" not in proc.stderr, proc.stderr  # no bare progress lines
    doc["command_wall_s"] = round(time.monotonic() - t0, 2)
    return doc


def _summary(doc: dict, kind: str) -> dict:
    (d,) = doc["devices"]
    return {"load": kind, "verdict": doc["verdict"], "exit_code": doc["exit_code"], "busy": doc["busy"],
            "strict": doc["strict"], "command_wall_s": doc["command_wall_s"], "reason": doc["reason"],
            "situation": d["situation"], "wrong_data": _wrong(doc),
            "metrics": {k: {f: m.get(f) for f in ("value", "cv", "verdict", "measured_verdict", "noisy", "shared",
                                                    "spread_bound")} for k, m in d["metrics"].items()},
            "document": doc}


def _wrong(doc: dict) -> list[str]:
    (d,) = doc["devices"]
    return [f"{k}: {m['reason']}" for k, m in d["metrics"].items()
            if m["value"] is None or "wrong data" in m["reason"] or "CUDA failed" in m["reason"]]


def _ceilings() -> dict[str, float]:
    """Physical ceilings of GPU 0 from its own identity (NVML, no context): per metric, in its unit."""
    from roofline_ext.device.listing import device
    from roofline_ext.peaks.derived import clock_derived_peak

    d = device(0)
    clock = float(d.max_sm_clock_mhz)
    return {"hbm_read": d.theoretical_bandwidth_tbps, "hbm_copy": d.theoretical_bandwidth_tbps,
            "fp32": clock_derived_peak("fp32", (d.cc_major, d.cc_minor), d.sm_count, clock),
            "bf16": clock_derived_peak("bf16", (d.cc_major, d.cc_minor), d.sm_count, clock)}


def _within_ceilings(doc: dict) -> None:
    (d,) = doc["devices"]
    for key, ceiling in _ceilings().items():
        m = d["metrics"][key]
        assert 0 < m["value"] <= 1.005 * ceiling, (key, m["value"], ceiling)
    for key in ("h2d", "d2h"):
        m = d["metrics"][key]
        link = (m["detail"] or {}).get("link") or {}
        if link.get("theoretical_gbps"):
            assert 0 < m["value"] <= 1.02 * link["theoretical_gbps"], (key, m["value"], link)


def _no_noisy_pass(doc: dict) -> None:
    (d,) = doc["devices"]
    for key, m in d["metrics"].items():
        if m["cv"] is not None and m["spread_bound"] is not None and m["cv"] > m["spread_bound"]:
            assert m["noisy"] and m["verdict"] != "PASS", (key, m)


@contextmanager
def _load(kind: str):
    err = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a chatty load can never block on it
    proc = subprocess.Popen([sys.executable, str(LOAD_SCRIPT), kind, "600"], stdout=subprocess.PIPE, stderr=err,
                            text=True)

    def errors() -> str:
        err.seek(0)
        return err.read()[-2000:]

    sel = selectors.DefaultSelector()
    try:
        sel.register(proc.stdout, selectors.EVENT_READ)
        line, deadline = "", time.monotonic() + 180
        while "ready" not in line:
            if proc.poll() is not None:
                pytest.fail(f"the {kind} load died: {errors()}")
            if time.monotonic() > deadline:
                pytest.fail(f"the {kind} load never got going")
            if sel.select(timeout=1.0):
                line = proc.stdout.readline()
        yield proc
        assert proc.poll() is None, f"the {kind} load ended before the checks did: {errors()}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        sel.close()
        proc.stdout.close()  # pytest turns an unclosed pipe's ResourceWarning into an error
        err.close()


# --- 1. idle (before this module touches CUDA) ---------------------------------------------------

def test_idle_checks_pass_agree_and_sit_under_the_ceilings():
    ours = _holds_context()
    docs = []
    for _ in range(IDLE_RUNS):
        # NVML's utilisation looks back up to a second: let the previous check's own kernels age out,
        # as they would between two jobs (docs/check.md).
        time.sleep(IDLE_GAP_S)
        docs.append(_check())
    RECORD["idle"] = [_summary(doc, "none") for doc in docs]
    for doc in docs:
        assert not _wrong(doc), _wrong(doc)
        _within_ceilings(doc)
        _no_noisy_pass(doc)
    if ours:  # this process is on the GPU: the check must say so, naming it
        for doc in docs:
            pids = [p["pid"] for p in doc["devices"][0]["situation"]["processes"]]
            assert doc["busy"] and os.getpid() in pids, doc["reason"]
        RECORD["idle_note"] = "this pytest process held a context: the idle runs were busy with it"
        return
    for doc in docs:
        assert doc["verdict"] == "PASS" and doc["exit_code"] == 0 and not doc["busy"], doc["reason"]
    spread = {}
    for key in METRICS:
        values = [doc["devices"][0]["metrics"][key]["value"] for doc in docs]
        spread[key] = max(values) / min(values) - 1
    RECORD["idle_spread"] = spread
    assert max(spread.values()) <= 0.01, spread
    # An independent path: torch's copy_ in a process of its own; a copy "peak" below it is none.
    probe = subprocess.run([sys.executable, str(LOAD_SCRIPT), "copy-probe"], capture_output=True, text=True,
                           timeout=180)
    assert probe.returncode == 0, probe.stderr
    torch_copy = json.loads(probe.stdout.strip().splitlines()[-1])["tbps"]
    RECORD["torch_copy_tbps"] = torch_copy
    for doc in docs:
        assert doc["devices"][0]["metrics"]["hbm_copy"]["value"] >= 0.95 * torch_copy


# --- 2. beside each load ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(RUNS))
def test_check_beside_a_load_is_busy_never_wrong_never_noisy_pass(kind):
    with _load(kind) as load:
        docs = [_check() for _ in range(RUNS[kind])]
        strict = _check("--strict") if kind == "mixed" else None
    RECORD["loaded"] += [_summary(doc, kind) for doc in docs]
    if strict is not None:
        RECORD["strict"].append(_summary(strict, kind))
    for doc in docs + ([strict] if strict else []):
        assert not _wrong(doc), _wrong(doc)  # zero wrong data: the core's results never depend on the load
        _within_ceilings(doc)
        _no_noisy_pass(doc)
        sit = doc["devices"][0]["situation"]
        named = load.pid in [p["pid"] for p in sit["processes"]]
        assert doc["busy"] and sit["busy"], doc["reason"]
        assert named or any("busy (memory" in e or "% busy" in e for e in sit["evidence"]), sit
    for doc in docs:
        d = doc["devices"][0]
        # Not "slow card": a shortfall beside the load is UNKNOWN (busy), never WARN or FAIL.
        assert all(m["verdict"] in ("PASS", "UNKNOWN") for m in d["metrics"].values()), d["metrics"]
        assert doc["verdict"] != "FAIL" and doc["exit_code"] in (4, 6), doc["reason"]
        assert "busy" in doc["reason"]
    if strict is not None:
        assert strict["strict"] and strict["devices"][0]["situation"]["strict"]


# --- 3. every kernel family beside a load; the faults still fail ----------------------------------

def _sweep(core) -> dict:
    from roofline_ext.measure.bandwidth import _cfg as bw_cfg
    from roofline_ext.measure.smem import _cfg as sm_cfg

    MiB = 1 << 20
    done: dict[str, int] = {}

    def count(name):
        done[name] = done.get(name, 0) + 1

    for prec, paths in core.compute_paths(0).items():
        for path, cap in paths.items():
            if not cap["supported"]:
                continue
            for _ in range(2):
                good = core.compute_verify(0, prec, path)
                assert good["passed"], (prec, path, good["detail"])
                count(f"compute {prec} {path}")
            bad = core.compute_verify(0, prec, path, corrupt=True)
            assert not bad["passed"] and bad["mismatches"] > 0, (prec, path)
            count("compute corrupt failed")
    for pattern in ("read", "write", "copy", "triad"):
        rows = core.bandwidth_run(0, pattern, 256 * MiB, reps=3, warmup=1)
        assert all(r["verification"]["passed"] for r in rows if not r["skipped"]), pattern
        count(f"bandwidth {pattern}")
        with pytest.raises(core.VerificationError):
            core.bandwidth_run(0, pattern, 64 * MiB, reps=2, warmup=1, fault="short")
        count("bandwidth short failed")
    mix_cfg = [bw_cfg(256, 1, 0, "nc_na", "cs")]
    assert all(r["verification"]["passed"] for r in core.bandwidth_mix(0, 1, 1, 256 * MiB, reps=3, warmup=1,
                                                                        configs=mix_cfg))
    count("mix 1:1")
    with pytest.raises(core.VerificationError):
        core.bandwidth_mix(0, 1, 1, 64 * MiB, reps=2, warmup=1, configs=mix_cfg, fault="short")
    count("mix short failed")
    assert all(r["verification"]["passed"] for r in core.bandwidth_l2_read(0, 8 * MiB, 256 * MiB, reps=3, warmup=1)
               if not r["skipped"])
    count("l2")
    with pytest.raises(core.VerificationError):
        core.bandwidth_l2_read(0, 8 * MiB, 256 * MiB, reps=2, warmup=1, fault="short")
    count("l2 short failed")
    smem_cfg = [sm_cfg(256, 16, 8), sm_cfg(1024, 4, 16)]
    assert all(r["verification"]["passed"] for r in core.smem_run(0, reps=3, warmup=1, passes=50, configs=smem_cfg)
               if not r["skipped"])
    count("smem")
    with pytest.raises(core.VerificationError):
        core.smem_run(0, reps=2, warmup=1, passes=50, configs=smem_cfg[:1], fault="short")
    count("smem short failed")
    assert all(r["verification"]["passed"] for r in core.hostlink_run(0, 64 * MiB, 3, 1, 12345, "none"))
    count("hostlink")
    for fault in ("short", "short_d2h"):
        with pytest.raises(core.VerificationError):
            core.hostlink_run(0, 64 * MiB, 2, 1, 12345, fault)
        count("hostlink short failed")
    return done


@pytest.mark.parametrize("kind", list(RUNS))
def test_every_kernel_verifies_beside_a_load_and_faults_still_fail(kind):
    core = _core()
    with _load(kind):
        RECORD["verify_under_load"][kind] = _sweep(core)


def test_real_wrong_data_fails_though_the_card_is_busy():
    """A check whose BF16 verification really fails (the core's corrupted-operand injection) is FAIL,
    exit 5, beside the mixed load: busy never excuses wrong data."""
    from roofline_ext.check.native_backend import NativeCheckBackend
    from roofline_ext.check.run import run_check

    core = _core()

    class CorruptBF16(NativeCheckBackend):
        def measure(self, index, metric, setup):
            if metric != "bf16":
                return super().measure(index, metric, setup)
            v = core.compute_verify(index, "bf16", setup["path"], corrupt=True)
            assert not v["passed"]
            raise core.VerificationError(f"verification failed: {v['detail']}")

    with _load("mixed"):
        report = run_check("0", backend=CorruptBF16())
    doc = report.to_dict()
    RECORD["wrong_data_under_load"] = _summary({**doc, "command_wall_s": report.wall_s}, "mixed")
    m = report.devices[0].metric("bf16")
    assert m.verdict.value == "FAIL" and "wrong data" in m.reason
    assert report.exit_code == 5 and report.busy
