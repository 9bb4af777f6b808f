"""The one runner that counting and timing go through: jobs in worker processes, from a fork server.

::

    runner (this process)                 fork server (torch imported, warm, no CUDA)
      Pool.run(jobs) ── control socket ──▶  fork ─▶ counting workers   ``jobs`` of them, reused
                                            fork ─▶ timing worker      one per GPU, reused
      ◀──────────── channel per worker (jobs out, replies in), output file per worker

* Workers are forked from the server, so one starts in milliseconds, warm, with torch imported.
* **CPU jobs** (counting) go to ``jobs`` counting workers, **GPU jobs** (timing) to the one timing
  worker of their GPU, so two timings never share a card. A worker is reused while the process
  stays as it was: after every job it compares itself with a snapshot taken before its first
  (:mod:`.state`) and asks its backend (:mod:`.cpu_backend`, :mod:`.gpu_backend`) whether it can go
  on; it is replaced after a job that crashed, timed out, poisoned the CUDA context or changed
  process state. ``fresh=True`` replaces every worker after every job instead (a counting job then
  gets a worker that runs it and exits): slower, and no task ever shares a process.
* A job that runs past its ``timeout_s`` has its worker's process group killed. A worker that dies
  (``os._exit``, a signal) costs that job only; the outcome names the cause and the task's last
  line of output.
* ``compile_warm_up``: with ``--compile`` every timing worker runs that step once, after its setup
  and before its state snapshot (:mod:`.compiling`), so that a compiled task leaves the worker
  reusable; the pool then gives the run a compile-cache folder of its own, removed at ``close()``.
* What a task prints, in Python or with raw writes to fd 1/2, goes to its worker's output file and
  comes back with the outcome (``Outcome.output``); the runner's stdout stays ours.

Workers and the server live in sessions of their own: Ctrl-C at the terminal reaches only this
process, whose ``close()`` (always run, ``with Pool(...)``) kills every worker within a second.
"""
from __future__ import annotations

import itertools
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ..errors import UserError
from . import channel
from .compiling import RunCaches
from .forkserver import SYS_PATH_ENV
from .jobs import CPU_BACKEND, GPU_BACKEND

OUTPUT_LIMIT = 64 << 10  # bytes of a task's output kept per job (the tail)
_EOF_GRACE_S = 2.0  # how long a worker that closed its channel may take to exit before it is killed


def supported() -> bool:
    """The pool needs ``fork`` and Unix sequenced-packet sockets: Linux."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def default_jobs() -> int:
    """All the cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@dataclass
class Job:
    """One call in a worker: ``fn`` (``"module:function"``) with ``kwargs``.

    ``device`` None makes it a CPU job (a fresh worker); an index sends it to that GPU's timing
    worker. ``key`` is the caller's, handed back in the outcome; ``label`` is what progress shows.
    """

    key: Any
    fn: str
    kwargs: dict[str, Any]
    timeout_s: float
    device: int | None = None
    label: str = ""
    error_kind: str = "internal"


@dataclass
class Outcome:
    """What became of a job: its value, or its failure's ``kind`` and one-line ``error``."""

    job: Job
    ok: bool
    value: Any = None
    kind: str | None = None
    error: str | None = None
    traceback: str | None = None
    output: str = ""
    wall_s: float = 0.0
    replaced: list[str] = field(default_factory=list)


Lane = tuple  # ("cpu", k) or ("gpu", device): the place a reused worker serves


@dataclass(eq=False)
class _Worker:
    token: str
    role: str
    lane: Lane | None  # None: a worker for one job ("once")
    sock: socket.socket
    out: Any  # the output file (a TemporaryFile)
    reader: channel.FrameReader = field(default_factory=channel.FrameReader)
    pid: int | None = None
    ready: bool = False
    job: Job | None = None
    started: float = 0.0
    deadline: float = float("inf")
    out_offset: int = 0
    exit_code: int | None = None
    closed: bool = False  # our end of the channel is closed; the worker is on its way out
    eof_at: float | None = None


