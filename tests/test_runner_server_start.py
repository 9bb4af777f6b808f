"""runner/server_start.py: the fork server started early by the CLI is the one the pool then uses,
a server that does not fit is replaced, and one that no pool took never outlives the command."""
from __future__ import annotations

import os

import pytest

import roofline_ext.runner.server_start as server_start
from roofline_ext.runner.pool import Job, Pool, supported

pytestmark = [pytest.mark.slow,  # each starts a fork server, which imports torch
              pytest.mark.skipif(not supported(), reason="the worker pool needs Linux")]


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
