"""GPU tests are marked ``gpu``: skipped with the availability reason where no GPU can be measured.

Under ``--require-gpu`` (scripts/gpu-check uses it) every skip of a GPU test is a failure instead:
the machine-level skip, and any ``pytest.skip``/``importorskip`` inside a GPU test (torch without
CUDA, a missing tool). A GPU machine whose build silently lost its CUDA part, or whose torch is a
CPU build, cannot pass by skipping. ``tests/test_availability.py`` runs pytest on a do-nothing GPU
test to prove it.
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption("--require-gpu", action="store_true", default=False,
                     help="fail (instead of skip) GPU tests when no GPU can be measured")


def _no_gpu_reason() -> str | None:
    from roofline_ext.device.status import availability

    avail = availability()
    return None if avail.ok else f"{avail.reason.value}: {avail.message}"


def _gpu_test(item) -> bool:
    return item.get_closest_marker("gpu") is not None


def pytest_collection_modifyitems(config, items):
    if config.getoption("--require-gpu"):
        return  # nothing is skipped: pytest_runtest_call fails each GPU test instead
    gpu_items = [i for i in items if _gpu_test(i)]
    reason = _no_gpu_reason() if gpu_items else None
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"no GPU: {reason}")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    # A hook, not a fixture added at collection: a fixture added that late is never set up, which
    # is how --require-gpu once did nothing. Here, before the test body runs, it fails the test.
    if item.config.getoption("--require-gpu") and _gpu_test(item):
        reason = _no_gpu_reason()
        if reason is not None:
            pytest.fail(f"--require-gpu given but no GPU can be measured: {reason}", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and not hasattr(report, "wasxfail") and _gpu_test(item)
            and item.config.getoption("--require-gpu")):
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"--require-gpu: this GPU test skipped instead of checking: {why}"


@pytest.fixture(autouse=True)
def _private_calibration_cache(tmp_path_factory, monkeypatch):
    """Every test sees an empty calibration cache of its own, never the user's: a calibration cached
    on this machine must not change what analyze tests compute."""
    monkeypatch.setenv("ROOFLINE_EXT_CACHE_DIR", str(tmp_path_factory.mktemp("calibration-cache")))


@pytest.fixture
def analyze_in_process():
    """``roofline-ext analyze ARGV`` as ``main()`` in this process with ``--isolation process``:
    the task is counted here, not by a worker pool. A pool starts a fork server that imports torch
    (about 2.2 s per ``analyze`` on the 2-core CI-class VM, against 0.01 s counting here), which a
    test pays for nothing when what it checks is the report, the numbers or the arguments. Tests of
    the pool, of isolation or of process behaviour (a task's own exit or Ctrl-C, workers, the fork
    server) call ``main()`` without it, through the pool. ``before`` goes ahead of ``analyze``
    (global flags such as ``--debug``). Returns the exit code."""
    from roofline_ext.cli import main

    def run(*argv, before=()):
        return main([*map(str, before), "analyze", "--isolation", "process", *map(str, argv)])

    return run
