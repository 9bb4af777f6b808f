"""The no-GPU path: reasons, messages, exit codes and JSON shape, on this machine and simulated."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import roofline_ext
import roofline_ext.device.status  # noqa: F401  (the module, for _probe)
av = sys.modules["roofline_ext.device.status"]
from roofline_ext.device.status import Reason


class FakeCore:
    """Stands in for _core so each reason can be produced on any machine."""

    class NvmlError(RuntimeError):
        pass

    def __init__(self, cuda_compiled=True, nvml=None, probe=None):
        self.CUDA_COMPILED = cuda_compiled
        self._nvml = nvml
        self._probe = probe

    def nvml_system(self):
        if isinstance(self._nvml, Exception):
            raise self._nvml
        return self._nvml

    def cuda_probe(self):
        return self._probe


def probe(code, name="cudaErrorX", count=0, driver=0, runtime=13000):
    return {"code": code, "name": name, "message": "msg", "count": count,
            "driver_version": driver, "runtime_version": runtime}


NO_NVML = FakeCore.NvmlError("cannot load libnvidia-ml.so.1")


@pytest.mark.parametrize(
    "core, reason",
    [
        (None, Reason.NOT_BUILT),
        (FakeCore(nvml=NO_NVML, probe=probe(35, "cudaErrorInsufficientDriver")), Reason.NO_DRIVER),
        (FakeCore(nvml={"device_count": 1}, probe=probe(35, driver=12020)), Reason.DRIVER_TOO_OLD),
        (FakeCore(nvml={"device_count": 0}, probe=probe(100, "cudaErrorNoDevice", driver=13000)),
         Reason.NO_DEVICE),
        (FakeCore(nvml={"device_count": 1}, probe=probe(3, "cudaErrorInitializationError", driver=13000)),
         Reason.CUDA_ERROR),
        (FakeCore(nvml={"device_count": 2}, probe=probe(0, "cudaSuccess", count=2, driver=13000)), Reason.OK),
        (FakeCore(cuda_compiled=False, nvml={"device_count": 2}), Reason.NO_CUDA_BUILD),
        (FakeCore(cuda_compiled=False, nvml=NO_NVML), Reason.NO_DRIVER),
        (FakeCore(cuda_compiled=False, nvml={"device_count": 0}), Reason.NO_DEVICE),
    ],
)
def test_each_reason_has_its_own_one_line_message(core, reason):
    a = av._probe(core)
    assert a.reason is reason
    assert a.ok == (reason is Reason.OK)
    assert a.message and "\n" not in a.message
    assert a.to_dict() == {"available": a.ok, "reason": reason.value, "message": a.message}


def test_driver_too_old_names_both_versions():
    a = av._probe(FakeCore(nvml={"device_count": 1}, probe=probe(35, driver=12020, runtime=13000)))
    assert "12.2" in a.message and "13.0" in a.message


def test_import_touches_no_gpu_and_no_torch():
    # A fresh interpreter: importing the package must not load torch, CUDA or NVML.
    code = ("import sys, roofline_ext; "
            "bad = [m for m in ('torch', 'roofline_ext._core') if m in sys.modules]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_native_core_is_built_with_cuda():
    # CI installs with ROOFLINE_ENABLE_CUDA=ON; a build that silently lost its CUDA part fails here.
    import os

    from roofline_ext.device.native import core_or_none, import_error

    if os.environ.get("ROOFLINE_ENABLE_CUDA", "").upper() != "ON":
        pytest.skip("ROOFLINE_ENABLE_CUDA=ON not set: a host-only build is allowed")
    core = core_or_none()
    assert core is not None, import_error()
    assert core.CUDA_COMPILED is True
    assert core.build_info()["cuda_compiled"] is True
    for name in ("cuda_probe", "cuda_devices", "TelemetrySampler"):
        assert hasattr(core, name), name


def test_real_probe_is_consistent_with_devices():
    a = roofline_ext.availability(refresh=True)
    devs = roofline_ext.devices()
    if a.ok:
        assert any(d.can_measure for d in devs)
    else:
        assert not any(d.can_measure for d in devs)


def _run_cli(*args):
    return subprocess.run([sys.executable, "-m", "roofline_ext.cli", *args], capture_output=True, text=True)


def test_info_without_gpu_exits_3_with_one_line_reason():
    a = roofline_ext.availability()
    if roofline_ext.devices():
        pytest.skip(f"this machine has a GPU ({a.reason.value}); the no-GPU exit path is not reachable")
    r = _run_cli("info")
    assert r.returncode == 3
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and a.message in lines[0]
    r = _run_cli("info", "--json")
    assert r.returncode == 3
    assert json.loads(r.stdout) == {"available": False, "reason": a.reason.value, "message": a.message}


def test_require_measurement_raises_with_reason(monkeypatch):
    from roofline_ext.errors import GpuUnavailableError

    fake = av.Availability(Reason.NO_DRIVER, "no NVIDIA driver found on this machine (x)")
    monkeypatch.setattr(av, "availability", lambda refresh=False: fake)
    with pytest.raises(GpuUnavailableError) as e:
        av.require_measurement(0)
    assert e.value.availability.reason is Reason.NO_DRIVER
    assert e.value.exit_code == 3
