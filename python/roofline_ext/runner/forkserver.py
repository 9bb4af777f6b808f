"""The fork server: imports torch once, warms it up, and forks every worker the runner asks for.

Started by :class:`roofline_ext.runner.pool.Pool` as ``python -m roofline_ext.runner.forkserver FD
[--no-warm-up]``
in a session of its own (a Ctrl-C at the terminal reaches only the runner, which then stops
everything). ``FD`` is its end of the control socket (:mod:`.channel`). It

1. takes the runner's ``sys.path``, so that workers import what the runner would;
2. imports torch and the counting code and counts :mod:`.warmup_task` once (about 1 s of lazy
   initialisation every worker would otherwise pay), checks that nothing touched CUDA (a CUDA
   context does not survive ``fork``), then freezes the garbage collector's view of the heap so
   that workers do not copy the pages it would otherwise write to;
3. answers ``{"op": "fork", "token", "role", "options"}`` messages, which bring the worker's channel
   socket and output file as descriptors, with ``{"op": "forked", "token", "pid"}``; reports each
   worker's end as ``{"op": "exited", "pid", "code"}`` (negative: killed by that signal); and kills
   a worker's whole process group on ``{"op": "kill", "pid"}``. Kills go through the server
   because only it reaps its children, so a pid it kills can never belong to another process.

When the runner goes away (the control socket reads end-of-file) it kills every worker and exits.
The server never runs a user's task itself.
"""
from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import time
from typing import Any

from . import channel, jobs, worker
from .channel import SYS_PATH_ENV
from .worker import child_main, failure_reply

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Linux: have the kernel kill this process when its parent dies, so that a worker stuck in a
    task's endless loop cannot outlive a server that was itself killed."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (OSError, AttributeError):  # not Linux: the control socket's EOF still stops us
        pass


def _warm_up(count: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    import torch

    from . import warmup_task

    if count:  # worth it from the second task on; one task would pay the same in its worker
        jobs.count(warmup_task.__file__)
    if torch.cuda.is_initialized():  # would break every worker that uses the GPU after fork
        raise RuntimeError("CUDA was initialised in the fork server")
    worker.quiet_torch_logs()  # here, once, not in every counting worker (worker.quiet_torch_logs)
    return {"warm_s": time.perf_counter() - t0}


class Server:
    def __init__(self, ctl: socket.socket) -> None:
        self.ctl = ctl
        self.children: dict[int, str] = {}  # pid -> token
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up fd is written
        signal.set_wakeup_fd(self.wake_w)

    def serve(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.ctl.fileno(), self.wake_r], [], [])
                if self.wake_r in ready:
                    os.read(self.wake_r, 4096)
                    self._reap()
                if self.ctl.fileno() in ready and not self._command():
                    break
        except OSError:  # the runner went away while we wrote to it: as its end-of-file
            pass
        finally:
            self._kill_all()

    def _command(self) -> bool:
        msg, fds = channel.recv_control(self.ctl)
        if msg is None:
            return False
        if msg["op"] == "fork":
            pid = self._fork(msg, fds)
            channel.send_control(self.ctl, {"op": "forked", "token": msg["token"], "pid": pid})
        elif msg["op"] == "kill" and msg["pid"] in self.children:
            _kill_group(msg["pid"])
        return True

    def _fork(self, msg: dict[str, Any], fds: list[int]) -> int:
        sock_fd, out_fd = fds
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            self._become_worker(out_fd)
            child_main(msg["role"], sock_fd, msg.get("options") or {})
        os.close(sock_fd)
        os.close(out_fd)
        self.children[pid] = msg["token"]
        return pid

    def _become_worker(self, out_fd: int) -> None:
        os.setsid()  # its own process group: a kill reaches the subprocesses a task starts
        _die_with_parent()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in (self.ctl.fileno(), self.wake_r, self.wake_w):
            os.close(fd)
        # The task's prints and raw writes to fd 1 or 2 go to its output file, never to the
        # runner's stdout, where they would break JSON.
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        # gc stays frozen: unfreezing would make the next collection walk (and so copy) every
        # page of the server's heap; the worker's own objects are collected as usual.

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.pop(pid, None)
            channel.send_control(self.ctl, {"op": "exited", "pid": pid, "code": os.waitstatus_to_exitcode(status)})

    def _kill_all(self) -> None:
        for pid in list(self.children):
            _kill_group(pid)
        for pid in list(self.children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)  # not yet a group leader (killed right after fork)
        except ProcessLookupError:
            pass


def main(argv: list[str]) -> int:
    import warnings

    # Python 3.12 warns about fork() in a process with threads; ours are OpenBLAS's and torch's
    # pools, which reset themselves in the child (pthread_atfork), and the server runs no Python
    # thread of its own.
    warnings.filterwarnings("ignore", message=r".*fork\(\) may lead to deadlocks", category=DeprecationWarning)
    ctl = socket.socket(fileno=int(argv[1]))
    path = os.environ.pop(SYS_PATH_ENV, None)
    if path:
        sys.path[:] = json.loads(path)
    try:
        info = _warm_up(count="--no-warm-up" not in argv)
    except BaseException as exc:  # no torch, or a broken install: the runner says why
        channel.send_control(ctl, {"op": "failed", **failure_reply(exc, {}, "startup")})
        return 1
    gc.collect()
    gc.freeze()  # objects alive now are never scanned again: workers keep sharing their pages
    channel.send_control(ctl, {"op": "ready", "pid": os.getpid(), **info})
    Server(ctl).serve()
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    # No interpreter teardown: with torch imported it takes a few tenths of a second, which every
    # command waits for at its end (Pool.close waits for this process), and the server has nothing
    # to flush or clean up once its workers are killed and reaped.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
