"""GPU tests are marked ``gpu``: skipped with the availability reason where no GPU can be measured,
and turned into failures by ``--require-gpu`` (scripts/gpu-check uses it) so a GPU machine whose
build silently lost its CUDA part cannot pass by skipping."""
from __future__ import annotations

import pytest


def pytest_addoption(parser):
    parser.addoption("--require-gpu", action="store_true", default=False,
                     help="fail (instead of skip) GPU tests when no GPU can be measured")


def pytest_collection_modifyitems(config, items):
    gpu_items = [i for i in items if "gpu" in i.keywords]
    if not gpu_items:
        return
    from roofline_ext.device.status import availability

    avail = availability()
    if avail.ok:
        return
    if config.getoption("--require-gpu"):
        fail = pytest.mark.usefixtures("_gpu_required_but_missing")
        for item in gpu_items:
            item.add_marker(fail)
        return
    skip = pytest.mark.skip(reason=f"no GPU: {avail.reason.value}: {avail.message}")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _private_calibration_cache(tmp_path_factory, monkeypatch):
    """Every test sees an empty calibration cache of its own, never the user's: a calibration cached
    on this machine must not change what analyze tests compute."""
    monkeypatch.setenv("ROOFLINE_EXT_CACHE_DIR", str(tmp_path_factory.mktemp("calibration-cache")))


@pytest.fixture
def _gpu_required_but_missing():
    from roofline_ext.device.status import availability

    avail = availability()
    pytest.fail(f"--require-gpu given but no GPU can be measured: {avail.reason.value}: {avail.message}")
