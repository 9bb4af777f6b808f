"""What runs inside a worker process, after the fork server forked it.

Two roles:

``once``
    Takes one job, sends its reply and exits. Counting uses it: every task gets a fresh copy of
    the server, which has torch imported and warm but has never run a user's task, so there is no
    state a previous task could have left.
``persistent``
    A timing worker: sets up its GPU (the CUDA context costs seconds, so it is made once), runs
    its ``prepare`` step if it has one (with ``--compile``: :func:`.compiling.warm_up`, so that
    ``torch.compile``'s one-time changes to the process come before the snapshot), then runs jobs
    one after another. After each job it forgets what the job compiled (:func:`.compiling.reset`),
    compares the process with the snapshot taken before the first (:mod:`.state`) and asks the
    backend whether the GPU is still usable; any difference is sent with the reply as ``replace``
    and the worker exits, so the runner starts a fresh one for the next job. With ``one_job`` (a
    lone task's reference, ``Pool.one_job_timing``) it runs a single job and exits: no snapshot,
    no checks, since no later job shares its process.

A job is ``{"fn": "module:function", "kwargs": {...}}``; a reply is ``{"ok": True, "value": ...}``
or ``{"ok": False, "kind": ..., "error": one line, "traceback": text}``, plus ``seconds``.

Everything a worker calls *after* a job (the state check, the reply's encoder, the send) is bound
before its first job: a task that replaces ``json.dumps`` or one of this package's functions
changes neither its own reply nor the check that replaces its worker (:mod:`.channel`). A task's
own ``KeyboardInterrupt`` or ``SystemExit`` fails that task: no Ctrl-C ever reaches a worker (it
runs in a session of its own), so either is the task's doing.
"""
from __future__ import annotations

import gc
import importlib
import logging
import os
import socket
import sys
import time
import traceback
from typing import Any, Callable, Sequence

from ..errors import GpuUnavailableError, RooflineError
from ..tasks.loading import TaskError, located
from ..tasks.sandbox import QUIET_TORCH_LOGS
from . import channel, compiling, jobs, process_state


#: The ``torch`` logger's level before :func:`quiet_torch_logs` (in the fork server), or None.
_TORCH_LOG_LEVEL: int | None = None


def quiet_torch_logs() -> None:
    """In the fork server, before it forks: the ``torch`` logger at the level that a task's count
    holds it at (``tasks.sandbox._quiet_torch_logs``), so that a counting worker need not set it. Setting
    a logger's level clears the cache of every logger, and in a fresh fork that copies the pages
    they live on. A reused worker puts the level back (:func:`_restore_torch_logs`)."""
    global _TORCH_LOG_LEVEL
    log = logging.getLogger("torch")
    _TORCH_LOG_LEVEL = log.level
    log.setLevel(QUIET_TORCH_LOGS)


def _restore_torch_logs() -> None:
    """A reused (timing) worker: torch's logs as they were before the server quieted them, for what
    it runs outside a task's sandbox (its setup, ``--compile``'s warm-up)."""
    if _TORCH_LOG_LEVEL is not None:
        logging.getLogger("torch").setLevel(_TORCH_LOG_LEVEL)


def _resolve(name: str) -> Callable[..., Any]:
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def failure_reply(exc: BaseException, kwargs: dict[str, Any], default_kind: str) -> dict[str, Any]:
    if isinstance(exc, KeyboardInterrupt):
        exc = _own_interrupt(exc, kwargs.get("path"))
    # Lazy: runner.analyze brings model.assess and the peaks (~60 ms) into every fork server.
    from .analyze import error_result

    record = error_result(kwargs.get("path") or "?", exc)  # the one place that words a failure
    kind = record["error_kind"]
    if isinstance(exc, GpuUnavailableError):
        kind = "gpu-unavailable"
    elif kind == "internal" and not isinstance(exc, RooflineError):
        kind = default_kind
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"ok": False, "kind": kind, "error": record["error"], "traceback": tb}


def _own_interrupt(exc: KeyboardInterrupt, path: str | None) -> BaseException:
    """The task's own KeyboardInterrupt as the one-line failure of that task, with its line."""
    where = located(path, exc) if path else "the job"
    return TaskError(f"{where}: raised KeyboardInterrupt", kind="interrupt", path=path)


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Call the job's function; any failure (SystemExit and Ctrl-C too) becomes a reply."""
    kwargs = job.get("kwargs") or {}
    t0 = time.perf_counter()
    try:
        reply = {"ok": True, "value": _resolve(job["fn"])(**kwargs)}
    except BaseException as exc:  # a task must never end its worker silently
        reply = failure_reply(exc, kwargs, job.get("error_kind", "internal"))
    finally:
        _flush_output()
    reply["seconds"] = time.perf_counter() - t0
    return reply


def _flush_output() -> None:
    # The runner reads the task's output file after the reply; what Python still buffers must be
    # in the file by then.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a task that replaced or closed sys.stdout
            pass


