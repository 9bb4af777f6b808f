"""CalibrationRecord: the cache's validation, the recorded calibrations' byte-identical round trip,
and the figures its methods give against the key chains they replace."""
from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from roofline_ext.peaks import cache as cb
from roofline_ext.peaks.record import (CalibrationError, CalibrationRecord, MixEnvelope, SustainedEntry,
                                       problem_of)

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "calibration-h200-example.json"


def _recorded() -> list[tuple[str, dict]]:
    """Every calibration committed in the repository: the fixture and the H200 runs (a multi-GPU
    file holds one calibration per device)."""
    out = []
    for path in [FIXTURE, *sorted((ROOT / "benchmarks" / "results").glob("calibration-*.json"))]:
        doc = json.loads(path.read_text(encoding="utf-8"))
        docs = doc["devices"] if isinstance(doc.get("devices"), list) else [doc]
        out += [(f"{path.name}#{i}", d) for i, d in enumerate(docs)]
    return out


RECORDED = _recorded()


def test_the_recorded_calibrations_are_found():
    # The fixture, the four single-GPU runs and both GPUs of the two-GPU run.
    assert len(RECORDED) >= 7


@pytest.mark.parametrize("name, doc", RECORDED, ids=[n for n, _ in RECORDED])
def test_round_trip_is_byte_identical(name, doc):
    record = CalibrationRecord.from_dict(doc)
    assert record.to_dict() == doc
    for indent in (None, 1):  # the key order too: json.dumps writes it as the dict holds it
        assert json.dumps(record.to_dict(), indent=indent) == json.dumps(doc, indent=indent)


def test_the_record_is_a_copy_and_frozen():
    doc = json.loads(FIXTURE.read_text())
    record = CalibrationRecord.from_dict(doc)
    doc["peaks"]["burst"]["bf16"] = 1.0
    doc["gpu"]["name"] = "changed"
    assert record.peak("bf16") == 949.3 and record.gpu.name == "NVIDIA H200"
    out = record.to_dict()
    out["peaks"]["burst"]["bf16"] = 2.0
    assert record.to_dict()["peaks"]["burst"]["bf16"] == 949.3
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.mode = "quick"  # type: ignore[misc]
    with pytest.raises(TypeError):
        record.peaks("burst")["bf16"] = 3.0  # type: ignore[index]


@pytest.mark.parametrize("edit, why", [
    (lambda c: c.update(schema_version=2), "schema version 2, this roofline-ext reads 1"),
    (lambda c: c.pop("schema_version"), "schema version None, this roofline-ext reads 1"),
    (lambda c: c.update(gpu={"name": "x"}), "no gpu.uuid"),
    (lambda c: c.pop("peaks"), "no peaks.burst"),
    (lambda c: c["peaks"].update(sustained=[1]), "peaks.sustained is not an object"),
    (lambda c: c["peaks"]["burst"].update(fp32="fast"), "peaks.burst.fp32 is 'fast', not a finite positive number"),
    (lambda c: c["peaks"]["burst"].update(fp32=1e-7), "peaks.burst.fp32 = 1e-07 is below 0.001, slower than any GPU"),
    (lambda c: c["peaks"]["burst"].update(bandwidth_tbps=9.5),
     "peaks.burst.bandwidth_tbps = 9.5 is above its clock-derived ceiling 4.815 (+10%), which no card reaches"),
    (lambda c: c.update(warnings="w"), "/warnings is 'w', not a list"),
])
def test_from_dict_is_the_cache_validation(edit, why):
    doc = json.loads(FIXTURE.read_text())
    edit(doc)
    with pytest.raises(CalibrationError) as info:
        CalibrationRecord.from_dict(doc)
    assert str(info.value) == why == problem_of(doc) == cb.validate(doc)
    assert isinstance(info.value, ValueError)  # save() has always raised ValueError


def test_from_dict_of_a_non_object():
    with pytest.raises(CalibrationError, match="^not a JSON object but list$"):
        CalibrationRecord.from_dict([1, 2])


def test_read_takes_what_validation_would_refuse():
    # The readers of report inputs and of check backends never validated: read() must not start to.
    record = CalibrationRecord.read({"burst": [1], "peaks": {"burst": {"fp32": 9e9}}, "hostlink": "x"})
    assert record.burst == {} and record.hostlink is None and record.peak("fp32") == 9e9
    assert record.gpu.uuid is None and record.entry("hbm") is None and record.peaks("sustained") == {}


