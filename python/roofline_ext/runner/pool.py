"""The one runner that counting and timing go through: jobs in worker processes, from a fork server.

::

    runner (this process)                 fork server (torch imported, warm, no CUDA)
      Pool.run(jobs) ── control socket ──▶  fork ─▶ counting workers   ``jobs`` of them, reused
                                            fork ─▶ timing worker      one per GPU, reused
      ◀──────────── channel per worker (jobs out, replies in), output file per worker

* Workers are forked from the server, so one starts in milliseconds, warm, with torch imported.
* **CPU jobs** (counting) get a worker each, ``jobs`` at a time: a fork of the server that runs
  the job and exits, so no count ever runs where another task ran (proving that a reused worker
  was left as it was costs about what the fork does: docs/runner.md). ``reuse_counting=True``
  gives them ``jobs`` reused counting workers instead, checked as timing workers are.
* **GPU jobs** (timing) go to the one timing worker of their GPU, so two timings never share a
  card. It is reused while the process stays as it was: after every job it compares itself with
  a snapshot taken before its first (:mod:`.state`, with the fingerprint of every loaded module's
  code, :mod:`.fingerprint`) and asks its backend (:mod:`.gpu_backend`) whether it can go on; it
  is replaced after a job that crashed, timed out, poisoned the CUDA context or changed process
  state, and after a job whose result asks for it (``"_retire": reason``, taken out of the
  result: the judge's word after a rejected candidate). ``fresh=True`` replaces every worker after
  every job: no task ever shares a process.
* A job that runs past its ``timeout_s`` has its worker's process group killed. A worker that dies
  (``os._exit``, a signal) costs that job only; the outcome names the cause and the task's last
  line of output.
* ``compile_warm_up``: with ``--compile`` every timing worker runs that step once, after its setup
  and before its state snapshot (:mod:`.compiling`), so that a compiled task leaves the worker
  reusable; the pool then gives the run a compile-cache folder of its own, removed at ``close()``.
  ``energy_warm_up`` (``--energy``) likewise opens NVML and takes the idle probe before the snapshot.
* What a task prints, in Python or with raw writes to fd 1/2, goes to its worker's output file and
  comes back with the outcome (``Outcome.output``); the runner's stdout stays ours.

* A lost fork server (a task killed it) is started again and the batch goes on: the jobs that
  were running when it went are run again one at a time, so the one that takes the server down
  fails alone (``crash``); after :data:`MAX_SERVER_RESTARTS` losses with no job finished in between
  the run stops with the reason.
* The runner never blocks on the control socket: what it sends the server waits in an outbox
  until the socket has room, while the runner goes on reading the server's messages. (Blocking
  sends deadlocked with ``--jobs 1000``: both sides sending, neither reading.)

Workers and the server live in sessions of their own: Ctrl-C at the terminal reaches only this
process, whose ``close()`` (always run, ``with Pool(...)``) kills every worker within a second.
"""
from __future__ import annotations

import itertools
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
from typing import Any, Callable, Iterable, Iterator

from ..errors import UserError
from . import channel
from .compiling import RunCaches
from .jobs import CPU_BACKEND, GPU_BACKEND
from .server_start import ServerProcess, spawn_server, take_early, worker_env

OUTPUT_LIMIT = 64 << 10  # bytes of a task's output kept per job (the tail)
_EOF_GRACE_S = 2.0  # how long a worker that closed its channel may take to exit before it is killed
MAX_SERVER_RESTARTS = 3  # losses of the server in a row with no job finished in between
# What one counting worker may need beyond what it shares with the server. Measured: 15-165 MiB
# of private pages after counting a KernelBench task (the most: SwinTransformerV2); three times
# that leaves room for larger tasks.
WORKER_BYTES = 512 << 20
RETIRE_KEY = "_retire"  # in a job's result: replace the worker after this job, for this reason
# The longest the counting jobs of a batch wait for a timing worker's setup and snapshot
# (Pool._holding_counts). On the H200 the two take about 1 s on an idle host.
HOLD_COUNTS_S = 10.0
_POOL_SERIALS = itertools.count(1)