def _sender(sock: socket.socket) -> Callable[[dict[str, Any]], None]:
    """Sends a reply on ``sock`` with the encoder and send bound now, before any job."""
    encode, send = channel.encode_reply, channel.send_frame

    def send_reply(reply: dict[str, Any]) -> None:
        send(sock, encode(reply))

    return send_reply


def serve_once(sock: socket.socket) -> None:
    send, run = _sender(sock), run_job
    jobs.PROCESS_ENDS_WITH_JOB = True  # this process exits after the one job (jobs.count uses it)
    frame = channel.recv_frame(sock)
    if frame is not None:
        send(run(channel.decode_job(frame)))


def serve_persistent(sock: socket.socket, backend_name: str, device: Any, prepare: Sequence[str] = (),
                     one_job: bool = False) -> None:
    send, run, recv, decode, forget, changes, check = (_sender(sock), run_job, channel.recv_frame, channel.decode_job,
                                                       _forget_compiled, process_state.changes, _backend_check)
    clock = time.perf_counter
    backend = importlib.import_module(backend_name)
    setup = run_job({"fn": f"{backend_name}:setup", "kwargs": {"device": device}, "error_kind": "setup"})
    for step in prepare if setup["ok"] else ():
        # Part of the setup (its time limit, its reply), before the snapshot. A prepare step that
        # fails leaves the worker usable for what does not need it: its reason goes with the reply,
        # and each job that needed it fails with its own. Several steps (--energy's, then
        # --compile's) run in order; the reply keeps each one's value under its name.
        prep = run_job({"fn": step, "kwargs": {"device": device}, "error_kind": "setup"})
        if isinstance(setup["value"], dict):
            setup["value"].setdefault("prepare", {})[step] = prep["value"] if prep["ok"] else {"error": prep["error"]}
    if not setup["ok"]:
        send(setup)
        return
    if one_job:
        # A lone task's single job (Pool.one_job_timing): the pool retires this worker after it, so
        # no later job can meet what it left, and a snapshot (0.5 s on the H200's host) and the
        # checks after the job would guard nothing.
        setup["one_job"] = True
        send(setup)
        frame = recv(sock)
        if frame is not None:
            send({**run(decode(frame)), "replace": []})
        return
    # The snapshot is part of the setup, before the worker says it is ready: the pool may hold the
    # counting workers back until then (Pool.hold_counts_s), so that it is not taken while they
    # all start at once (5.2 s under that load on the H200's host, 0.5 s without).
    t0 = clock()
    # Reset once before the snapshot too: the first torch._dynamo.reset() in a process can do
    # one-time work of its own (seen on the H200: operators registered after the first job of a
    # run without --compile), which must not read as a change the job made.
    forget()
    before = process_state.snapshot(renew=forget)
    # The snapshot is some 300,000 objects that live as long as the worker: out of the collector's
    # generations too (as the backend's setup does with torch's), or every task's full collection
    # (the backend's cleanup) walks them all again.
    gc.freeze()
    setup["snapshot_s"] = clock() - t0
    send(setup)
    while True:
        frame = recv(sock)
        if frame is None:  # the runner closed the channel: done
            return
        reply = run(decode(frame))
        t0 = clock()
        reply["replace"] = forget() + changes(before) + check(backend, device)
        reply["checks_s"] = clock() - t0  # shown by --verbose beside the job's own seconds
        send(reply)
        if reply["replace"]:
            return


def _forget_compiled() -> list[str]:
    """No job sees what an earlier one compiled (``--compile``, or a candidate that calls
    ``torch.compile`` itself); a reset that fails makes the worker one to replace."""
    try:
        compiling.reset()
    except BaseException as exc:
        return [f"torch._dynamo.reset() failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"]
    return []


def _backend_check(backend: Any, device: Any) -> list[str]:
    try:
        return list(backend.cleanup(device))
    except BaseException as exc:  # e.g. a CUDA error that poisoned the context
        return [f"device unusable after the task: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"]


def child_main(role: str, sock_fd: int, options: dict[str, Any]) -> None:
    """Entry point in the forked child; never returns (``os._exit``), so no atexit handler or
    non-daemon thread a task left behind can keep the process alive."""
    code = 0
    try:
        if "sys_path" in options:  # forked from a kept server: the path and environment of the pool
            sys.path[:] = options["sys_path"]
            os.environ.clear()
            os.environ.update(options["env"])
        sock = socket.socket(fileno=sock_fd)
        if role == "once":
            serve_once(sock)
        else:
            _restore_torch_logs()
            serve_persistent(sock, options["backend"], options.get("device"), options.get("prepare") or (),
                             one_job=bool(options.get("one_job")))
    except BaseException:  # the runner is gone, or a bug of ours: say so on the task's output
        traceback.print_exc()
        code = 70
    finally:
        _flush_output()
        os._exit(code)
