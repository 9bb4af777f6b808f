"""GPU tests are marked ``gpu``: skipped with the availability reason where no GPU can be measured.

Under ``--require-gpu`` (scripts/gpu-check uses it) every skip of a GPU test is a failure instead:
the machine-level skip, and any ``pytest.skip``/``importorskip`` inside a GPU test (torch without
CUDA, a missing tool). A GPU machine whose build silently lost its CUDA part, or whose torch is a
CPU build, cannot pass by skipping. ``tests/test_device_availability.py`` runs pytest on a do-nothing GPU
test to prove it.

Two workers by default (pytest-xdist, docs/testing.md): ``python3 -m pytest`` runs the suite on two
xdist workers where pytest-xdist is installed and the machine has two cores or more; ``-n 0`` or
``-p no:xdist`` runs it in this one process, ``-n N`` picks another count. Tests are spread one by
one, except the modules in :data:`ONE_WORKER`, whose module-scoped fixtures
are expensive (a fixture runs once per worker that gets a test of its module). Tests marked
``serial``, and GPU tests that are not skipped, run alone: every other test holds a shared lock for
the whole of its run, a ``serial`` test the exclusive one, so nothing else runs beside a test that
bounds a wall time or measures a GPU.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path

import pytest

#: Modules whose tests all go to one xdist worker (their module-scoped fixture would otherwise run
#: on both): test_repo_bad_input's ``outcomes`` runs every selected case up front, the KernelBench ones
#: count all 250 tasks, test_judge_exploits judges the whole exploit suite, test_runner_fleet starts a Dask
#: cluster, test_report_html renders its pages once, test_measure_host_reference compiles its C++
#: once; the GPU modules time or record on the GPU once.
ONE_WORKER = ("test_repo_bad_input", "test_model_ops", "test_judge_exploits", "test_runner_fleet",
              "test_report_html", "test_measure_host_reference", "test_judge_gpu", "test_judge_native_gpu",
              "test_model_ops_gpu", "test_check_load_gpu")
#: Workers when none are asked for: the CI-class VM's two cores (more would only share them).
DEFAULT_WORKERS = 2


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """``-n 2`` unless the command line chose (``-n``, ``--dist``), xdist is absent
    or disabled (``-p no:xdist``), this is an xdist worker, pytest-benchmark is loaded, or the run
    cannot use workers (one core, ``--pdb``, ``--collect-only``). Runs before xdist's own hook turns ``-n`` into workers."""
    if not config.pluginmanager.hasplugin("xdist") or "PYTEST_XDIST_WORKER" in os.environ:
        return
    opt = config.option
    if opt.numprocesses is not None or opt.dist != "no" or getattr(opt, "distload", False):
        return
    if getattr(opt, "usepdb", False) or getattr(opt, "collectonly", False) or _cores() < 2:
        return
    # pytest-benchmark (installed on the H200 machine) warns that xdist disables it, and warnings
    # are errors here: the run died before its first test (2026-12-02). Its timings need one
    # process anyway, so a machine that has it runs the suite in one, as before the workers.
    if any(getattr(mod, "__name__", "").startswith("pytest_benchmark")
           for _, mod in config.pluginmanager.list_name_plugin()):
        return
    opt.numprocesses = min(DEFAULT_WORKERS, _cores())
    opt.dist = "load"  # spread by _Scheduling below, which keeps the ONE_WORKER modules together
    config.stash[_DEFAULTED] = True


_DEFAULTED = pytest.StashKey[bool]()


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """With the default workers: xdist's load-by-scope scheduler, where a scope is one test, or the
    whole module for the modules of :data:`ONE_WORKER`. (The scheduler runs in this process and
    sees only node ids, so it needs no marker that the workers would have to be told about.)"""
    if not config.stash.get(_DEFAULTED, False):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class _Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return nodeid.split("::", 1)[0] if _module(nodeid) in ONE_WORKER else nodeid

    return _Scheduling(config, log)


def pytest_configure(config):
    import signal

    # A suite started as a background job of a shell without job control (`pytest ... &`, a CI
    # step's `cmd &`) starts with SIGINT ignored, and every child inherits that: the Ctrl-C tests'
    # CLI would never see their SIGINT and the process snapshot could not see a task ignore it.
    # Tests run with Python's own handler, as from a terminal.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser):
    parser.addoption("--require-gpu", action="store_true", default=False,
                     help="fail (instead of skip) GPU tests when no GPU can be measured")


def _no_gpu_reason() -> str | None:
    from roofline_ext.device.status import availability

    avail = availability()
    return None if avail.ok else f"{avail.reason.value}: {avail.message}"


def _gpu_test(item) -> bool:
    return item.get_closest_marker("gpu") is not None


def pytest_collection_modifyitems(config, items):
    if config.getoption("--require-gpu"):
        return  # nothing is skipped: pytest_runtest_call fails each GPU test instead
    gpu_items = [i for i in items if _gpu_test(i)]
    reason = _no_gpu_reason() if gpu_items else None
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"no GPU: {reason}")
    for item in gpu_items:
        item.add_marker(skip)


def _runs_alone(item) -> bool:
    """``serial``, or a GPU test that will run (a skipped one measures nothing)."""
    if item.get_closest_marker("serial") is not None:
        return True
    return _gpu_test(item) and item.get_closest_marker("skip") is None


