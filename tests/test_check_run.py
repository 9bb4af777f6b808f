"""roofline-ext check: verdicts, tolerances, state items and exit codes, on a fake H200 (no GPU).

The figures are fixtures (tests/fakes/check.py), not measurements.
"""
from __future__ import annotations

import json

import pytest
from pathlib import Path

from fakes.check import FakeCheckBackend, core_error, healthy_state
from roofline_ext.check import run as check_run
from roofline_ext.check.run import calibrated_value, hbm_buffer_bytes, plan, run_check
from roofline_ext.check.tolerances import DEFAULT_TOLERANCES, parse_tolerances
from roofline_ext.check.outcome import EXIT_CODES, Verdict, compare, worst
from roofline_ext.device.health import ComputeProcess
from roofline_ext.errors import UserError


def _check(backend, device="0", **tol):
    return run_check(device, tolerances=parse_tolerances([f"{k}={v}" for k, v in tol.items()]), backend=backend)


# --- verdict arithmetic ----------------------------------------------------------------------------

def test_compare_bands():
    assert compare("HBM", 4.40, 4.61, 0.05, "calibration", "TB/s").verdict is Verdict.PASS  # 4.6% below
    assert compare("HBM", 4.30, 4.61, 0.05, "calibration", "TB/s").verdict is Verdict.WARN  # 6.7% below
    assert compare("HBM", 4.10, 4.61, 0.05, "calibration", "TB/s").verdict is Verdict.FAIL  # 11% below
    fast = compare("HBM", 5.2, 4.61, 0.05, "calibration", "TB/s")
    assert fast.verdict is Verdict.WARN and "recalibrate" in fast.reason
    assert compare("HBM", 5.2, 4.61, 0.05, "reference", "TB/s").verdict is Verdict.PASS


def test_severity_order_and_exit_codes():
    assert worst([Verdict.PASS, Verdict.UNKNOWN]) is Verdict.UNKNOWN
    assert worst([Verdict.UNKNOWN, Verdict.WARN, Verdict.PASS]) is Verdict.WARN
    assert worst([Verdict.WARN, Verdict.FAIL]) is Verdict.FAIL
    assert worst([]) is Verdict.UNKNOWN
    assert EXIT_CODES == {Verdict.PASS: 0, Verdict.WARN: 4, Verdict.FAIL: 5, Verdict.UNKNOWN: 6}


def test_tolerance_parsing():
    t = parse_tolerances(["hbm=0.03", "bf16=10%,h2d=0.2"])
    assert t["hbm_read"] == t["hbm_copy"] == 0.03 and t["bf16"] == pytest.approx(0.10) and t["h2d"] == 0.2
    assert t["fp32"] == DEFAULT_TOLERANCES["fp32"]
    assert set(parse_tolerances(["all=0.2"]).values()) == {0.2}
    for bad, match in (("hbm", "METRIC=FRACTION"), ("l3=0.1", "unknown metric"), ("hbm=x", "not a number"),
                       ("hbm=0.9", "between 0 and 0.5"), ("hbm=0", "between")):
        with pytest.raises(UserError, match=match):
            parse_tolerances([bad])


# --- planning -------------------------------------------------------------------------------------

def test_plan_reuses_the_calibrations_kernels():
    b = FakeCheckBackend()
    cal = b.cals[b.devs[0].uuid]
    cal["burst"]["entries"]["bf16"]["config"] = {"warpgroups": 2, "a_from_registers": 1, "swizzle": 128}
    setups, skipped = plan(b.devs[0], cal, b.caps, 140 << 30)
    assert list(setups) == ["bf16", "fp32", "hbm_read", "hbm_copy", "h2d", "d2h"] and not skipped
    assert setups["hbm_read"]["config"]["unroll"] == 16 and "grid" not in setups["hbm_read"]["config"]
    assert setups["hbm_copy"]["config"]["store"] == "cs"
    assert setups["bf16"]["path"] == "wgmma" and setups["bf16"]["config"]["warpgroups"] == 2
    assert setups["hbm_read"]["buffer_bytes"] == 2 << 30