def supported() -> bool:
    """The pool needs ``fork`` and Unix sequenced-packet sockets: Linux."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def default_jobs() -> int:
    """All the cores this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def capped_jobs(requested: int | None, tasks: int, available: int | None = None,
                default: int | None = None) -> tuple[int, str | None]:
    """How many counting workers to run at once, and a note when fewer than ``requested``.

    At most one per task (a worker more has nothing to do) and as many as the memory available now
    holds at :data:`WORKER_BYTES` each (``available``: bytes, default from ``/proc/meminfo``).
    ``default``: the count without ``requested`` (else :func:`default_jobs`).
    """
    want = requested or default or default_jobs()
    available = _available_memory() if available is None else available
    by_memory = max(1, available // WORKER_BYTES) if available else want
    n = max(1, min(want, tasks, by_memory))
    if n >= want:
        return n, None
    if available and n == by_memory and by_memory < min(want, tasks):
        why = (f"what memory allows: {available / 2**30:.1f} GiB available, "
               f"{WORKER_BYTES >> 20} MiB per worker")
    elif requested is None:
        return n, None  # the default, one per core, and fewer tasks than cores: nothing to say
    else:
        why = f"the number of tasks ({tasks})"
    return n, f"--jobs {want} capped at {n}, {why}"


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None  # not Linux: no cap from memory


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
    ``cpu_backend`` the same for reused counting workers. ``fresh``: a new worker for every job.
    ``reuse_counting``: ``jobs`` reused counting workers, checked after every job as timing workers
    are, instead of a fresh worker per CPU job (the default: docs/runner.md says why).
    ``warm_up``: count a built-in task in the server first (pays off from the second task on).
    ``compile_warm_up``: ``"module:function"`` each timing worker calls with its device after its
    setup, before its snapshot (:func:`.compiling.warm_up`); it also gives the run its own compile
    caches (:class:`.compiling.RunCaches`). ``energy_warm_up``: the same for ``--energy``
    (:func:`roofline_ext.measure.energy.warm_up`: NVML opened and the idle probe taken before the
    snapshot); with both, energy's runs first. ``hold_counts_s``: how long the counting jobs of a
    batch may wait for a timing worker that is starting (0: never). ``one_job_timing``: each timing
    worker runs one job and goes (a lone task's single reference): it takes no state snapshot and
    makes no checks after its job, since no later job could meet what that job left; a second
    timing job gets a worker of its own.
    """

    def __init__(self, jobs: int | None = None, *, backend: str = GPU_BACKEND, cpu_backend: str = CPU_BACKEND,
                 fresh: bool = False, reuse_counting: bool = False, warm_up: bool = True,
                 setup_timeout_s: float = 300.0, start_timeout_s: float = 300.0,
                 compile_warm_up: str | None = None, energy_warm_up: str | None = None,
                 hold_counts_s: float = HOLD_COUNTS_S, one_job_timing: bool = False) -> None:
        self.jobs = max(1, jobs or default_jobs())
        self.one_job_timing = one_job_timing
        self.backends = {"cpu": cpu_backend, "gpu": backend}
        self.fresh = fresh
        self.reuse_counting = reuse_counting and not fresh
        self.warm_up = warm_up
        self.setup_timeout_s = setup_timeout_s
        self.start_timeout_s = start_timeout_s
        self.compile_warm_up = compile_warm_up
        self.energy_warm_up = energy_warm_up
        self.hold_counts_s = hold_counts_s
        self._hold_since: float | None = None
        self._caches = RunCaches() if compile_warm_up else None
        self.replacements: list[dict[str, Any]] = []  # every reused worker replaced, and why
        # Where a run's time went (--verbose): (seconds since this pool was made, what happened).
        self._t0 = time.monotonic()
        self.timeline: list[tuple[float, str]] = []
        self.server_info: dict[str, Any] = {}
        # Tokens unique across pools: a kept server's late word about an earlier pool's worker
        # must never match one of this pool's.
        serial = next(_POOL_SERIALS)
        self._tokens = (f"p{serial}w{i}" for i in itertools.count(1))
        self._handle: ServerProcess | None = None  # the server process this pool uses
        self._closing = False
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
        self._outbox: deque[tuple[dict[str, Any], list[int], Callable[[], None] | None]] = deque()
        self._restarts = 0
        self._suspects: deque[Job] = deque()  # jobs that were running when the server was lost
        self._suspect: Job | None = None  # the one of them running now (alone)

    # --- life cycle ------------------------------------------------------------------------------

    def __enter__(self) -> "Pool":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start(self) -> None:
        """Start the fork server, or take over the one the CLI started early (:mod:`.server_start`);
        it imports torch while the caller goes on (ready is awaited at the first job)."""
        if self._server is not None:
            return
        extra = self._caches.env(dict(os.environ)) if self._caches is not None else None
        server = take_early(self.warm_up, extra)
        early = server is not None
        if server is None:
            # The caches before torch is imported there, so every worker has them.
            server = spawn_server(self.warm_up, extra)
        self._handle = server
        self._server, self._ctl, self._server_err = server.process, server.ctl, server.err
        self._sel.register(server.ctl, selectors.EVENT_READ, None)
        if server.kept and server.ready is not None:  # an earlier pool of this process saw it ready
            self._ready, self.server_info = True, server.ready
            self._mark("fork server kept from an earlier pool (ready)")
            return
        what = "fork server started (it imports torch and counts a warm-up task)" if server.warm_up else \
            "fork server started (it imports torch)"
        if server.kept:
            what += ", kept for the pools after this one"
        self._mark(what + (", before the pool, as the command began" if early and not server.kept else ""),
                   at=server.started_at)

    def close(self) -> None:
        """Stop every worker and the server. Safe to call twice, and on the way out of Ctrl-C."""
        if self._server is None:
            return
        with _sigint_held():
            self._closing = True
            for w in list(self._workers.values()):
                self._retire(w)
            if self._handle is not None and self._handle.kept and self._handle.alive():
                self._release_server()
            else:
                self._stop_server()  # the server reads EOF, kills its workers and exits
            self._sel.close()
            for w in self._workers.values():
                w.out.close()
            if self._caches is not None:  # every process that wrote there is gone now
                self._caches.close()

    def _await_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while not self._ready:
            if time.monotonic() > deadline:
                raise UserError(f"the worker server did not start within {self.start_timeout_s:g} s")
            self._poll(0.2)
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
                    self._restarts = 0  # a job finished: the server's losses so far made progress
                    # The freed worker gets its next job before the caller handles this outcome:
                    # the caller's part (the task's result assembled, the JSON rewritten, ~0.1 s
                    # late in a batch of 250) then overlaps the GPU's next timing instead of
                    # leaving the card idle between tasks.
                    self._dispatch(on_start)
                    yield out

    def add(self, job: Job) -> None:
        """One more job for the :meth:`run` in progress, from its caller between two outcomes (a
        task's timing jobs once its count is in); it is dispatched with the rest and yields its
        outcome from the same run."""
        self._run_jobs[id(job)] = job
        self._outstanding.add(id(job))
        if job.device is None:
            self._cpu.append(job)
        else:
            self._pending_gpu.setdefault(job.device, deque()).append(job)

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
        if self._suspects or self._suspect is not None:
            self._dispatch_suspect(on_start)
            return
        if not self._holding_counts():
            self._dispatch_cpu(on_start)
        for device, queue in self._pending_gpu.items():
            self._feed([("gpu", device)], queue, on_start)

    def _holding_counts(self) -> bool:
        """Whether the counting jobs wait for a timing worker still starting: only when there are
        more of them than counting workers (a lone task's count never waits), and for at most
        :attr:`hold_counts_s` after the first job was given (a setup that hangs holds nothing up
        for long). The GPU cannot time before its worker is ready anyway, and the worker's setup
        and snapshot then run on an idle machine."""
        if self.hold_counts_s <= 0 or len(self._cpu) <= self.jobs:
            return False
        starting = any(lane[0] == "gpu" and not w.ready and not w.closed for lane, w in self._lanes.items())
        if not starting:
            return False
        if self._hold_since is None:
            self._hold_since = time.monotonic()
        return time.monotonic() - self._hold_since < self.hold_counts_s

    def _dispatch_cpu(self, on_start) -> None:
        if not self.reuse_counting:
            busy = sum(1 for w in self._workers.values() if w.lane is None and not w.closed)
            while self._cpu and busy < self.jobs:
                self._send(self._spawn("once", None), self._cpu.popleft(), on_start)
                busy += 1
        else:
            self._feed([("cpu", k) for k in range(self.jobs)], self._cpu, on_start)

    def _dispatch_suspect(self, on_start) -> None:
        """After the server was lost: the jobs that were running then, one at a time, nothing else."""
        if self._suspect is not None and id(self._suspect) not in self._outstanding:
            self._suspect = None  # done (or cancelled)
        if self._suspect is not None or any(w.job is not None for w in self._workers.values()):
            return
        while self._suspects and id(self._suspects[0]) not in self._outstanding:
            self._suspects.popleft()
        if not self._suspects:
            return
        job = self._suspects[0]
        if job.device is None:
            self._suspect = self._suspects.popleft()
            self._send(self._spawn("once", None), job, on_start)
            return
        lane = ("gpu", job.device)
        if lane in self._broken:
            self._suspects.popleft()
            kind, error = self._broken[lane]
            self._done.append(Outcome(job, False, kind=kind, error=error))
            return
        w = self._lane(lane)
        if w is not None and w.ready and w.job is None:
            self._suspect = self._suspects.popleft()
            self._send(w, job, on_start)

    def _feed(self, lanes: list[Lane], queue: deque[Job], on_start) -> None:
        """Give queued jobs to the idle workers of ``lanes``, starting workers where there are none,
        and no more of them than there are jobs waiting (a worker more would only start)."""
        starting = sum(1 for lane in lanes if lane in self._lanes and not self._lanes[lane].ready)
        for lane in lanes:
            if not queue:
                return
            if lane not in self._lanes and starting >= len(queue):
                continue  # enough workers are starting for what waits
            if lane in self._broken:
                kind, error = self._broken[lane]
                while queue:
                    self._done.append(Outcome(queue.popleft(), False, kind=kind, error=error))
                return
            new = lane not in self._lanes
            w = self._lane(lane)
            if w is not None and w.ready and w.job is None:
                self._send(w, queue.popleft(), on_start)
            elif w is not None and new:
                starting += 1

    def _lane(self, lane: Lane) -> _Worker | None:
        """The reused worker of ``lane``, started if it has none (its setup then runs)."""
        w = self._lanes.get(lane)
        if lane not in self._broken and (w is None or w.closed):
            w = self._lanes[lane] = self._spawn("persistent", lane)
            w.deadline = time.monotonic() + self.setup_timeout_s
        return w

    def _one_job(self, lane: Lane | None) -> bool:
        """Whether the worker of ``lane`` runs a single job (``one_job_timing``: timing lanes only)."""
        return self.one_job_timing and lane is not None and lane[0] == "gpu"

    def _spawn(self, role: str, lane: Lane | None) -> _Worker:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        w = _Worker(next(self._tokens), role, lane, ours, tempfile.TemporaryFile(), ready=role == "once")
        options: dict[str, Any] = {"backend": self.backends[lane[0]], "device": lane[1]} if lane else {}
        prepare = [fn for fn in (self.energy_warm_up, self.compile_warm_up) if fn]
        if lane and lane[0] == "gpu" and prepare:
            options["prepare"] = prepare
        if self._one_job(lane):
            options["one_job"] = True
        if self._handle is not None and self._handle.kept:
            # A kept server's path and environment are an earlier pool's: the worker takes ours.
            options["sys_path"], options["env"] = list(sys.path), worker_env()
        # Their end stays open until the message that hands it over has gone (the outbox).
        self._control_send({"op": "fork", "token": w.token, "role": role, "options": options},
                           [theirs.fileno(), w.out.fileno()], theirs.close)
        self._workers[w.token] = w
        self._sel.register(ours, selectors.EVENT_READ, w)
        if lane is not None:
            self._mark(f"{_lane_words(lane)} forked; its setup starts")
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
        for key, events in self._sel.select(timeout=timeout):
            if key.data is not None:
                if not key.data.closed:  # not retired by an earlier event of this round
                    self._on_readable(key.data)
            elif key.fileobj is self._ctl:  # not a control socket replaced meanwhile
                if events & selectors.EVENT_WRITE:
                    self._flush_control()
                if events & selectors.EVENT_READ:
                    self._on_control()

    # --- the control socket: the outbox, the server's messages, losing the server ----------------

    def _control_send(self, msg: dict[str, Any], fds: list[int] | None = None,
                      sent: Callable[[], None] | None = None) -> None:
        """Queue ``msg`` for the server and send what the socket takes now; ``sent`` runs once it
        has gone. Never waits: the server may itself be waiting for us to read."""
        self._outbox.append((msg, fds or [], sent))
        self._flush_control()

    def _flush_control(self) -> None:
        ctl = self._control()
        while self._outbox:
            msg, fds, sent = self._outbox[0]
            try:
                channel.send_control(ctl, msg, fds, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError:  # the server is gone: its end-of-file, read next, says so
                break
            self._outbox.popleft()
            if sent is not None:
                sent()
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._outbox else 0)
        if self._sel.get_key(ctl).events != events:
            self._sel.modify(ctl, events, None)

    def _on_control(self) -> None:
        try:
            msg, fds = channel.recv_control(self._control())
        except (ConnectionError, OSError):
            msg, fds = None, []
        for fd in fds:
            os.close(fd)
        if msg is None:
            self._server_lost()
            return
        op = msg["op"]
        if op == "ready":
            self._ready, self.server_info = True, msg
            if self._handle is not None:
                self._handle.ready = msg  # for the next pool, where the server is kept
            self._mark("fork server ready")
        elif op == "failed":
            raise UserError(f"cannot start the worker processes: {msg['error']}")
        elif op == "forked":
            self._forked(msg)
        elif op == "exited":
            self._exited(msg["pid"], msg["code"])

    def _server_lost(self) -> None:
        """The server ended (a task killed it, say): every worker died with it
        (``PR_SET_PDEATHSIG``). Start it again; the jobs that were running run again alone."""
        why = _last_line(_read_all(self._server_err)) or _exit_words(self._server.poll() if self._server else None)
        if not self._ready:
            raise UserError(f"the worker server stopped before it was ready: {why}")
        if self._closing:  # lost while this pool let its workers go: nothing left to run
            self._stop_server()
            return
        running = [w.job for w in self._workers.values() if w.job is not None and not w.closed]
        # Only a job that ran alone can be blamed: one that ran beside others runs again alone first.
        culprit = self._suspect if self._suspect is not None and self._suspect in running else None
        self._restarts += 1
        if self._restarts > MAX_SERVER_RESTARTS:
            raise UserError(f"the worker server stopped {self._restarts} times with no job finished in "
                            f"between; the last time: {why}")
        for w in list(self._workers.values()):
            job, w.job = w.job, None
            if job is None or w.closed:
                pass
            elif job is culprit:
                self._done.append(Outcome(job, False, kind="crash", output=self._output(w),
                                          error="the task stopped the worker server (it was started again)",
                                          wall_s=time.monotonic() - w.started))
            else:
                self._suspects.append(job)
            w.exit_code = -signal.SIGKILL
            self._retire(w)
        self._suspect = None
        labels = [j.label or str(j.key) for j in running]
        self.replacements.append({"worker": "worker server", "after": ", ".join(labels) or "no job",
                                  "reasons": [f"the worker server stopped: {why}"]})
        self._stop_server()
        self.start()
        self._await_ready()

    def _stop_server(self) -> None:
        """Close the control socket and make sure the server is gone (its session killed)."""
        server, ctl = self._server, self._ctl
        if ctl is not None:
            try:
                self._sel.unregister(ctl)
            except (KeyError, ValueError):
                pass
            ctl.close()
        for _, _, sent in self._outbox:  # what never went: close the worker ends it would hand over
            if sent is not None:
                sent()
        self._outbox.clear()
        if server is not None:
            try:
                server.wait(timeout=1.5)
            except subprocess.TimeoutExpired:
                _kill_session(server.pid)
                server.wait()
            self._server_err.close()
        self._server, self._ctl, self._ready = None, None, False
        if self._handle is not None:
            self._handle.in_use = False  # a kept server lost: the next take starts it again

    def _release_server(self) -> None:
        """Leave a kept server (server_start.kept_server) to the next pool: kill our workers through
        it and wait until it has reaped them, so that none outlives this pool and no word about
        them is left on its socket; then let the socket go without closing it. A server that has
        not reaped them within 2 s is stopped, as an unkept one is (the next pool starts another)."""
        for w in self._workers.values():
            self._kill(w)  # one whose pid is not known yet is killed when its "forked" comes (_forked)
        deadline = time.monotonic() + 2.0
        while self._server is not None and any(w.exit_code is None for w in self._workers.values()):
            if time.monotonic() > deadline:
                assert self._handle is not None
                self._handle.kill()
                self._stop_server()
                return
            self._poll(0.05)
        if self._server is None:  # lost meanwhile (_server_lost stopped it)
            return
        if self._outbox:  # kills not gone yet: send what the socket takes, then give up on the rest
            self._flush_control()
            for _, _, sent in self._outbox:
                if sent is not None:
                    sent()
            self._outbox.clear()
        ctl = self._ctl
        assert ctl is not None  # the server is ours until the line below
        try:
            self._sel.unregister(ctl)
        except (KeyError, ValueError):
            pass
        self._server, self._ctl, self._ready = None, None, False
        assert self._handle is not None
        self._handle.in_use = False  # the next pool may take it

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
                snap = reply.get("snapshot_s")
                self._mark(f"{_lane_words(w.lane)} ready (setup {reply.get('seconds', 0.0):.2f} s"
                           + (": CUDA context, cuBLAS and the L2 flush buffer" if w.lane[0] == "gpu" else "")
                           + (f"; its state snapshot {snap:.2f} s" if isinstance(snap, (int, float)) else "")
                           + ("; one job, so no state snapshot" if reply.get("one_job") else "") + ")")
                if w.lane[0] == "gpu":
                    self.server_info.setdefault("devices", {})[w.lane[1]] = reply["value"]
            else:
                self._setup_failed(w, reply.get("kind") or "setup", reply.get("error") or "setup failed")
            return
        job, w.job = w.job, None
        if job is None:
            return
        value, replaced = reply.get("value"), list(reply.get("replace") or [])
        if isinstance(value, dict) and RETIRE_KEY in value:  # the job's own word: not part of its result
            value = {k: v for k, v in value.items() if k != RETIRE_KEY}
            replaced.append(str(reply["value"][RETIRE_KEY]) or "the job asked for a new worker")
        outcome = Outcome(job, bool(reply["ok"]), value=value, kind=reply.get("kind"),
                          error=reply.get("error"), traceback=reply.get("traceback"),
                          output=self._output(w), wall_s=time.monotonic() - w.started,
                          replaced=replaced)
        self._done.append(outcome)
        self._mark(f"{job.label or job.fn.rsplit(':', 1)[-1]}: {outcome.wall_s:.2f} s" + _parts_words(reply)
                   + ("" if outcome.ok else f" ({outcome.kind or 'failed'})"))
        w.deadline = float("inf")
        if outcome.replaced:
            self._replace(w, job, outcome.replaced)
        elif w.role == "once" or self.fresh or self._one_job(w.lane):
            self._retire(w)  # a one-job timing worker made no checks: it never gets another job

    def _mark(self, what: str, at: float | None = None) -> None:
        """One event of :attr:`timeline`, now or at ``at`` (``time.monotonic()``; may be before
        this pool was made: a server started early)."""
        self.timeline.append(((time.monotonic() if at is None else at) - self._t0, what))

    def elapsed_s(self) -> float:
        """Seconds since this pool was made (the clock of :attr:`timeline`)."""
        return time.monotonic() - self._t0

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
            self._control_send({"op": "kill", "pid": w.pid})

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


def _parts_words(reply: dict[str, Any]) -> str:
    """Where a reused worker's job went: the job's own seconds and the checks after it (state,
    device) that let the worker take the next one; the rest of the wall is the channel and the
    wait for the runner."""
    if not isinstance(reply.get("checks_s"), (int, float)) or not isinstance(reply.get("seconds"), (int, float)):
        return ""
    return f" (job {reply['seconds']:.2f} s, checks after it {reply['checks_s']:.2f} s)"


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
