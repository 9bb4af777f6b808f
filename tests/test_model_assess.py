"""``model/assess.py``: a task's result assembled once, from typed inputs, gives the JSON the old
dict path gave, key for key and in order (``tests/data/assess_golden.json``, written by the old path
from the same inputs: ``tests/fakes/assess_cases.py``)."""
from __future__ import annotations

import json

import pytest

from fakes import assess_cases
from roofline_ext.report.writers import dumps

GOLDEN = json.loads(assess_cases.GOLDEN.read_text())


def _ordered(obj):
    """The value with every mapping as a list of (key, value): equal only in the same order."""
    if isinstance(obj, dict):
        return [(k, _ordered(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [_ordered(v) for v in obj]
    return obj


@pytest.mark.parametrize("name", sorted(assess_cases.cases()))
def test_assess_gives_the_old_paths_json_key_for_key(name):
    result = assess_cases.new_result(assess_cases.cases()[name])
    new = json.loads(dumps(result.to_dict(), indent=1))
    old = GOLDEN[name]
    assert list(new) == list(old)
    for key in old:
        assert new[key] == old[key], key
    assert _ordered(new) == _ordered(old)


def test_the_golden_cases_cover_every_verdict_and_part():
    verdicts = {c["verdict"] for r in GOLDEN.values() for c in r.get("candidates") or ()}
    assert verdicts == {"correct", "incorrect", "invalid", "below_floor", "error"}
    keys = {k for r in GOLDEN.values() for k in r}
    assert {"timing", "energy", "kernel_profile", "score", "compiled_correct", "ops", "unfused", "by_op",
            "wall_parts_s", "worker_replaced"} <= keys
    assert GOLDEN["timed_no_output"]["status"] == "error" and "timing" in GOLDEN["timed_no_output"]
    assert "floor" in GOLDEN["timed_many_energy"]["energy"]
    assert "floor_error" in GOLDEN["timed_energy_no_cost"]["energy"]


def test_the_typed_result_carries_what_the_private_keys_did():
    from roofline_ext.model.assess import TaskResult
    from roofline_ext.model.results import RooflineResult
    from roofline_ext.model.roofs import RoofSet

    r = assess_cases.new_result(assess_cases.cases()["timed_profile"])
    assert isinstance(r, TaskResult) and r.status == "ok"
    assert isinstance(r.roofline, RooflineResult) and isinstance(r.roof_set, RoofSet) and r.no_roofline is None
    assert r.roofline.ops[0].kernels and r.roofline.ops[0].kernel_ms == pytest.approx(0.05)
    d = r.to_dict()
    assert not any(k.startswith("_") for k in d)
    # describe()'s dict: the floors with the roofs of the JSON (the candidate's score on them)
    rd = r.roofline_dict()
    assert rd is not None and rd["roofs"] == d["roofs"] and "score" in rd["roofs"]["datasheet"]
    none = assess_cases.new_result(assess_cases.cases()["no_floor"])
    assert none.roofline is None and none.roofline_dict() is None and "0 bytes" in none.no_roofline


def test_a_verdict_and_its_evidence_pass_through_unchanged():
    from roofline_ext.model.assess import CandidateResult

    value = assess_cases.reply("invalid")
    c = CandidateResult.from_reply("c.py", None, value).scored({"datasheet": {"t_min_ms": 0.05}}, 0.2)
    d = c.to_dict()
    assert d["verdict"] == "invalid" and d["defence"] == "identity" and d["judgement"] == value["judgement"]
    assert d["judgement"]["evidence"] == {"changes": ["torch.allclose"]} and d["roofs"] == {"datasheet": None}


def test_the_result_is_frozen_and_to_dict_fresh():
    import dataclasses

    r = assess_cases.new_result(assess_cases.cases()["timed_one"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.notes = ()  # type: ignore[misc]
    a = r.to_dict()
    a["roofs"]["datasheet"]["score"] = -1
    a["candidates"][0]["verdict"] = "changed"
    assert r.to_dict()["roofs"]["datasheet"]["score"] != -1 and r.to_dict()["candidates"][0]["verdict"] == "correct"