def test_figures_by_unit_and_regime():
    record = CalibrationRecord.from_dict(json.loads(FIXTURE.read_text()))
    doc = record.to_dict()
    assert record.peak("bandwidth_tbps") == doc["peaks"]["burst"]["bandwidth_tbps"]
    assert record.peak("bf16", "sustained") == doc["peaks"]["sustained"]["bf16"]
    assert record.peak("nothing") is None and record.peak("fp32", "other") is None
    assert record.has_sustained()
    hbm = record.entry("bandwidth_tbps")  # a peak key names its unit
    assert hbm is record.entry("hbm") and hbm.value == doc["burst"]["entries"]["hbm"]["value"]
    assert hbm.ceiling() == doc["burst"]["entries"]["hbm"]["clock_derived"]
    sus = record.entry("bf16", "sustained")
    assert isinstance(sus, SustainedEntry)
    assert sus.value == record.sustained_figure("bf16") == doc["sustained"]["entries"]["bf16"]["value"]
    assert sus.ratio_to_burst == doc["sustained"]["entries"]["bf16"]["ratio_to_burst"]
    assert record.clocks_seen("bf16", "sustained")["sm_clock_mhz"] == doc["sustained"]["entries"]["bf16"]["sm_clock_mhz"]
    assert record.sustained_figure("l2") is None


def test_an_int_stays_an_int():
    # The reports print a figure as the file has it: 512 W, not 512.0 W.
    record = CalibrationRecord.from_dict(json.loads(FIXTURE.read_text()))
    power = record.entry("fp64").power_w
    assert power == 512 and type(power) is int


def test_hostlink_and_hbm_patterns_of_a_recorded_run():
    path = ROOT / "benchmarks" / "results" / "calibration-full-h200-2026-12-01.json"
    doc = json.loads(path.read_text())
    record = CalibrationRecord.from_dict(doc)
    assert record.hostlink_figure("h2d") == doc["hostlink"]["h2d"]["value"]
    assert record.hostlink_figure("d2h") == doc["hostlink"]["d2h"]["value"]
    assert record.hostlink_figure("other") is None
    hbm = record.entry("hbm")
    for pattern, p in doc["burst"]["entries"]["hbm"]["patterns"].items():
        assert hbm.pattern_figure(pattern) == p["tbps"]
        assert hbm.pattern_config(pattern) == p["config"]
    assert isinstance(record.mix, MixEnvelope) and record.mix.points == doc["burst"]["entries"]["hbm_mix"]["points"]


@pytest.mark.parametrize("name, doc", RECORDED, ids=[n for n, _ in RECORDED])
@pytest.mark.parametrize("regime", ["burst", "sustained"])
def test_l2_figure_is_the_records(name, doc, regime):
    from roofline_ext.model.profiled import l2_figure

    assert CalibrationRecord.from_dict(doc).l2_figure(regime) == l2_figure(doc, regime)


def test_measured_peaks_carry_the_scaled_sustained_envelope():
    path = ROOT / "benchmarks" / "results" / "calibration-full-h200-2026-12-01.json"
    record = CalibrationRecord.from_dict(json.loads(path.read_text()))
    burst, sustained = record.measured_peaks("burst"), record.measured_peaks("sustained")
    assert burst.mix and burst.mix_note is None and burst.uuid == record.gpu.uuid
    ratio = record.sustained["hbm"].ratio_to_burst
    assert sustained.mix == pytest.approx({k: v * ratio for k, v in burst.mix.items()})
    assert "sustained/burst ratio" in sustained.mix_note


def test_mix_points_above_the_ceiling_are_left_out():
    doc = json.loads(FIXTURE.read_text())
    doc["burst"]["entries"]["hbm_mix"] = {"points": {"1:0": 4.0, "2:1": 99.0, "1:1": "x"}}
    record = CalibrationRecord.read(doc)
    assert record.mix_envelope("burst") == ({"1:0": 4.0}, None)


def test_a_quick_calibration_has_no_sustained_peaks():
    doc = copy.deepcopy(json.loads(FIXTURE.read_text()))
    doc["peaks"].pop("sustained")
    record = CalibrationRecord.from_dict(doc)
    assert not record.has_sustained() and record.measured_peaks("sustained") is None


def test_load_record_reads_what_save_wrote(tmp_path, monkeypatch):
    monkeypatch.setenv(cb.CACHE_ENV, str(tmp_path))
    doc = json.loads(FIXTURE.read_text())
    cb.save(doc)
    record = cb.load_record(doc["gpu"]["uuid"])
    assert record is not None and record.to_dict() == doc == cb.load(doc["gpu"]["uuid"])
