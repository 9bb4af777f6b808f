"""Run one task's GPU timing in a subprocess of its own.

A task can take its process down in ways no ``except`` catches: an illegal memory access poisons the
CUDA context for good, an out-of-memory can leave the allocator unusable, a hang never returns.
Each task therefore runs in a fresh interpreter (``python -m roofline_ext.runner.isolation``) that reads
its arguments as JSON on stdin and writes one JSON line on stdout; the parent records whatever
happened to that task (crash, signal, timeout) and the batch goes on.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

from ..errors import GpuUnavailableError, RooflineError
from . import channel
from .timing_jobs import time_task

RESULT_PREFIX = "ROOFLINE_RESULT "
# Bound now, before the task is imported: a task that replaces json.dumps cannot change its result.
_encode = channel.encode_reply


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def run_isolated(kwargs: dict[str, Any], timeout_s: float = 300.0) -> dict[str, Any]:
    """``timing.time_task(**kwargs)`` in a child process.

    Returns ``{"ok": True, "result": {...}}`` or ``{"ok": False, "error": one line, "kind": ...}``
    where kind is the TaskError kind, ``crash``, ``timeout`` or ``gpu-unavailable``.
    """
    cmd = [sys.executable, "-m", "roofline_ext.runner.isolation"]
    try:
        # A session of its own so a timeout kills the task's whole process group (compile workers).
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
    except OSError as exc:
        return {"ok": False, "kind": "crash", "error": f"cannot start worker: {exc}"}
    try:
        out, err = proc.communicate(json.dumps(kwargs), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return {"ok": False, "kind": "timeout", "error": f"timed out after {timeout_s:g} s (killed)"}
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = str(-proc.returncode)
        why = f"worker killed by {sig}"
    else:
        why = f"worker exited with code {proc.returncode}"
    detail = _last_line(err)
    return {"ok": False, "kind": "crash", "error": f"{why}: {detail}" if detail else why}


def _main() -> int:
    kwargs = json.loads(sys.stdin.read())
    try:
        payload = {"ok": True, "result": time_task(**kwargs)}
    except GpuUnavailableError as exc:
        payload = {"ok": False, "kind": "gpu-unavailable", "error": str(exc)}
    except RooflineError as exc:
        payload = {"ok": False, "kind": getattr(exc, "kind", "error"), "error": str(exc)}
    except Exception as exc:  # CUDA errors surface as RuntimeError from torch: one line, this task only
        msg = " ".join(str(exc).split())[:300]
        payload = {"ok": False, "kind": "error", "error": f"{type(exc).__name__}: {msg}"}
    sys.stdout.write(RESULT_PREFIX + _encode(payload).decode() + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