class Pool:
    """Runs :class:`Job`\\ s in worker processes; use as ``with Pool(...) as pool: pool.run(jobs)``.

    ``jobs``: CPU jobs at once (default: all cores). ``backend``: the module whose ``setup(device)``
    and ``cleanup(device)`` a timing worker calls (:mod:`.gpu_backend`; tests pass a CPU stand-in);
    ``cpu_backend`` the same for counting workers. ``fresh``: a new worker for every job.
    ``warm_up``: count a built-in task in the server first (pays off from the second task on).
    ``compile_warm_up``: ``"module:function"`` each timing worker calls with its device after its
    setup, before its snapshot (:func:`.compiling.warm_up`); it also gives the run its own compile
    caches (:class:`.compiling.RunCaches`).
    """

    def __init__(self, jobs: int | None = None, *, backend: str = GPU_BACKEND, cpu_backend: str = CPU_BACKEND,
                 fresh: bool = False, warm_up: bool = True, setup_timeout_s: float = 300.0,
                 start_timeout_s: float = 300.0, compile_warm_up: str | None = None) -> None:
        self.jobs = max(1, jobs or default_jobs())
        self.backends = {"cpu": cpu_backend, "gpu": backend}
        self.fresh = fresh
        self.warm_up = warm_up
        self.setup_timeout_s = setup_timeout_s
        self.start_timeout_s = start_timeout_s
        self.compile_warm_up = compile_warm_up
        self._caches = RunCaches() if compile_warm_up else None
        self.replacements: list[dict[str, Any]] = []  # every reused worker replaced, and why
        self.server_info: dict[str, Any] = {}
        self._tokens = (f"w{i}" for i in itertools.count(1))
        self._sel = selectors.DefaultSelector()
        self._workers: dict[str, _Worker] = {}
        self._lanes: dict[Lane, _Worker] = {}
        self._broken: dict[Lane, tuple[str, str]] = {}  # lane -> (kind, error) of a failed setup
        self._done: deque[Outcome] = deque()
        self._pending_gpu: dict[int, deque[Job]] = {}
        self._cpu: deque[Job] = deque()
        self._outstanding: set[int] = set()
        self._run_jobs: dict[int, Job] = {}
        self._server: subprocess.Popen | None = None
        self._ctl: socket.socket | None = None
        self._ready = False

    # --- life cycle ------------------------------------------------------------------------------

    def __enter__(self) -> "Pool":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        """Start the fork server; it imports torch while the caller goes on (ready is awaited at
        the first job)."""
        if self._server is not None:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._server_err = tempfile.TemporaryFile()
        env = _server_env()
        if self._caches is not None:  # before torch is imported there, so every worker has them
            env.update(self._caches.env(env))
        self._server = subprocess.Popen(
            [sys.executable, "-m", "roofline_ext.runner.forkserver", str(theirs.fileno())]
            + ([] if self.warm_up else ["--no-warm-up"]),
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._server_err, start_new_session=True, env=env)
        theirs.close()
        self._ctl = ours
        self._sel.register(ours, selectors.EVENT_READ, None)

    def close(self) -> None:
        """Stop every worker and the server. Safe to call twice, and on the way out of Ctrl-C."""
        if self._server is None:
            return
        with _sigint_held():
            for w in list(self._workers.values()):
                self._retire(w)
            self._sel.close()
            if self._ctl is not None:
                self._ctl.close()  # the server reads EOF, kills its workers and exits
            try:
                self._server.wait(timeout=1.5)
            except subprocess.TimeoutExpired:
                _kill_session(self._server.pid)
                self._server.wait()
            for w in self._workers.values():
                w.out.close()
            self._server_err.close()
            self._server = None
            if self._caches is not None:  # every process that wrote there is gone now
                self._caches.close()

    def _await_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while not self._ready:
            if time.monotonic() > deadline:
                raise UserError(f"the worker server did not start within {self.start_timeout_s:g} s")
            for key, _ in self._sel.select(timeout=0.2):
                if key.data is None:
                    self._on_control()
            server = self._server
            assert server is not None  # started above, before waiting for it
            if not self._ready and server.poll() is not None:
                raise UserError(f"the worker server exited with code {server.returncode}: "
                                f"{_last_line(_read_all(self._server_err)) or 'no message'}")

    # --- running jobs ----------------------------------------------------------------------------

    def run(self, jobs: Iterable[Job], on_start: Callable[[Job], None] | None = None) -> Iterator[Outcome]:
        """Run ``jobs`` and yield each :class:`Outcome` as it comes (not in job order). CPU jobs
        start in the order given, GPU jobs run in that order on their card."""
        jobs = list(jobs)
        self._cpu = deque(j for j in jobs if j.device is None)
        for j in jobs:
            if j.device is not None:
                self._pending_gpu.setdefault(j.device, deque()).append(j)
        self._run_jobs = {id(j): j for j in jobs}
        self._outstanding = set(self._run_jobs)
        self._await_ready()
        while self._outstanding:
            self._dispatch(on_start)
            self._poll(0.0 if self._done else self._next_timeout())
            self._check_deadlines()
            while self._done:
                out = self._done.popleft()
                if id(out.job) in self._outstanding:  # not cancelled meanwhile
                    self._outstanding.discard(id(out.job))
                    yield out

    def prestart(self, devices: Iterable[int]) -> None:
        """Start the timing workers of ``devices`` now: their CUDA start-up (seconds) then overlaps
        whatever the caller runs first."""
        for device in devices:
            self._lane(("gpu", device))

    def release_cpu(self) -> None:
        """Let the idle counting workers go (their memory is the timings' to use)."""
        for lane, w in list(self._lanes.items()):
            if lane[0] == "cpu" and w.job is None:
                self._retire(w)

    def cancel(self, drop: Callable[[Job], bool]) -> None:
        """Forget the jobs of the current :meth:`run` for which ``drop(job)`` is true: queued ones
        never start, running ones have their worker killed; none of them yields an outcome."""
        self._cpu = deque(j for j in self._cpu if not drop(j))
        for device, queue in self._pending_gpu.items():
            self._pending_gpu[device] = deque(j for j in queue if not drop(j))
        for w in list(self._workers.values()):
            if w.job is not None and not w.closed and drop(w.job):
                self._kill(w)
                if w.lane is not None:
                    self._replace(w, w.job, ["its job was cancelled"])
                w.job = None
                self._retire(w)
        self._outstanding = {i for i in self._outstanding if not drop(self._run_jobs[i])}

    def _dispatch(self, on_start) -> None:
        if self.fresh:
            busy = sum(1 for w in self._workers.values() if w.lane is None and not w.closed)
            while self._cpu and busy < self.jobs:
                self._send(self._spawn("once", None), self._cpu.popleft(), on_start)
                busy += 1
        else:
            self._feed([("cpu", k) for k in range(self.jobs)], self._cpu, on_start)
        for device, queue in self._pending_gpu.items():
            self._feed([("gpu", device)], queue, on_start)

    def _feed(self, lanes: list[Lane], queue: deque[Job], on_start) -> None:
        """Give queued jobs to the idle workers of ``lanes``, starting workers where there are none."""
        for lane in lanes:
            if not queue:
                return
            if lane in self._broken:
                kind, error = self._broken[lane]
                while queue:
                    self._done.append(Outcome(queue.popleft(), False, kind=kind, error=error))
                return
            w = self._lane(lane)
            if w is not None and w.ready and w.job is None:
                self._send(w, queue.popleft(), on_start)

    def _lane(self, lane: Lane) -> _Worker | None:
        """The reused worker of ``lane``, started if it has none (its setup then runs)."""
        w = self._lanes.get(lane)
        if lane not in self._broken and (w is None or w.closed):
            w = self._lanes[lane] = self._spawn("persistent", lane)
            w.deadline = time.monotonic() + self.setup_timeout_s
        return w

    def _spawn(self, role: str, lane: Lane | None) -> _Worker:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        w = _Worker(next(self._tokens), role, lane, ours, tempfile.TemporaryFile(), ready=role == "once")
        options: dict[str, Any] = {"backend": self.backends[lane[0]], "device": lane[1]} if lane else {}
        if lane and lane[0] == "gpu" and self.compile_warm_up:
            options["prepare"] = self.compile_warm_up
        channel.send_control(self._control(), {"op": "fork", "token": w.token, "role": role, "options": options},
                             [theirs.fileno(), w.out.fileno()])
        theirs.close()
        self._workers[w.token] = w
        self._sel.register(ours, selectors.EVENT_READ, w)
        return w

    def _send(self, w: _Worker, job: Job, on_start) -> None:
        w.job, w.started = job, time.monotonic()
        w.deadline = w.started + job.timeout_s
        if on_start is not None:
            on_start(job)
        try:
            channel.send_frame(w.sock, channel.encode_job({"fn": job.fn, "kwargs": job.kwargs,
                                                           "error_kind": job.error_kind}))
        except OSError:  # the worker died before it read its job: its exit says why
            pass

    # --- events ----------------------------------------------------------------------------------

    def _next_timeout(self) -> float:
        now = time.monotonic()
        deadlines = [w.deadline for w in self._workers.values() if not w.closed]
        deadlines += [w.eof_at + _EOF_GRACE_S for w in self._workers.values() if w.eof_at and not w.closed]
        return max(0.0, min([0.5] + [d - now for d in deadlines]))

    def _poll(self, timeout: float) -> None:
        for key, _ in self._sel.select(timeout=timeout):
            if key.data is None:
                self._on_control()
            else:
                self._on_readable(key.data)

    def _on_control(self) -> None:
        msg, fds = channel.recv_control(self._control())
        for fd in fds:
            os.close(fd)
        if msg is None:
            raise UserError(f"the worker server stopped: {_last_line(_read_all(self._server_err)) or 'no message'}")
        op = msg["op"]
        if op == "ready":
            self._ready, self.server_info = True, msg
        elif op == "failed":
            raise UserError(f"cannot start the worker processes: {msg['error']}")
        elif op == "forked":
            self._forked(msg)
        elif op == "exited":
            self._exited(msg["pid"], msg["code"])

    def _forked(self, msg: dict[str, Any]) -> None:
        w = self._workers.get(msg["token"])
        if w is None:
            return
        w.pid = msg["pid"]
        if w.closed:  # given up on before its pid was known (timed out right away)
            self._kill(w)

    def _exited(self, pid: int, code: int) -> None:
        w = next((x for x in self._workers.values() if x.pid == pid), None)
        if w is None:
            return
        w.exit_code = code
        self._drain(w)  # its last reply may still sit in the socket
        if w.job is not None:
            self._finish_crashed(w)
        elif not w.ready and w.lane is not None and not w.closed:
            self._setup_failed(w, "setup", f"{_lane_words(w.lane)} {_exit_words(code)}: "
                                           f"{_last_line(self._output(w))}")
        self._retire(w)  # also a worker that died between jobs: the next job gets a new one

    def _on_readable(self, w: _Worker) -> None:
        try:
            data = w.sock.recv(1 << 20, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._sel.unregister(w.sock)
            w.eof_at = time.monotonic()
            return
        for frame in w.reader.feed(data):
            self._on_reply(w, channel.decode_reply(frame))

    def _drain(self, w: _Worker) -> None:
        if w.closed or w.eof_at is not None:
            return
        while True:
            try:
                data = w.sock.recv(1 << 20, socket.MSG_DONTWAIT)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            for frame in w.reader.feed(data):
                self._on_reply(w, channel.decode_reply(frame))

    def _control(self) -> socket.socket:
        """The control socket to the fork server (it exists from start() until close())."""
        if self._ctl is None:
            raise RuntimeError("the worker pool is not started")
        return self._ctl

    def _on_reply(self, w: _Worker, reply: dict[str, Any]) -> None:
        if not w.ready:  # a timing worker's setup (only reused workers have a lane and a setup)
            assert w.lane is not None
            if reply["ok"]:
                w.ready, w.deadline = True, float("inf")
                if w.lane[0] == "gpu":
                    self.server_info.setdefault("devices", {})[w.lane[1]] = reply["value"]
            else:
                self._setup_failed(w, reply.get("kind") or "setup", reply.get("error") or "setup failed")
            return
        job, w.job = w.job, None
        if job is None:
            return
        outcome = Outcome(job, bool(reply["ok"]), value=reply.get("value"), kind=reply.get("kind"),
                          error=reply.get("error"), traceback=reply.get("traceback"),
                          output=self._output(w), wall_s=time.monotonic() - w.started,
                          replaced=list(reply.get("replace") or []))
        self._done.append(outcome)
        w.deadline = float("inf")
        if outcome.replaced:
            self._replace(w, job, outcome.replaced)
        elif w.role == "once" or self.fresh:
            self._retire(w)

    def _setup_failed(self, w: _Worker, kind: str, error: str) -> None:
        assert w.lane is not None  # only reused workers run a setup
        self._broken[w.lane] = (kind, error)
        self._retire(w)

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for w in list(self._workers.values()):
            if w.closed:
                continue
            if w.eof_at is not None and now > w.eof_at + _EOF_GRACE_S:
                self._kill(w)  # closed its channel but did not exit: the exit report follows
                self._fail(w, "crash", "the task closed its worker's channel")
            elif now > w.deadline:
                self._timed_out(w)

    def _timed_out(self, w: _Worker) -> None:
        self._kill(w)
        if w.job is None:  # a worker whose setup hung
            self._setup_failed(w, "setup", f"{_lane_words(w.lane)} did not start within {self.setup_timeout_s:g} s")
            return
        self._fail(w, "timeout", f"timed out after {w.job.timeout_s:g} s (killed)")

    def _finish_crashed(self, w: _Worker) -> None:
        output = self._output(w)
        why = f"worker {_exit_words(w.exit_code)}"
        if w.exit_code == 0:
            why = "the task ended its worker process (exit code 0) before finishing"
        detail = _last_line(output)
        self._fail(w, "crash", f"{why}: {detail}" if detail else why, output)

    def _fail(self, w: _Worker, kind: str, error: str, output: str | None = None) -> None:
        job, w.job = w.job, None
        if job is not None:
            out = self._output(w) if output is None else output
            self._done.append(Outcome(job, False, kind=kind, error=error, output=out,
                                      wall_s=time.monotonic() - w.started))
            if w.lane is not None:
                self._replace(w, job, [error])
        self._retire(w)

    def _replace(self, w: _Worker, job: Job, reasons: list[str]) -> None:
        self.replacements.append({"worker": _lane_words(w.lane), "after": job.label or str(job.key),
                                  "reasons": reasons})
        self._retire(w)

    # --- workers ---------------------------------------------------------------------------------

    def _output(self, w: _Worker) -> str:
        """What the worker wrote since its last job, at most :data:`OUTPUT_LIMIT` bytes (the tail)."""
        try:
            end = os.fstat(w.out.fileno()).st_size
        except (OSError, ValueError):
            return ""
        start = max(w.out_offset, end - OUTPUT_LIMIT)
        data = os.pread(w.out.fileno(), end - start, start) if end > start else b""
        cut = start - w.out_offset
        w.out_offset = end
        text = data.decode("utf-8", errors="replace")
        return f"[... {cut} bytes of output cut ...]\n{text}" if cut else text

    def _kill(self, w: _Worker) -> None:
        if w.pid is not None and w.exit_code is None and self._ctl is not None:
            try:
                channel.send_control(self._ctl, {"op": "kill", "pid": w.pid})
            except OSError:
                pass

    def _retire(self, w: _Worker) -> None:
        """Close our end of its channel: a worker between jobs then exits by itself."""
        if w.closed:
            return
        w.closed = True
        if w.lane is not None and self._lanes.get(w.lane) is w:
            del self._lanes[w.lane]
        try:
            self._sel.unregister(w.sock)
        except (KeyError, ValueError):
            pass
        w.sock.close()
        self._forget(w)

    def _forget(self, w: _Worker) -> None:
        if w.exit_code is None or not w.closed or self._workers.pop(w.token, None) is None:
            return
        w.out.close()


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the folder that holds roofline_ext
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env[SYS_PATH_ENV] = json.dumps(sys.path)
    # torch.cuda.is_available() (which torch itself may call while counting) initialises the CUDA
    # driver unless told to ask NVML instead, and a driver initialised before fork() fails in every
    # child: the timing workers are forked from this server, so the server must never initialise it.
    env.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    return env


def _lane_words(lane: Lane | None) -> str:
    if lane is None:
        return "worker"
    return f"timing worker for GPU {lane[1]}" if lane[0] == "gpu" else f"counting worker {lane[1]}"


def _exit_words(code: int | None) -> str:
    if code is None:
        return "ended"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _read_all(f: Any) -> str:
    try:
        f.seek(0)
        return f.read().decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""


def _kill_session(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _sigint_held:
    """Ctrl-C pressed again while the pool shuts down waits until it is down (main thread only)."""

    def __enter__(self) -> None:
        import threading

        self._old = None
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc: Any) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
