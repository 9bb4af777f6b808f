"""``--compile`` through the pool, without a GPU: torch.compile for real on the CPU (inductor's C++
backend) in the real timing worker, with the CPU stand-in for the GPU backend (fakes/runner.py).

What is checked: the compiler is warmed up once per timing worker, before the snapshot, so that
compiled tasks leave the worker reusable (one worker for the whole batch, no replacement); each
compiled task starts from a reset dynamo; a compile that crashes costs the compiled time only (the
reference's time stays); the run's compile caches live in a folder of its own that is gone after.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from roofline_ext.cli import main
from roofline_ext.runner import compiling
from fakes.runner import GOOD, good_tasks, install_fake_backend, write

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                reason="inductor's CPU backend needs a C++ compiler")


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    import roofline_ext.model.gpu as gpu_mod

    monkeypatch.setattr(gpu_mod, "local_device", lambda: None)


def _batch(capsys, folder: Path, out: Path, *extra) -> tuple[int, dict, str]:
    rc = main(["analyze", str(folder), "--gpu", "H200", "--no-progress", "--json", str(out), *extra])
    _, err = capsys.readouterr()
    return rc, json.loads(out.read_text()), err


def _compile_dirs() -> set[str]:
    import tempfile

    return {p.name for p in Path(tempfile.gettempdir()).glob("roofline-ext-compile-*")}


@pytest.mark.slow
def test_compiled_tasks_share_one_warm_timing_worker(tmp_path, capsys, monkeypatch):
    setups = install_fake_backend(tmp_path, monkeypatch)
    folder = tmp_path / "tasks"
    good_tasks(folder, names=("1_a", "2_b", "3_c"), sizes=(16, 24, 16))
    # A temporary folder of this test's own: a test beside it in another xdist worker may be
    # compiling too, and its cache folder is not this run's to remove.
    import tempfile

    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(own_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    dirs_before = _compile_dirs()
    rc, doc, err = _batch(capsys, folder, tmp_path / "out.json", "--compile")
    assert rc == 0, err
    tasks = doc["tasks"]
    assert [t["status"] for t in tasks] == ["ok"] * 3
    assert len(setups.read_text().split()) == 1  # one timing worker for the batch
    assert not any(t.get("worker_replaced") for t in tasks), [t.get("worker_replaced") for t in tasks]
    pids = {t["timing"]["compiled_correctness"]["pid"] for t in tasks}
    assert len(pids) == 1 and pids == {t["timing"]["state"]["pid"] for t in tasks}
    for t in tasks:
        assert t["compiled_correct"] is True and t["compile_error"] is None
        assert t["t_compile_ms"] == 0.5 and t["t_ref_ms"] > 0
        assert set(t["wall_parts_s"]) >= {"reference", "compile"}
        assert all(r is None or r["compile_fraction"] == pytest.approx(r["t_min_ms"] / 0.5)
                   for r in t["roofs"].values())
    # 1_a and 3_c are one graph: after the reset the second compiles again, from the run's disk cache
    # (inductor's own counter says so; two wall times on a loaded 2-core machine would not).
    assert tasks[2]["timing"]["compile_cache_hit"] is True
    assert _compile_dirs() == dirs_before  # the run's cache folder is removed


@pytest.mark.slow
def test_a_compile_that_crashes_costs_the_compiled_time_only(tmp_path, capsys, monkeypatch):
    setups = install_fake_backend(tmp_path, monkeypatch, compile_warm_up=False)
    folder = tmp_path / "tasks"
    good_tasks(folder, names=("1_a",), sizes=(8,))
    write(folder, "2_compile_segv.py", GOOD.replace("{n}", "8"))
    rc, doc, _ = _batch(capsys, folder, tmp_path / "out.json", "--compile")
    by = {t["task"]: t for t in doc["tasks"]}
    bad = by["2_compile_segv"]
    assert bad["status"] == "ok" and bad["t_ref_ms"] > 0  # the reference's time stays
    assert bad["t_compile_ms"] is None and bad["compiled_correct"] is None
    assert bad["timing"]["compile_error_kind"] == "crash" and "SIGSEGV" in bad["compile_error"]
    assert by["1_a"]["compiled_correct"] is True
    # Without the warm-up, torch.compile's first changes to the process replace the worker: what
    # the warm-up is for.
    assert any("torch.nn.Module.__init__" in r for r in by["1_a"]["worker_replaced"])
    assert len(setups.read_text().split()) == 2  # the second for task 2, after that replacement
    assert rc == 0  # a compile that fails is a result of the task, not a failed task


def test_run_caches_never_replace_what_the_user_set(tmp_path):
    caches = compiling.RunCaches()
    add = caches.env({"TRITON_CACHE_DIR": "/mine", compiling.THREADS_ENV: "3"})
    try:
        assert set(add) == {"TORCHINDUCTOR_CACHE_DIR"}
        assert caches.root is not None and add["TORCHINDUCTOR_CACHE_DIR"].startswith(caches.root)
        root = caches.root
    finally:
        caches.close()
    assert not os.path.exists(root)
    assert compiling.RunCaches().env(dict.fromkeys((*compiling.CACHE_ENV, compiling.THREADS_ENV), "x")) == {}
    assert compiling.compile_threads(64) == compiling.MAX_COMPILE_THREADS and compiling.compile_threads(1) == 1
