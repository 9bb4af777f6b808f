"""runner/server_start.py: the fork server started early by the CLI is the one the pool then uses,
a server that does not fit is replaced, and one that no pool took never outlives the command."""
from __future__ import annotations

import os

import pytest

import roofline_ext.runner.server_start as server_start
from roofline_ext.runner.pool import Job, Pool, supported

pytestmark = [pytest.mark.slow,  # each starts a fork server, which imports torch
              pytest.mark.skipif(not supported(), reason="the worker pool needs Linux")]


@pytest.fixture(autouse=True)
def _own_servers():
    """These tests are of the server's own start and end: not the suite's kept one (conftest)."""
    with server_start.no_kept_server():
        yield


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_pool_takes_the_server_started_early_and_runs_its_jobs_there():
    server_start.start_early(warm_up=False)
    early = server_start._early
    assert early is not None
    with Pool(1, warm_up=False) as pool:
        assert pool._server is early.process  # taken over, not a second server
        out = list(pool.run([Job(0, "os:getppid", {}, 60)]))
        assert out[0].ok and out[0].value == early.process.pid  # the worker was forked by it
        assert any("before the pool" in what for _, what in pool.timeline), pool.timeline
    assert server_start._early is None and early.process.poll() is not None
    # Taken once: the next pool starts its own.
    with Pool(1, warm_up=False) as pool:
        assert pool._server is not early.process


def test_a_server_that_does_not_fit_is_killed_and_one_nobody_took_is_discarded():
    server_start.start_early(warm_up=True)
    early = server_start._early
    assert early is not None
    with Pool(1, warm_up=False) as pool:  # another warm-up: its own server
        assert pool._server is not early.process
        assert list(pool.run([Job(0, "os:getpid", {}, 60)]))[0].ok
    assert early.process.poll() is not None and _gone(early.process.pid)
    server_start.start_early(warm_up=False)
    early = server_start._early
    assert early is not None
    server_start.discard_early()
    assert server_start._early is None and early.process.poll() is not None


def test_a_command_that_ends_before_its_pool_leaves_no_server(monkeypatch, capsys, tmp_path):
    # `analyze --time` on a machine with no GPU: the server was started early, then the GPU check
    # says why it cannot time (exit 3); the server goes with the command, not at the interpreter's exit.
    import roofline_ext.device.status as status
    from roofline_ext.cli.app import main
    from roofline_ext.errors import GpuUnavailableError

    started = []
    spawn = server_start.spawn_server

    def recording(*a, **kw):
        started.append(spawn(*a, **kw))
        return started[-1]

    def no_gpu(device=0):
        raise GpuUnavailableError(status.availability())

    monkeypatch.setattr(server_start, "spawn_server", recording)
    monkeypatch.setattr(status, "require_measurement", no_gpu)
    task = tmp_path / "t.py"
    task.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x + 1\n"
                    "def get_inputs():\n    return [torch.randn(8)]\ndef get_init_inputs():\n    return []\n")
    rc = main(["analyze", str(task), "--time", "--gpu", "H200"])
    assert rc == 3, capsys.readouterr().err
    assert len(started) == 1 and started[0].process.poll() is not None
    assert server_start._early is None


def _alive(pid: int) -> bool:
    return not _gone(pid) and not open(f"/proc/{pid}/stat").read().split(") ")[1].startswith("Z")


def test_a_kept_server_serves_pool_after_pool_and_each_pools_workers_go_with_it(tmp_path, monkeypatch):
    with server_start.kept_server(warm_up=False) as keeper:
        kept = keeper.server
        assert kept is not None
        with Pool(1, warm_up=False) as first:
            pids = [o.value for o in first.run([Job(i, "os:getpid", {}, 60) for i in range(2)])]
            assert first._server is kept.process
        assert kept.alive() and all(_gone(p) or not _alive(p) for p in pids)  # reaped, none left
        # A module put on the path after the server started still loads in the next pool's workers.
        (tmp_path / "late_module.py").write_text("def where():\n    import os\n    return os.getppid()\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        with Pool(1, warm_up=False) as second:
            out = list(second.run([Job(0, "late_module:where", {}, 60)]))
            assert out[0].ok and out[0].value == kept.process.pid, out[0].error
            assert any("kept from an earlier pool" in what for _, what in second.timeline), second.timeline
        # Two pools open at once (nested batches): the second starts its own, since they would
        # share one control socket.
        with Pool(1, warm_up=False) as outer, Pool(1, warm_up=False) as inner:
            assert outer._server is kept.process and inner._server is not kept.process
            assert list(inner.run([Job(0, "os:getpid", {}, 60)]))[0].ok
            assert list(outer.run([Job(0, "os:getpid", {}, 60)]))[0].ok
        # Another environment (torch reads some at import): a server of its own, as without keeping.
        monkeypatch.setenv("ROOFLINE_TEST_OTHER_ENV", "1")
        with Pool(1, warm_up=False) as other:
            assert other._server is not kept.process
            assert list(other.run([Job(0, "os:getpid", {}, 60)]))[0].ok
    assert not kept.alive()


def test_a_task_that_kills_the_kept_server_fails_alone_and_the_next_pool_gets_a_new_one(tmp_path, monkeypatch):
    (tmp_path / "killer.py").write_text("def kill_server():\n    import os, signal, time\n"
                                        "    os.kill(os.getppid(), signal.SIGKILL)\n"
                                        "    time.sleep(30)  # the worker goes with its server\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with server_start.kept_server(warm_up=False) as keeper:
        assert keeper.server is not None
        first_pid = keeper.server.process.pid
        with Pool(1, warm_up=False) as pool:
            outs = {o.job.key: o for o in pool.run([Job(0, "killer:kill_server", {}, 60),
                                                    Job(1, "os:getpid", {}, 60)])}
        assert not outs[0].ok and outs[1].ok, outs
        with Pool(1, warm_up=False) as pool:
            assert list(pool.run([Job(0, "os:getpid", {}, 60)]))[0].ok
            assert keeper.server is not None and keeper.server.process.pid != first_pid
            assert pool._server is keeper.server.process
    assert keeper.server is None


def test_a_kept_servers_workers_see_the_pools_own_settings(monkeypatch):
    # The package's own settings (read when used, never at import) may differ from the kept
    # server's: the pool still takes it, and its workers see the pool's value.
    monkeypatch.setenv("ROOFLINE_EXT_CACHE_DIR", "/nonexistent/first")
    with server_start.kept_server(warm_up=False, lazy=True) as keeper:
        assert keeper.server is None  # lazy: started at the first pool
        monkeypatch.setenv("ROOFLINE_EXT_CACHE_DIR", "/nonexistent/second")
        with Pool(1, warm_up=False) as pool:
            assert keeper.server is not None and pool._server is keeper.server.process
            out = list(pool.run([Job(0, "os:getenv", {"key": "ROOFLINE_EXT_CACHE_DIR"}, 60)]))
            assert out[0].ok and out[0].value == "/nonexistent/second", out[0]
            # ...and what every server's environment adds (torch must ask NVML, not the driver,
            # whether CUDA is there), as a worker of an unkept server has it.
            out = list(pool.run([Job(0, "os:getenv", {"key": "PYTORCH_NVML_BASED_CUDA_CHECK"}, 60)]))
            assert out[0].ok and out[0].value == "1", out[0]