def _lock_base(config) -> Path | None:
    """Where this xdist run's lock files are (one pair per run), or None in a process that is not
    an xdist worker. Taken from the worker's own config, not the environment: a pytest that a test
    starts inherits PYTEST_XDIST_TESTRUNUID, and waiting there on its parent's lock would deadlock."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    return Path(tempfile.gettempdir()) / f"roofline-ext-pytest-{workerinput['testrunuid']}"


@contextlib.contextmanager
def _turn(item):
    """Under xdist: the shared lock for this test's whole run, or the exclusive one for a test that
    runs alone. A turnstile taken first stops the shared holders from starving an exclusive waiter
    (flock alone lets a new shared lock in while an exclusive one waits)."""
    base = _lock_base(item.config)
    if base is None:
        yield
        return
    with open(f"{base}.turnstile", "a+") as gate, open(f"{base}.lock", "a+") as lock:
        alone = _runs_alone(item)
        fcntl.flock(gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    with _turn(item):
        yield


def pytest_unconfigure(config):
    # A worker that ends runs no more tests: whichever ends first removes the files, and the other
    # (if still running) has nobody left to share a lock with.
    base = _lock_base(config)
    if base is not None:
        for suffix in (".turnstile", ".lock"):
            with contextlib.suppress(OSError):
                os.unlink(f"{base}{suffix}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    # A hook, not a fixture added at collection: a fixture added that late is never set up, which
    # is how --require-gpu once did nothing. Here, before the test body runs, it fails the test.
    if item.config.getoption("--require-gpu") and _gpu_test(item):
        reason = _no_gpu_reason()
        if reason is not None:
            pytest.fail(f"--require-gpu given but no GPU can be measured: {reason}", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if (report.skipped and not hasattr(report, "wasxfail") and _gpu_test(item)
            and item.config.getoption("--require-gpu")):
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"--require-gpu: this GPU test skipped instead of checking: {why}"


@pytest.fixture(autouse=True)
def _sigint_handler_put_back():
    """A test that leaves SIGINT ignored in this process breaks every later test that sends Ctrl-C
    to a child (a child starts with the signals its parent ignores) and hides a task's own SIGINT
    change from the process snapshot: which tests those follow depends on the order xdist deals
    them out, so the handler is put back after each test, and a test that changed it fails."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    if after is not before:
        signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)
        pytest.fail(f"the test left SIGINT's handler changed ({before!r} -> {after!r})", pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def _one_fork_server():
    """One fork server for every pool of this test process that can take it
    (runner/server_start.py's ``kept_server``, started when a pool first wants one): each pool's
    server imported torch and counted a warm-up task, 3-4.5 CPU-s, and the suite makes well over a
    hundred pools. A pool still starts its own where the environment differs from the kept
    server's, and tests of the server's own start and end opt out with ``no_kept_server()``."""
    from roofline_ext.runner.pool import supported
    from roofline_ext.runner.server_start import kept_server

    if not supported():
        yield None
        return
    with kept_server(warm_up=True, lazy=True) as keeper:
        yield keeper


@pytest.fixture(autouse=True)
def _kept_server_follows_the_environment(_one_fork_server):
    """A kept server serves only pools of the environment it was started in, and this process's
    environment changes for good during the session: torch's inductor sets
    ``TORCHINDUCTOR_CACHE_DIR`` the first time it looks at its cache here, and Dask sets its
    ``__DASK_PARENT_PID``, ``OMP_NUM_THREADS``, ``MALLOC_TRIM_THRESHOLD_``... where a test uses it.
    After that every pool of the session started its own server (an ``import torch`` and a warm-up
    count each: 55 of the slow lane's pools, 2026-12-06). So before each test (its own
    ``monkeypatch`` not yet applied, the previous test's undone) a kept server started in another
    environment is let go, and the next pool starts the kept one again in this one: what that pool
    would have started for itself."""
    from roofline_ext.runner.server_start import _env_now

    keeper = _one_fork_server
    server = getattr(keeper, "server", None)
    if server is not None and not server.in_use and server.env != _env_now():
        keeper.close()
    yield


@pytest.fixture(autouse=True)
def _private_calibration_cache(tmp_path_factory, monkeypatch):
    """Every test sees an empty calibration cache of its own, never the user's: a calibration cached
    on this machine must not change what analyze tests compute."""
    monkeypatch.setenv("ROOFLINE_EXT_CACHE_DIR", str(tmp_path_factory.mktemp("calibration-cache")))


@pytest.fixture
def analyze_in_process():
    """``roofline-ext analyze ARGV`` as ``main()`` in this process with ``--isolation process``:
    the task is counted here, not by a worker pool. A pool starts a fork server that imports torch
    (about 2.2 s per ``analyze`` on the 2-core CI-class VM, against 0.01 s counting here), which a
    test pays for nothing when what it checks is the report, the numbers or the arguments. Tests of
    the pool, of isolation or of process behaviour (a task's own exit or Ctrl-C, workers, the fork
    server) call ``main()`` without it, through the pool. ``before`` goes ahead of ``analyze``
    (global flags such as ``--debug``). Returns the exit code."""
    from roofline_ext.cli import main

    def run(*argv, before=()):
        return main([*map(str, before), "analyze", "--isolation", "process", *map(str, argv)])

    return run
