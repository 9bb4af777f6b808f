"""benchmarks/energy_repeat.py on the two recorded H200 calibrations of 2026-12-02 (and a third made
from the second): the per-unit spread, the target verdict, and one-line errors."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from fakes.benchmark_loader import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("energy_repeat.py")


@pytest.fixture(scope="module")
def cals():
    return [json.loads((RESULTS / f"calibration-energy-h200-2026-12-02-{i}.json").read_text()) for i in (1, 2)]


def test_spread_of_the_recorded_h200_calibrations(bench, cals):
    doc = bench.repeatability(cals)
    fp32 = doc["units"]["fp32"]
    a, b = (c["energy"]["entries"]["fp32"]["j_per_unit"] for c in cals)
    assert fp32["spread"] == pytest.approx((max(a, b) - min(a, b)) / ((a + b) / 2))
    assert fp32["pj_per_unit"] == pytest.approx([a * 1e12, b * 1e12]) and fp32["within_target"] is True
    # HBM read moved 13% between the cooler first calibration and the second: not repeatable.
    assert doc["units"]["hbm_read"]["within_target"] is False and "hbm_read" in doc["not_within_target"]
    assert doc["calibrations"][0]["sustained_hbm_tbps"]["write"] == pytest.approx(4.6956, abs=1e-4)
    assert set(doc["units"]) == {"fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "hbm_read", "hbm_write",
                                 "hbm_copy"}


def test_a_unit_one_calibration_lacks_is_left_out_of_its_spread(bench, cals):
    third = copy.deepcopy(cals[1])
    third["energy"]["entries"]["fp8"] = {"status": "unsupported", "reason": "no FP8 here"}
    doc = bench.repeatability([*cals, third])
    fp8 = doc["units"]["fp8"]
    assert fp8["status"][2] == "unsupported" and fp8["pj_per_unit"][2] is None and fp8["spread"] is not None
    only = bench.repeatability([cals[0], third])  # one figure left: no spread to take
    assert only["units"]["fp8"]["within_target"] is None and "fp8" in only["not_measured_in_all"]


def test_command_line_writes_the_json_and_says_bad_input_in_one_line(bench, tmp_path, capsys):
    out = tmp_path / "r.json"
    files = [str(RESULTS / f"calibration-energy-h200-2026-12-02-{i}.json") for i in (1, 2)]
    assert bench.main([str(out), *files]) == 1  # HBM is not within 3%
    assert json.loads(out.read_text())["files"] == files
    assert bench.main([str(out), *files, "--target", "0.2"]) == 0
    assert bench.main([str(out), files[0]]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert bench.main([str(out), files[0], str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("energy_repeat: error: ") and str(bad) in err[-1]


def test_library_peers_get_their_own_spread_beside_the_units(bench, cals):
    with_peers = copy.deepcopy(cals)
    for c, pj in zip(with_peers, (110.0, 112.2)):
        own = c["energy"]["entries"]["hbm_copy"]
        c["energy"]["peers"] = {"hbm_copy": [{**own, "origin": "library", "source": "torch copy_ 1 GiB float32",
                                              "j_per_unit": pj * 1e-12}]}
    doc = bench.repeatability(with_peers)
    peer = doc["peers"]["hbm_copy"]
    assert peer["source"] == "torch copy_ 1 GiB float32" and peer["pj_per_unit"] == pytest.approx([110.0, 112.2])
    assert peer["spread"] == pytest.approx(2.2 / 111.1) and peer["within_target"] is True
    assert list(doc["peers"]) == ["hbm_copy"] and bench.repeatability(cals)["peers"] == {}
    # The units' own figures are unchanged by the peers beside them.
    assert doc["units"] == bench.repeatability(cals)["units"]