def test_plan_without_calibration_and_without_a_path():
    b = FakeCheckBackend()
    b.caps = {"bf16": {"mma.sync": {"supported": False, "reason": "needs cc 8.0"}}, "fp32": {"simt": {"supported": True}}}
    setups, skipped = plan(b.devs[0], None, b.caps, 140 << 30)
    assert "bf16" not in setups and "cc 8.0" in skipped["bf16"]
    from roofline_ext.measure.bandwidth import DEFAULT_CONFIGS

    assert setups["hbm_read"]["config"] == DEFAULT_CONFIGS["read"][0]


def test_hbm_buffer_size_policy():
    assert hbm_buffer_bytes(60 << 20, None) == 2 << 30
    assert hbm_buffer_bytes(512 << 20, None) == 4 << 30  # 8 x L2 when that is larger
    assert hbm_buffer_bytes(60 << 20, 3 << 30) < 2 << 30  # two buffers must fit in free memory
    with pytest.raises(UserError, match="too little free"):
        hbm_buffer_bytes(60 << 20, 100 << 20)


def test_calibrated_values_come_from_patterns_and_the_hostlink_section():
    cal = FakeCheckBackend().cals["GPU-00000000-fixture-0000-000000000000"]
    assert calibrated_value(cal, "hbm_read") == 4.61 and calibrated_value(cal, "hbm_copy") == 4.312
    assert calibrated_value(cal, "bf16") == 949.3 and calibrated_value(cal, "h2d") == 55.4
    del cal["burst"]["entries"]["hbm"]["patterns"]
    assert calibrated_value(cal, "hbm_copy") == 4.312 and calibrated_value(cal, "hbm_read") is None
    assert calibrated_value(None, "fp32") is None


# --- whole runs -----------------------------------------------------------------------------------

def test_healthy_card_passes():
    r = _check(FakeCheckBackend())
    d = r.devices[0]
    assert r.verdict is Verdict.PASS and r.exit_code == 0, r.reason
    assert [m.key for m in d.metrics] == ["bf16", "fp32", "hbm_read", "hbm_copy", "h2d", "d2h"]
    for m in d.metrics:
        assert {c.against for c in m.comparisons} == {"calibration", "reference"}, m
    assert d.sku == "H200" and d.reference["kind"] == "measured" and d.calibration["mode"] == "full"
    doc = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert doc["kind"] == "roofline_ext.check" and doc["devices"][0]["metrics"]["hbm_read"]["value"] == 4.58


@pytest.mark.parametrize("figure,expected", [(0.93, Verdict.WARN), (0.88, Verdict.FAIL), (0.97, Verdict.PASS)])
def test_slow_hbm(figure, expected):
    b = FakeCheckBackend()
    b.figures[0]["hbm_read"] = 4.61 * figure
    r = _check(b)
    assert r.devices[0].metric("hbm_read").verdict is expected and r.verdict is expected
    if expected is not Verdict.PASS:
        assert "HBM read" in r.reason and r.exit_code == EXIT_CODES[expected]


def test_tolerance_override_turns_a_warn_into_a_pass():
    b = FakeCheckBackend()
    b.figures[0]["bf16"] = 870.0  # 8.4% below the calibration: a WARN at the default 7%
    assert _check(b).verdict is Verdict.WARN
    assert _check(b, bf16=0.10).verdict is Verdict.PASS


def test_wrong_data_fails_and_a_cuda_error_fails_and_the_rest_still_runs():
    b = FakeCheckBackend()
    b.errors[(0, "bf16")] = core_error("VerificationError", "verification failed: accumulator 3 of CTA 7")
    b.errors[(0, "h2d")] = core_error("CudaError", "CUDA error cudaErrorMemoryAllocation (2): out of memory")
    r = _check(b)
    d = r.devices[0]
    assert d.metric("bf16").verdict is Verdict.FAIL and "wrong data" in d.metric("bf16").reason
    assert d.metric("h2d").verdict is Verdict.FAIL and "out of memory" in d.metric("h2d").reason
    assert d.metric("hbm_read").verdict is Verdict.PASS and r.exit_code == 5


def test_a_bug_is_not_swallowed():
    b = FakeCheckBackend()
    b.errors[(0, "fp32")] = KeyError("oops")
    with pytest.raises(KeyError):
        _check(b)


