"""The kernel profile of the reference on the GPU (issue 16): a tiny model's kernels are timed,
mapped to the ops that launched them, and add up to no more than the event-timed run."""
from __future__ import annotations

import textwrap

import pytest

from roofline_ext.runner import timing_jobs
from roofline_ext.runner.analyze import assess_task
from roofline_ext.tasks.counting import count_task

TINY = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(1024, 4096)
        self.fc2 = nn.Linear(4096, 1024)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) * 2.0
def get_inputs():
    return [torch.randn(4096, 1024)]
def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def timed(tmp_path_factory):
    p = tmp_path_factory.mktemp("ops") / "tiny.py"
    p.write_text(textwrap.dedent(TINY))
    return p, timing_jobs.time_reference(p, trials=20, warmup=3, profile=True)


@pytest.mark.gpu
def test_kernels_are_timed_and_mapped(timed):
    _, r = timed
    prof = r["kernel_profile"]
    assert "error" not in prof, prof.get("error")
    ops = prof["ops"]
    assert [o["op"] for o in ops if o["kernels"]][:2] == ["addmm", "relu"]
    for o in ops:
        if o["op"] in ("addmm", "relu", "mul"):
            assert o["kernels"], o  # every op that computes launched a kernel and was found
        assert all(ms > 0 for _, ms in o["kernels"])
    assert prof["kernels"] >= 4 and prof["outside_ms"] == 0
    # The profile sees the work: no more than the event-timed run (plus timer slack), and most of it.
    assert prof["kernel_sum_ms"] <= r["t_ref_ms"] * 1.10 + 0.005
    assert prof["kernel_sum_ms"] >= 0.5 * r["t_ref_ms"]


@pytest.mark.gpu
def test_profile_on_the_ops_with_floors(timed):
    p, r = timed
    result = assess_task(p, None, per_op=True, t_ref_ms=r["t_ref_ms"], measured=None,
                         counts=count_task(p, ops=True), profile=r["kernel_profile"], l2_tbps=None).to_dict()
    summary = result["kernel_profile"]
    assert summary["matched_ops"] == summary["profiled_ops"] == summary["counted_ops"]
    assert summary["breaches"]["all_roofs"] == []
    for o in result["ops"]:
        if o["flops"] or o["simt_flops"]:
            assert o["kernel_ms"] and o["kernel_ms"] > 0
            floors = [f for f in o["kernel_floors_ms"].values() if f is not None]
            assert floors and o["kernel_ms"] >= min(floors)
