"""Starting the fork server process (:mod:`.forkserver`), and starting it early.

The server's ``import torch`` is the longest step before a command's first job (about 1.4 s of a
lone ``analyze TASK --time``'s 3.4 s on the H200's host), so the CLI starts it as soon as it knows a
pool will run (:func:`start_early`), before its own heavier imports and the GPU check, and the
:class:`~.pool.Pool` made later takes that process over (:func:`take_early`) instead of starting one.
A server started early that no pool takes is killed when this process exits; left alone it would
exit by itself anyway, at the end-of-file of its control socket.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Mapping

from .forkserver import SYS_PATH_ENV

__all__ = ["ServerProcess", "spawn_server", "start_early", "take_early", "discard_early", "server_env"]


@dataclass
class ServerProcess:
    """A started fork server: the process, our end of its control socket, the file its stderr
    goes to, whether it counts a warm-up task, and when it was started (``time.monotonic()``)."""
    process: subprocess.Popen
    ctl: socket.socket
    err: IO[bytes]
    warm_up: bool
    started_at: float

    def kill(self) -> None:
        """Stop it now (its session: the workers it forked go with it) and free what we hold."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        self.ctl.close()
        self.err.close()


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: ours, this package first on its path, our ``sys.path``, ``extra``."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the folder that holds roofline_ext
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env[SYS_PATH_ENV] = json.dumps(sys.path)
    # torch.cuda.is_available() (which torch itself may call while counting) initialises the CUDA
    # driver unless told to ask NVML instead, and a driver initialised before fork() fails in every
    # child: the timing workers are forked from this server, so the server must never initialise it.
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    if extra:
        env.update(extra)
    return env


def spawn_server(warm_up: bool, extra_env: Mapping[str, str] | None = None) -> ServerProcess:
    """Start a fork server; it imports torch (and with ``warm_up`` counts a warm-up task) while the
    caller goes on, and says "ready" on the control socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    err = tempfile.TemporaryFile()
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "roofline_ext.runner.forkserver", str(theirs.fileno())]
        + ([] if warm_up else ["--no-warm-up"]),
        pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=err, start_new_session=True, env=server_env(extra_env))
    theirs.close()
    return ServerProcess(proc, ours, err, warm_up, t0)


_early: ServerProcess | None = None


def start_early(warm_up: bool) -> None:
    """Start the server a pool of this process will want (``warm_up`` as that pool's), now."""
    global _early
    if _early is None:
        _early = spawn_server(warm_up)
        atexit.register(discard_early)


def take_early(warm_up: bool, extra_env: Mapping[str, str] | None) -> ServerProcess | None:
    """The server :func:`start_early` started, for a pool that wants the same one (same warm-up, no
    environment of its own: a compile cache must be set before torch is imported there); else
    ``None``, and a server that does not fit is killed. Taken once: a later pool starts its own."""
    global _early
    early, _early = _early, None
    if early is None:
        return None
    if early.warm_up != warm_up or extra_env or early.process.poll() is not None:
        early.kill()
        return None
    return early


def discard_early() -> None:
    """Kill the server :func:`start_early` started if no pool took it (the command ended first)."""
    global _early
    early, _early = _early, None
    if early is not None:
        early.kill()