def test_no_calibration_and_unknown_sku_is_unknown():
    b = FakeCheckBackend(calibrated=False)
    b.devs[0] = type(b.devs[0])(**{**b.devs[0].__dict__, "name": "NVIDIA Imaginary X1"})
    r = _check(b)
    assert r.verdict is Verdict.UNKNOWN and r.exit_code == 6
    m = r.devices[0].metric("hbm_read")
    assert m.verdict is Verdict.UNKNOWN and "no calibration" in m.reason and "no reference" in m.reason
    # The host link still has its reference: the link's own theoretical rate.
    assert r.devices[0].metric("h2d").verdict is Verdict.PASS


def test_no_calibration_compares_with_the_reference_only():
    r = _check(FakeCheckBackend(calibrated=False))
    assert r.verdict is Verdict.PASS
    assert [c.against for c in r.devices[0].metric("bf16").comparisons] == ["reference"]


def test_no_gpu_is_unknown_with_the_reason():
    r = _check(FakeCheckBackend(available=False))
    assert r.verdict is Verdict.UNKNOWN and r.exit_code == 3 and r.devices == ()
    assert "no NVIDIA driver" in r.reason


def test_device_all_takes_the_worst():
    b = FakeCheckBackend(n=3)
    b.figures[2]["hbm_copy"] = 3.5
    r = _check(b, device="all")
    assert [d.verdict for d in r.devices] == [Verdict.PASS, Verdict.PASS, Verdict.FAIL]
    assert r.verdict is Verdict.FAIL and r.reason.startswith("GPU 2:")
    with pytest.raises(UserError, match="no CUDA device 7"):
        _check(b, device="7")
    with pytest.raises(UserError, match="CUDA index"):
        _check(b, device="first")


# --- state ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("over,key,verdict,words", [
    ({"ecc_uncorrected_volatile": 2}, "ecc_errors", Verdict.FAIL, "uncorrectable"),
    ({"ecc_uncorrected_aggregate": 1}, "ecc_errors", Verdict.WARN, "board's life"),
    ({"remap_pending": True}, "row_remapping", Verdict.WARN, "reset"),
    ({"remap_failure": True}, "row_remapping", Verdict.FAIL, "replace"),
    ({"retired_pages_pending": True}, "retired_pages", Verdict.WARN, "pending"),
    ({"clock_event_reasons": ("hw_slowdown",)}, "clock_event_reasons", Verdict.WARN, "hw_slowdown"),
    # Busy: the figures are shared, nothing is held against the card (tests/test_check_verdicts.py).
    ({"compute_processes": (ComputeProcess(4242, 8 << 30),)}, "compute_processes", Verdict.UNKNOWN, "pid 4242 (8192 MiB)"),
    ({"temperature_c": 86}, "temperature", Verdict.WARN, "slowdown"),
    ({"temperature_c": 92}, "temperature", Verdict.FAIL, "shutdown"),
    ({"mig_mode": "enabled"}, "mig", Verdict.WARN, "instance"),
    ({"ecc_mode": "disabled", "ecc_pending": "disabled"}, "ecc_mode", Verdict.WARN, "calibrated"),
])
def test_state_items(over, key, verdict, words):
    b = FakeCheckBackend()
    b.start[0] = healthy_state(**over)
    r = _check(b)
    item = next(s for s in r.devices[0].state if s.key == key)
    assert item.verdict is verdict and words in item.reason
    assert r.verdict is verdict


def test_pcie_link_is_read_after_the_copies():
    b = FakeCheckBackend()
    b.start[0] = healthy_state(pcie_gen=1)  # idle links train down: not a finding before the copies
    b.end[0] = healthy_state(pcie_gen=4)
    r = _check(b)
    item = next(s for s in r.devices[0].state if s.key == "pcie_link")
    assert item.verdict is Verdict.WARN and "gen 4 x16, below the gen 5 x16" in item.reason
    # The host-link reference is the link as it should be, 85% of gen 5 x16, not of the gen 4 it trained to.
    assert r.devices[0].metric("h2d").comparison("reference").expected == pytest.approx(0.85 * 63.015, rel=1e-3)
    b.figures[0]["h2d"] = 26.0  # what a gen 4 link delivers: far below the healthy link's reference
    assert _check(b).devices[0].metric("h2d").verdict is Verdict.FAIL


