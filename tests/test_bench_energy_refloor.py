"""benchmarks/energy_refloor.py on the recorded H200 batches of 2026-12-02 (L1-L3 with --energy):
rebuilt against its own calibration every floor is as recorded; against the calibration that also
measured the library peers, no reference is below its floor (session 13's batch rebuilt, session
14's as measured); one-line errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.benchmark_loader import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BATCH = RESULTS / "levels-energy-h200-2026-12-02-s13.json.gz"
OWN_ONLY = RESULTS / "calibration-energy-h200-2026-12-02-s13-window10-3.json"
WITH_PEERS = RESULTS / "calibration-energy-h200-2026-12-02-s13-peers-1.json"


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("energy_refloor.py")


@pytest.fixture(scope="module")
def batch(bench):
    return bench._read(str(BATCH))


def test_against_its_own_calibration_every_floor_is_as_recorded(bench, batch):
    doc = bench.refloor(batch, json.loads(OWN_ONLY.read_text()))
    assert doc["tasks_measured"] == 250
    for row in doc["tasks"]:
        assert row["floor_mj"] == pytest.approx(row["recorded_floor_mj"], rel=1e-12), row["task"]
    recorded = {t["task"]: t["energy"]["reference"]["below_floor"] for t in batch["tasks"]}
    assert sorted(doc["below_floor"]) == sorted(k for k, v in recorded.items() if v)
    # The own kernels alone: eight elementwise L1 references below (torch's kernels are more frugal).
    assert len(doc["below_floor"]) == 8 and "level1/19_ReLU" in doc["below_floor"]


def test_with_the_library_peers_no_reference_is_below_its_floor(bench, batch):
    doc = bench.refloor(batch, json.loads(WITH_PEERS.read_text()))
    assert doc["tasks_measured"] == 250 and doc["below_floor"] == []
    assert doc["costs"]["hbm_copy"]["origin"] == "library" and "torch copy_" in doc["costs"]["hbm_copy"]["source"]
    assert doc["costs"]["bf16"]["origin"] == "own"  # cuBLAS drew more per FLOP than the own wgmma kernel
    relu = next(r for r in doc["tasks"] if r["task"] == "level1/19_ReLU")
    assert relu["floor_mj"] < relu["recorded_floor_mj"] and relu["fraction_of_floor"] < 1.0
    assert all(r["fraction_of_floor"] <= 1.0 for r in doc["tasks"])
    assert [r["fraction_of_floor"] for r in doc["furthest_above"]] == sorted(r["fraction_of_floor"]
                                                                             for r in doc["furthest_above"])


def test_the_batch_measured_against_the_same_sessions_calibration_is_at_or_above_every_floor(bench):
    # Session 14: the batch's floors came from a calibration with the peers made 11 minutes before
    # it on the same card (not a rebuild); the recorded floors are the package's rule on it, and
    # no reference is below its floor (the highest, LeakyReLU, is at 80.5% of it).
    batch = bench._read(str(RESULTS / "levels-energy-h200-2026-12-02-s14.json.gz"))
    cal = json.loads((RESULTS / "calibration-energy-h200-2026-12-02-s14-1.json").read_text())
    doc = bench.refloor(batch, cal)
    assert doc["tasks_measured"] == 250 and doc["below_floor"] == []
    for row in doc["tasks"]:
        assert row["floor_mj"] == pytest.approx(row["recorded_floor_mj"], rel=1e-12), row["task"]
    assert max(r["fraction_of_floor"] for r in doc["tasks"]) < 0.81  # LeakyReLU's 80.5% the highest
    assert doc["costs"]["hbm_write"]["origin"] == "library"  # torch fill_ wrote a byte for less


def test_unreadable_input_is_one_line(bench, tmp_path, capsys):
    bad = tmp_path / "cal.json"
    bad.write_text("{}")
    assert bench.main([str(BATCH), str(bad), str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("energy_refloor: error: ") and err.count("\n") == 1
    assert not (tmp_path / "out.json").exists()
