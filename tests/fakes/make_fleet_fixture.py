"""Writes tests/data/fleet-h200-fixture/: check results of a made-up fleet of H200s (TEST FIXTURES).

Eight H200s on two hosts, figures modelled on tests/data/calibration-h200-example.json with a
little spread, one straggler on HBM (node-02 GPU 1) and one on BF16 (node-02 GPU 2), a repeated
check of node-01 GPU 0 (the newer one counts), a host that sees no GPU, and a file that is not a
check result. Not measurements. Run from tests/: python -m fakes.make_fleet_fixture
"""
from __future__ import annotations

import json
from pathlib import Path

from fakes.check import FakeCheckBackend
from roofline_ext.check.run import run_check

OUT = Path(__file__).resolve().parent.parent / "data" / "fleet-h200-fixture"
NOTE = ("TEST FIXTURE for tests/test_runner_fleet.py: made-up H200 check results modelled on "
        "calibration-h200-example.json. NOT a measurement.")
FIGURES = {
    "gpu-node-01": [(4.58, 4.29, 940.0, 55.3), (4.60, 4.30, 946.0, 55.6), (4.57, 4.28, 938.0, 55.1), (4.59, 4.29, 944.0, 55.4)],
    "gpu-node-02": [(4.59, 4.30, 942.0, 55.2), (4.31, 4.05, 944.0, 55.5), (4.58, 4.29, 880.0, 55.3), (4.60, 4.31, 941.0, 55.0)],
}


def _doc(host: str, gpus: list, date: str) -> dict:
    b = FakeCheckBackend(n=len(gpus))
    for i, (read, copy, bf16, h2d) in enumerate(gpus):
        b.devs[i] = type(b.devs[i])(**{**b.devs[i].__dict__, "uuid": f"GPU-{host[-2:]}00000{i}-fixture-0000-000000000000"})
        b.cals = {d.uuid: FakeCheckBackend().cals["GPU-00000000-fixture-0000-000000000000"] for d in b.devs}
        b.figures[i].update(hbm_read=read, hbm_copy=copy, bf16=bf16, h2d=h2d, d2h=h2d + 0.5)
    doc = run_check("all", backend=b).to_dict()
    doc.update(host=host, date=date, fixture=NOTE)
    return doc


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for host, gpus in FIGURES.items():
        (OUT / f"check-{host}.json").write_text(json.dumps(_doc(host, gpus, "2026-12-01T06:00:00+00:00"), indent=1) + "\n")
    old = _doc("gpu-node-01", [(4.20, 4.00, 900.0, 50.0)], "2026-11-30T06:00:00+00:00")
    (OUT / "older" ).mkdir(exist_ok=True)
    (OUT / "older" / "check-gpu-node-01-gpu0-yesterday.json").write_text(json.dumps(old, indent=1) + "\n")
    from roofline_ext.check.result import CheckReport
    from roofline_ext.check.outcome import Verdict

    none = CheckReport(Verdict.UNKNOWN, "no GPU can be checked here: the NVIDIA driver is installed but no GPU "
                       "is visible (fixture)", (), {"available": False, "reason": "no_device"},
                       "2026-12-01T06:00:00+00:00", "0.1.0", host="cpu-node-03", no_gpu=True).to_dict()
    none["fixture"] = NOTE
    (OUT / "check-cpu-node-03.json").write_text(json.dumps(none, indent=1) + "\n")
    (OUT / "notes.json").write_text(json.dumps({"note": "not a check result; fleet --from ignores it"}) + "\n")


if __name__ == "__main__":
    main()