def test_our_own_process_is_not_another_process():
    import os

    b = FakeCheckBackend()
    b.start[0] = healthy_state(compute_processes=(ComputeProcess(os.getpid(), 500 << 20),))
    assert _check(b).verdict is Verdict.PASS


def test_slowdown_during_the_measurement():
    b = FakeCheckBackend()
    b.telemetry[(0, "bf16")] = {"throttle_reasons": ["sw_power_cap", "hw_power_brake_slowdown"]}
    r = _check(b)
    item = next(s for s in r.devices[0].state if s.key == "slowdown_during_check")
    assert item.verdict is Verdict.WARN and "hw_power_brake_slowdown during bf16" in item.reason


def test_nvml_missing_is_unknown_state():
    b = FakeCheckBackend()
    b.start[0] = healthy_state().__class__(pci_bus_id="x", error="cannot load libnvidia-ml.so.1")
    r = _check(b)
    assert [s.key for s in r.devices[0].state] == ["nvml"] and r.verdict is Verdict.UNKNOWN


# --- the command ----------------------------------------------------------------------------------

@pytest.fixture
def fake_native(monkeypatch):
    b = FakeCheckBackend()
    from roofline_ext.check import native_backend as native

    monkeypatch.setattr(native, "NativeCheckBackend", lambda: b)
    return b


def test_cli_json_and_output_file(fake_native, tmp_path, capsys):
    from roofline_ext.cli.app import main

    out = tmp_path / "check.json"
    assert main(["check", "--json", "-o", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(out.read_text()) and printed["verdict"] == "PASS" and printed["exit_code"] == 0


def test_cli_table_and_exit_code_of_a_warn(fake_native, capsys):
    from roofline_ext.cli.app import main

    fake_native.figures[0]["fp32"] = 61.0
    assert main(["check"]) == 4
    out = capsys.readouterr().out
    assert "GPU 0: NVIDIA H200" in out and "check: WARN (exit 4)" in out and "FP32" in out
    assert main(["check", "--tolerance", "fp32=0.1", "--quiet"]) == 0


def test_cli_writes_through_a_character_device(fake_native, capsys):
    from roofline_ext.cli.app import main

    assert main(["check", "-o", "/dev/null", "--quiet"]) == 0  # a device is written to as it is (report/outputs.py)
    assert fake_native.calls


@pytest.mark.parametrize("target", ["DIR", "MISSING/x.json"])
def test_cli_refuses_a_folder_and_a_missing_folder(fake_native, tmp_path, capsys, target):
    from roofline_ext.cli.app import main

    path = {"DIR": str(tmp_path), "MISSING/x.json": str(tmp_path / "missing" / "x.json")}.get(target, target)
    assert main(["check", "-o", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("roofline-ext: error: ") and Path(path).name in err[0], err
    assert fake_native.calls == []  # refused before measuring anything


def test_cli_on_this_machine_without_a_gpu_is_unknown_not_a_traceback(capsys):
    """The real backend: on a GPU-less machine the check says UNKNOWN and why (exit 3)."""
    from roofline_ext.cli.app import main
    from roofline_ext.device.status import availability

    if availability().ok:
        pytest.skip("this machine has a GPU")
    for argv in (["check"], ["check", "--device", "all", "--json"]):
        assert main(argv) == 3
        out = capsys.readouterr().out
        assert "UNKNOWN" in out and "Traceback" not in out
    doc = (main(["check", "--json"]), json.loads(capsys.readouterr().out))[1]
    assert doc["verdict"] == "UNKNOWN" and doc["devices"] == [] and doc["availability"]["available"] is False


def test_check_module_constants_match_the_docs():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "check.md").read_text()
    for k, v in DEFAULT_TOLERANCES.items():
        assert f"`{k}`" in text and f"{v:.0%}" in text
    assert f"{check_run.HBM_MIN_BYTES >> 30} GiB" in text
