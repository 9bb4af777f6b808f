"""roofline-ext fleet: aggregation of recorded H200-like results (TEST FIXTURES in
tests/data/fleet-h200-fixture, made by tests/fakes/make_fleet_fixture.py) and a real Dask LocalCluster with
several worker processes, on which (no GPU here) every worker reports UNKNOWN."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline_ext.check.stragglers import load_dir, summarize_fleet
from roofline_ext.check.outcome import Verdict
from roofline_ext.errors import UserError

FIXTURE = Path(__file__).parent / "data" / "fleet-h200-fixture"


def _summary(fraction=0.95):
    docs, ignored = load_dir(FIXTURE)
    return summarize_fleet(docs, straggler_fraction=fraction, ignored=ignored)


def test_fixture_is_labelled():
    for path in FIXTURE.rglob("check-*.json"):
        assert "TEST FIXTURE" in json.loads(path.read_text())["fixture"]


def test_per_sku_medians_spread_and_stragglers():
    s = _summary()
    (h200,) = s.skus
    assert h200.sku == "H200" and h200.gpus == 8
    read = next(m for m in h200.metrics if m.metric == "hbm_read")
    assert read.n == 8 and read.median == pytest.approx(4.585) and read.min == 4.31 and read.max == 4.60
    assert read.spread == pytest.approx((4.60 - 4.31) / 4.585)
    slow = {(st.host, st.index, st.metric) for st in h200.stragglers}
    assert slow == {("gpu-node-02", 1, "hbm_read"), ("gpu-node-02", 1, "hbm_copy"), ("gpu-node-02", 2, "bf16")}
    st = next(x for x in h200.stragglers if x.metric == "bf16")
    assert st.fraction_of_median == pytest.approx(880.0 / 941.5)
    assert s.verdict is Verdict.WARN and s.exit_code == 4 and "2 straggler(s)" in s.reason


def test_newest_result_per_gpu_counts_once_and_other_files_are_listed():
    s = _summary()
    assert s.duplicates == 1  # node-01 GPU 0 was also checked the day before
    node1_gpu0 = next(g for g in s.gpus if g.host == "gpu-node-01" and g.index == 0)
    assert node1_gpu0.values["hbm_read"] == 4.58 and node1_gpu0.date.startswith("2026-12-01")
    assert len(s.ignored) == 1 and "notes.json" in s.ignored[0]
    assert [g.host for g in s.gpus if g.uuid is None] == ["cpu-node-03"]


def test_straggler_fraction_moves_the_line():
    assert not any(sku.stragglers for sku in _summary(0.90).skus)
    loose = _summary(0.90)
    assert loose.verdict is Verdict.WARN  # node-02 GPU 1 and 2 are WARN against their own calibration
    assert len(_summary(0.999).skus[0].stragglers) > 3
    with pytest.raises(UserError, match="straggler fraction"):
        _summary(1.5)


def test_a_healthy_fleet_passes():
    from fakes.check import FakeCheckBackend
    from roofline_ext.check.run import run_check

    doc = run_check("all", backend=FakeCheckBackend(n=4)).to_dict()
    s = summarize_fleet([(doc, "x")])
    assert s.verdict is Verdict.PASS and s.exit_code == 0 and not s.skus[0].stragglers


def test_cli_from_dir(tmp_path, capsys):
    from roofline_ext.cli.app import main

    out = tmp_path / "fleet.json"
    assert main(["fleet", "--from", str(FIXTURE), "-o", str(out)]) == 4
    text = capsys.readouterr().out
    assert "gpu-node-02" in text and "bf16 93.5%" in text and "fleet: WARN (exit 4)" in text
    doc = json.loads(out.read_text())
    assert doc["kind"] == "roofline_ext.fleet" and doc["summary"]["skus"]["H200"]["gpus"] == 8
    # A fleet result is itself something --from reads (a run of runs).
    again = tmp_path / "again"
    again.mkdir()
    (again / "fleet.json").write_text(out.read_text())
    assert main(["fleet", "--from", str(again), "--json"]) == 4
    assert json.loads(capsys.readouterr().out)["summary"]["skus"]["H200"]["gpus"] == 8


@pytest.mark.parametrize("argv,match", [
    (["fleet", "--from", "/nonexistent-dir"], "not a folder"),
    (["fleet", "--from", "EMPTY"], "no check results"),
    (["fleet", "--from", str(FIXTURE), "--straggler-fraction", "0"], "straggler-fraction"),
    (["fleet", "--from", str(FIXTURE), "--tolerance", "hbm=7"], "between 0 and 0.5"),
    (["fleet", "--from", str(FIXTURE), "-o", str(FIXTURE / "older" / "check-gpu-node-01-gpu0-yesterday.json")], "is a file this run reads"),
])
def test_cli_bad_input_is_one_line_and_exit_2(argv, match, tmp_path, capsys):
    from roofline_ext.cli.app import main

    argv = [str(tmp_path) if a == "EMPTY" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0]


def test_plan_one_task_per_gpu_and_one_for_a_worker_without():
    from roofline_ext.runner.fleet import _plan

    workers = {"tcp://a:1": {"resources": {"GPU": 2}}, "tcp://b:1": {"resources": {}}}
    inventory = {"tcp://a:1": {"gpus": [{"index": 0, "uuid": "GPU-a0"}, {"index": 1, "uuid": "GPU-a1"}]},
                 "tcp://b:1": {"gpus": []}}
    tasks = _plan(workers, inventory)
    assert [(t["worker"], t["device"], t["resources"]) for t in tasks] == [
        ("tcp://a:1", 0, {"GPU": 1}), ("tcp://a:1", 1, {"GPU": 1}), ("tcp://b:1", 0, None)]


def test_unreachable_scheduler_is_a_user_error():
    from roofline_ext.runner.fleet import run_fleet

    with pytest.raises(UserError, match="cannot reach the Dask scheduler"):
        run_fleet("tcp://127.0.0.1:9", connect_timeout_s=1.5)


def test_without_dask_the_fleet_says_what_to_install(monkeypatch):
    import sys

    from roofline_ext.runner.fleet import run_fleet

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(UserError, match=r"roofline-ext\[fleet\]"):
        run_fleet("tcp://127.0.0.1:9")
    # --from needs no Dask at all.
    assert _summary().skus


@pytest.fixture(scope="module")
def local_cluster():
    distributed = pytest.importorskip("distributed")
    # Worker processes (not threads): each task runs the check in its own process on its own worker,
    # as on a GPU cluster, with a GPU resource per worker as dask-cuda declares it.
    with distributed.LocalCluster(n_workers=4, threads_per_worker=1, processes=True, dashboard_address=None,
                                  resources={"GPU": 1}, silence_logs=50) as cluster:
        yield cluster


@pytest.mark.slow
def test_fleet_on_a_real_local_cluster(local_cluster, capsys, tmp_path):
    from roofline_ext.cli.app import main
    from roofline_ext.device.status import availability

    if availability().ok:
        pytest.skip("this machine has a GPU: the workers would not report UNKNOWN")
    out = tmp_path / "fleet.json"
    rc = main(["fleet", "--scheduler", local_cluster.scheduler_address, "--json", "-o", str(out)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 6 and doc["verdict"] == "UNKNOWN" and doc["workers"] == 4
    assert len({r["worker"] for r in doc["results"]}) == 4  # one task on each worker, pinned there
    for r in doc["results"]:
        assert r["check"]["verdict"] == "UNKNOWN" and "no GPU can be checked here" in r["check"]["reason"]
        assert r["returncode"] == 3 and r["wall_s"] > 0
    assert json.loads(out.read_text())["results"] == doc["results"]
    assert doc["wall_s"] < 30
    # Issue 18: the fleet adds at most 5 s beyond the slowest worker's check (here, checks of
    # no GPU run side by side, so the critical path is the slowest one).
    assert doc["critical_path_s"] == max(r["wall_s"] for r in doc["results"])
    assert 0 <= doc["overhead_s"] <= 5, doc["overhead_s"]


def test_checks_of_one_gpu_add_up_on_the_critical_path():
    from roofline_ext.check.stragglers import FleetReport

    results = ({"uuid": "GPU-a", "wall_s": 2.0}, {"uuid": "GPU-a", "wall_s": 2.5}, {"uuid": "GPU-b", "wall_s": 3.0},
               {"uuid": None, "wall_s": 1.0}, {"uuid": None, "wall_s": None})
    report = FleetReport("dask://x", "2026-12-01", _summary(), results, wall_s=6.0, workers=5)
    assert report.critical_path_s == 4.5 and report.overhead_s == 1.5
    assert report.to_dict()["overhead_s"] == 1.5
