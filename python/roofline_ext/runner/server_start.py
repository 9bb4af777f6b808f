"""Starting the fork server process (:mod:`.forkserver`): early, and once for many pools.

The server's ``import torch`` is the longest step before a command's first job (about 1.4 s of a
lone ``analyze TASK --time``'s 3.4 s on the H200's host), so

* the CLI starts it as soon as it knows a pool will run (:func:`start_early`), before its GPU check,
  and the :class:`~.pool.Pool` made later takes that process over (:func:`take_early`) instead of
  starting one. A server started early that no pool takes is killed when the command ends
  (:func:`discard_early`), and at the latest when this process exits;
* a process that runs many batches (code that scores generated kernels in a loop, the test suite)
  can keep one server for all of them (:func:`kept_server`): each pool then forks its workers from
  it, kills and reaps them through it at ``close()``, and leaves it running for the next pool. A
  pool takes the kept server only where it would have started the same one: the same environment
  (torch reads some of it at import; :func:`_env_now` says what may differ), no environment of its
  own (``--compile``'s caches); its workers take the pool's ``sys.path`` and environment when
  forked, so a module put on the path since still loads and a setting made since is seen.
  A kept server that a task took down is started again for the next pool.
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
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator, Mapping

from .channel import SYS_PATH_ENV

__all__ = ["ServerProcess", "Keeper", "spawn_server", "start_early", "take_early", "discard_early",
           "kept_server", "no_kept_server", "server_env", "worker_env", "with_huge_malloc"]


@dataclass
class ServerProcess:
    """A started fork server: the process, our end of its control socket, the file its stderr
    goes to, whether it counts a warm-up task, and when it was started (``time.monotonic()``)."""
    process: subprocess.Popen
    ctl: socket.socket
    err: IO[bytes]
    warm_up: bool
    started_at: float
    kept: bool = False  # kept for many pools (kept_server): a pool's close leaves it running
    ready: dict[str, Any] | None = None  # its "ready" message, once a pool has read it
    env: dict[str, str] = field(default_factory=dict, repr=False)  # the environment it was started in
    in_use: bool = False  # a kept server serves one pool at a time (they would share one socket)

    def alive(self) -> bool:
        return self.process.poll() is None

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
    env["GLIBC_TUNABLES"] = with_huge_malloc(env.get("GLIBC_TUNABLES"))
    if extra:
        env.update(extra)
    return env


#: glibc's tunable (2.35 and later) that has malloc ask for transparent huge pages for its heap.
HUGE_MALLOC = "glibc.malloc.hugetlb=1"


def with_huge_malloc(tunables: str | None) -> str:
    """``GLIBC_TUNABLES`` for the fork server: what was set, and malloc's heap in transparent huge
    pages unless that was set too. The server's heap (~110 MB, torch's C++ state) is then mapped in
    2 MiB pages, so each fork copies and each worker's exit frees one entry where there were 512:
    forking the warm server took 3-6 ms instead of 9-13 ms, and a worker's own CPU fell by a tenth
    (KernelBench level 1, forked from a warmed process; a worker's first write to a huge page splits
    it and copies 4 KiB, as before). Older glibc, or a kernel whose THP mode is ``never``, ignore it."""
    if not tunables:
        return HUGE_MALLOC
    if "glibc.malloc.hugetlb" in tunables:
        return tunables
    return f"{tunables}:{HUGE_MALLOC}"


def worker_env() -> dict[str, str]:
    """The environment a worker forked from a kept server takes: the one a server started now
    would have had (:func:`server_env`; the path it hands the server is the fork's own option)."""
    env = server_env()
    env.pop(SYS_PATH_ENV, None)
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
    return ServerProcess(proc, ours, err, warm_up, t0, env=_env_now())


def _env_now() -> dict[str, str]:
    """The environment a kept server must have been started in for a pool to take it: all of it
    but what nothing reads at import (the package's own ``ROOFLINE_EXT_*`` settings, read when
    used; pytest's name of the running test). A worker forked from a kept server takes the pool's
    whole environment anyway (``Pool._spawn``), so those differences reach it."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ROOFLINE_EXT_") and k != "PYTEST_CURRENT_TEST"}


_early: ServerProcess | None = None


def start_early(warm_up: bool) -> None:
    """Start the server a pool of this process will want (``warm_up`` as that pool's), now; not
    inside :func:`kept_server`, whose server the pool takes instead."""
    global _early
    if _early is None and _keeper is None:
        _early = spawn_server(warm_up)
        atexit.register(discard_early)


def take_early(warm_up: bool, extra_env: Mapping[str, str] | None) -> ServerProcess | None:
    """For a pool that starts: the kept server where one is kept and fits (module docstring), else
    the server :func:`start_early` started if it fits (same warm-up, no environment of its own: a
    compile cache must be set before torch is imported there; taken once), else ``None`` (a server
    started early that does not fit is killed) and the pool starts its own."""
    global _early
    if _keeper is not None and not extra_env:
        kept = _keeper.take()
        if kept is not None:
            return kept
    early, _early = _early, None
    if early is None:
        return None
    if early.warm_up != warm_up or extra_env or not early.alive():
        early.kill()
        return None
    return early


def discard_early() -> None:
    """Kill the server :func:`start_early` started if no pool took it (the command ended first)."""
    global _early
    early, _early = _early, None
    if early is not None:
        early.kill()


class Keeper:
    """The one server of a :func:`kept_server` block (``server``: ``None`` until a pool first wants
    it, where the block was opened lazily)."""

    def __init__(self, warm_up: bool) -> None:
        self.warm_up = warm_up
        self.server: ServerProcess | None = None

    def start(self) -> ServerProcess:
        self.server = spawn_server(self.warm_up)
        self.server.kept = True
        return self.server

    def take(self) -> ServerProcess | None:
        """The kept server for a pool starting now: started at the first want, started again if a
        task took it down; ``None`` while another pool uses it or where this process's environment
        is no longer the one it was started in (the pool then starts its own)."""
        if self.server is None:
            server = self.start()
        elif self.server.in_use or self.server.env != _env_now():
            return None  # a pool open beside another (nested batches), or another environment
        elif not self.server.alive():
            self.server.kill()
            server = self.start()
        else:
            server = self.server
        server.in_use = True  # until the pool lets it go (Pool._release_server)
        return server

    def close(self) -> None:
        if self.server is not None:
            self.server.kill()
            self.server = None


_keeper: Keeper | None = None


@contextmanager
def kept_server(warm_up: bool = True, lazy: bool = False) -> Iterator[Keeper]:
    """One fork server for every pool made in this block that can take it (module docstring);
    killed at the end. ``warm_up``: it counts a warm-up task first, so that every counting worker
    forked from it starts warm (a pool that asked for none is served as well). ``lazy``: started
    when a pool first wants it, not now. Nested, the outer block's server serves the inner one."""
    global _keeper
    if _keeper is not None:
        yield _keeper
        return
    _keeper = keeper = Keeper(warm_up)
    if not lazy:
        keeper.start()
    try:
        yield keeper
    finally:
        _keeper = None
        keeper.close()


@contextmanager
def no_kept_server() -> Iterator[None]:
    """A block in which every pool starts a server of its own, as outside :func:`kept_server` (what
    tests of the server's own start and end need); the kept one, if any, waits for the block's end."""
    global _keeper
    keeper, _keeper = _keeper, None
    try:
        yield
    finally:
        _keeper = keeper
