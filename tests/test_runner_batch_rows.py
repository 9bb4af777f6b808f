"""Every task given has its row: a timing job that never reports, or a worker that meets an
unusable GPU after other tasks were timed, is that task's failure, and the batch goes on
(docs/runner.md: the exploit suite came back without its last task on the H200, 2026-12-02)."""
from __future__ import annotations

from collections import deque

import textwrap

import pytest

pytest.importorskip("torch")

from roofline_ext.errors import GpuUnavailableError  # noqa: E402
from roofline_ext.model.gpu import resolve_gpu  # noqa: E402
from roofline_ext.runner import batch as batch_mod  # noqa: E402
from roofline_ext.runner.jobs import count  # noqa: E402
from roofline_ext.runner.pool import Outcome  # noqa: E402

TASK = textwrap.dedent("""
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return x * 2

    def get_inputs():
        return [torch.randn(1024, 1024)]

    def get_init_inputs():
        return []
""")


class _FakePool:
    """Counts in this process; timing outcomes as ``timing(job)`` says (None: the job never reports)."""

    def __init__(self, timing) -> None:
        self.timing = timing
        self.timeline: list = []
        self.one_job_timing = False  # each timing job waits for its task's count (Pool's default)

    def prestart(self, devices) -> None:
        pass

    def release_cpu(self) -> None:
        pass

    def run(self, jobs, on_start=None):
        self.queue = deque(jobs)
        while self.queue:
            job = self.queue.popleft()
            if job.device is None:
                yield Outcome(job, True, value=count(**job.kwargs))
                continue
            out = self.timing(job)
            if out is not None:
                yield out

    def add(self, job) -> None:  # a task's timing jobs, once its count is in (as Pool.add)
        self.queue.append(job)


def _reference(job, ms: float = 1.0) -> Outcome:
    timing = {"median_ms": ms, "mean_ms": ms, "best_ms": ms, "p10_ms": ms, "p90_ms": ms, "cv": 0.0, "trials": 10}
    return Outcome(job, True, value={"task": job.kwargs["path"], "device": "NVIDIA H200", "dtype": "torch.float32",
                                     "seed": 0, "inputs": "gpu", "t_ref_ms": ms, "reference": timing})


def _run(tmp_path, timing):
    paths = []
    for n in range(3):
        p = tmp_path / f"{n}_double.py"
        p.write_text(TASK)
        paths.append(p)
    opts = batch_mod.BatchOptions(timing=batch_mod.TimingOptions(devices=[0]))
    b = batch_mod._Batch(paths, resolve_gpu("H200"), opts, None, None, _FakePool(timing))
    return [r.to_dict() for r in b.run()]  # the typed results, as the writer gets them


def test_an_unusable_gpu_after_a_timed_task_is_that_tasks_row(tmp_path):
    def timing(job):
        if job.key[0] == 1:
            return Outcome(job, False, kind="gpu-unavailable", error="busy: another process holds the GPU")
        return _reference(job)

    rows = _run(tmp_path, timing)
    assert [r.get("status") for r in rows] == ["ok", "error", "ok"]
    assert rows[1]["error_kind"] == "gpu-unavailable" and "busy" in rows[1]["error"]


def test_an_unusable_gpu_at_the_first_timing_still_stops_the_batch_with_one_line(tmp_path):
    def timing(job):
        return Outcome(job, False, kind="gpu-unavailable", error="no CUDA device")

    with pytest.raises(GpuUnavailableError, match="cannot use the GPU"):
        _run(tmp_path, timing)


def test_a_job_that_never_reports_leaves_its_task_a_row(tmp_path):
    rows = _run(tmp_path, lambda job: None if job.key[0] == 2 else _reference(job))
    assert len(rows) == 3 and rows[2]["status"] == "error" and rows[2]["error_kind"] == "lost"
    assert "never reported" in rows[2]["error"]


def test_a_reply_that_is_not_what_the_worker_writes_is_that_tasks_row_naming_the_key(tmp_path):
    def timing(job):
        out = _reference(job)
        if job.key[0] == 1:
            out.value["reference"]["trials"] = "ten"  # typed once, where the runner reads it
        return out

    rows = _run(tmp_path, timing)
    assert [r.get("status") for r in rows] == ["ok", "error", "ok"]
    assert rows[1]["error_kind"] == "error" and "reference.trials is 'ten', not an integer" in rows[1]["error"]
