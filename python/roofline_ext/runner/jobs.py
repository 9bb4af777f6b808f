"""The job functions workers run, named ``"roofline_ext.runner.jobs:<name>"`` in a job.

Each takes plain arguments and returns something JSON can carry: the reply crosses a process
boundary (:mod:`.channel`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..tasks.counting import count_task, require_torch
from ..tasks.loading import load_task
from ..tasks.sandbox import task_sandbox

COUNT = "roofline_ext.runner.jobs:count"
TIME_REFERENCE = "roofline_ext.runner.timing_jobs:time_reference"
TIME_CANDIDATE = "roofline_ext.runner.timing_jobs:time_candidate"
GPU_BACKEND = "roofline_ext.runner.gpu_backend"
CPU_BACKEND = "roofline_ext.runner.cpu_backend"

#: True in a worker that runs one job and then exits (``worker.serve_once`` sets it): a count there
#: need not make its task forget the helper modules it imported (``load_task(forget_helpers=False)``),
#: since the process ends with the task, and skipping that saves 7-10 ms of every count.
PROCESS_ENDS_WITH_JOB = False


def count(path: str, dtype: str | None = None, ops: bool = False) -> dict[str, Any]:
    """The task's :class:`~roofline_ext.tasks.counting.Counts` as a dict (``Counts(**d)`` rebuilds it);
    ``ops``: with its per-op rows."""
    require_torch()
    with task_sandbox():
        task = load_task(path, forget_helpers=not PROCESS_ENDS_WITH_JOB)
        try:
            counts = count_task(task, dtype, ops=ops)
        finally:
            task.unload()
    return dataclasses.asdict(counts)
