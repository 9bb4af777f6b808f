"""The no-GPU path: reasons, messages, exit codes and JSON shape, on this machine and simulated."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

import roofline_ext
from roofline_ext.device import status as av
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
    # A host-only build must be asked for (ROOFLINE_ENABLE_CUDA=OFF, at install and here); any other
    # build that lost its CUDA part (no nvcc found, a silent CMake warning) fails here instead of
    # skipping, so the README's test command cannot pass on it.
    import os

    from roofline_ext.device.native import core_or_none, import_error

    core = core_or_none()
    assert core is not None, import_error()
    info = core.build_info()
    assert info["cuda_compiled"] is bool(core.CUDA_COMPILED)
    if os.environ.get("ROOFLINE_ENABLE_CUDA", "").upper() == "OFF":
        assert core.CUDA_COMPILED is False, "ROOFLINE_ENABLE_CUDA=OFF, but this build has a CUDA part"
        return
    assert core.CUDA_COMPILED is True, (
        "this build of roofline_ext has no CUDA part (no nvcc at install?): reinstall with nvcc on "
        "PATH, or declare a host-only build with ROOFLINE_ENABLE_CUDA=OFF (at install and test)")
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


@pytest.mark.slow
def test_info_without_gpu_exits_3_with_one_line_reason():
    a = roofline_ext.availability()
    if roofline_ext.devices():
        pytest.skip(f"this machine has a GPU ({a.reason.value}); the no-GPU exit path is not reachable")
    r = _run_cli("info")
    assert r.returncode == 3
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and a.message in lines[0]
    # Whether this build could measure at all is said without a GPU too.
    assert "CUDA compiled in: " in r.stdout
    r = _run_cli("info", "--json")
    assert r.returncode == 3
    out = json.loads(r.stdout)
    assert {k: out[k] for k in ("available", "reason", "message")} == a.to_dict()
    assert out["devices"] == [] and isinstance(out["build"]["can_measure"], bool)


@pytest.mark.parametrize("compiled, said", [(True, "CUDA compiled in: yes (this build can measure)"),
                                            (False, "CUDA compiled in: no, this build can identify GPUs "
                                                    "but never measure them")])
def test_info_says_whether_the_build_can_measure(monkeypatch, capsys, compiled, said):
    from roofline_ext.cli import main
    from roofline_ext.device import native

    fake = SimpleNamespace(build_info=lambda: {"version": "x", "cuda_compiled": compiled,
                                               "cuda_runtime_version": 13000 if compiled else 0})
    monkeypatch.setattr(native, "core_or_none", lambda: fake)
    monkeypatch.setattr("roofline_ext.cli.commands.info.devices", lambda: [])
    assert main(["info"]) == 3
    assert said in capsys.readouterr().out
    assert main(["info", "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["build"]["can_measure"] is compiled


def test_info_without_a_native_core_says_it_cannot_measure(monkeypatch, capsys):
    from roofline_ext.cli import main
    from roofline_ext.device import native

    monkeypatch.setattr(native, "core_or_none", lambda: None)
    monkeypatch.setattr(native, "import_error", lambda: "ImportError: no _core")
    monkeypatch.setattr("roofline_ext.cli.commands.info.devices", lambda: [])
    assert main(["info"]) == 3
    assert "native core not importable (ImportError: no _core): this build cannot measure" in capsys.readouterr().out


# --- --require-gpu ------------------------------------------------------------------------------

_CONFTEST = Path(__file__).with_name("conftest.py")


def _pytest_on(tmp_path: Path, body: str, *flags: str, gpu_machine: bool = False) -> subprocess.CompletedProcess:
    """Run pytest in a fresh process on one test file, with this suite's conftest.py (told that a
    GPU can be measured, with ``gpu_machine``)."""
    conftest = _CONFTEST.read_text()
    if gpu_machine:
        conftest += "\n\ndef _no_gpu_reason():\n    return None  # as on a GPU machine\n"
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    (tmp_path / "test_probe.py").write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--strict-markers",
                           str(tmp_path / "test_probe.py"), *flags],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


DO_NOTHING = """
    import pytest

    @pytest.mark.gpu
    def test_does_nothing():
        pass
"""


@pytest.mark.slow
def test_require_gpu_fails_a_gpu_test_that_does_nothing_without_a_gpu(tmp_path):
    if roofline_ext.availability().ok:
        pytest.skip("a GPU can be measured here: the do-nothing GPU test passes, as it should")
    r = _pytest_on(tmp_path, DO_NOTHING, "--require-gpu")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed" in r.stdout and "--require-gpu given but no GPU can be measured" in r.stdout
    r = _pytest_on(tmp_path, DO_NOTHING)
    assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout + r.stderr


@pytest.mark.slow
def test_require_gpu_fails_a_skip_inside_a_gpu_test(tmp_path):
    # As on a GPU machine: a GPU test that skips itself (torch without CUDA, a missing tool) fails
    # under the flag; a test without the mark may still skip, and without the flag both skip.
    body = DO_NOTHING + """
    @pytest.mark.gpu
    def test_skips_itself():
        pytest.skip("torch has no CUDA here")

    def test_not_gpu_skips():
        pytest.skip("not a GPU test")
    """
    r = _pytest_on(tmp_path, body, "--require-gpu", gpu_machine=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed, 1 skipped" in r.stdout, r.stdout
    assert "this GPU test skipped instead of checking" in r.stdout and "torch has no CUDA here" in r.stdout
    r = _pytest_on(tmp_path, body, gpu_machine=True)
    assert r.returncode == 0 and "1 passed, 2 skipped" in r.stdout, r.stdout


def test_require_measurement_raises_with_reason(monkeypatch):
    from roofline_ext.errors import GpuUnavailableError

    fake = av.Availability(Reason.NO_DRIVER, "no NVIDIA driver found on this machine (x)")
    monkeypatch.setattr(av, "availability", lambda refresh=False: fake)
    with pytest.raises(GpuUnavailableError) as e:
        av.require_measurement(0)
    assert e.value.availability.reason is Reason.NO_DRIVER
    assert e.value.exit_code == 3
