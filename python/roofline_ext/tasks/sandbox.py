"""The sandbox a task's own code runs in while it is counted or judged: what a task may change in
its process and we put back, and what it must not reach (the JSON on stdout, torch's logs).

Moved here from ``runner/analyze.py`` (issue 25, step 4): it is about a task, not about running
processes, and the counting worker (``runner/jobs.py``), the fork server's one-time quieting of
torch's logs (``runner/worker.py``) and the in-process path all use it.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings

__all__ = ["task_sandbox", "QUIET_TORCH_LOGS"]


@contextlib.contextmanager
def task_sandbox():
    """What a task may change and we put back: stdout (task prints must not corrupt JSON on stdout;
    they go to stderr), warnings and torch's logs (torch's chatter about the task is not ours to
    show), torch's default dtype (a task that calls torch.set_default_dtype must not change the
    next one)."""
    torch = sys.modules.get("torch")
    default_dtype = torch.get_default_dtype() if torch is not None else None
    with _fd1_to_stderr(), contextlib.redirect_stdout(sys.stderr), _quiet_torch_logs(), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.set_default_dtype(default_dtype or torch.float32)


@contextlib.contextmanager
def _fd1_to_stderr():
    """File descriptor 1 points at stderr while task code runs: ``os.write(1, ...)``,
    ``sys.__stdout__`` and child processes write the descriptor, not ``sys.stdout``."""
    for stream in (sys.stdout, sys.__stdout__):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = _redirect_fd(2, 1)
    try:
        yield
    finally:
        # What the task left in sys.__stdout__'s buffer was written while fd 1 was stderr: it goes
        # there too, before fd 1 is ours again.
        with contextlib.suppress(Exception):
            sys.__stdout__.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _redirect_fd(src: int, dst: int) -> int | None:
    """Point ``dst`` at ``src``; returns a copy of the old ``dst``, or None when there is no such
    descriptor (a daemon without stdout has nothing to protect)."""
    try:
        saved = os.dup(dst)
    except OSError:
        return None
    try:
        os.dup2(src, dst)
    except OSError:
        os.close(saved)
        return None
    return saved


#: The ``torch`` logger's level while a task runs (:func:`_quiet_torch_logs`): nothing it logs shows.
QUIET_TORCH_LOGS = logging.CRITICAL + 1


@contextlib.contextmanager
def _quiet_torch_logs():
    """torch logs a failed shape function as a 19-line ERROR traceback before the failure reaches
    us as one line; shown only when the ``roofline_ext`` logger is at DEBUG (``--debug``)."""
    if logging.getLogger("roofline_ext").isEnabledFor(logging.DEBUG):
        yield
        return
    log = logging.getLogger("torch")
    level = log.level
    if level == QUIET_TORCH_LOGS:
        # Quiet already (a counting worker: its fork server quieted torch's logs before it forked,
        # worker.quiet_torch_logs): setLevel would clear the cache of every logger (~220 with dynamo
        # loaded), which in a fresh fork writes ~330 pages that the server shares (1 ms and as many
        # page faults per task), to change nothing.
        yield
        return
    log.setLevel(QUIET_TORCH_LOGS)
    try:
        yield
    finally:
        log.setLevel(level)
