"""The runner's timing worker on a real GPU (marked ``gpu``: skipped without one, failed with
``--require-gpu``): reused across tasks without spurious replacements, a CUDA error that poisons
the context costs its task only, and inputs are made on the GPU, the same for reference and
candidate."""
from __future__ import annotations

import json
import textwrap

import pytest

from roofline_ext.cli import main

pytestmark = pytest.mark.gpu

TINY = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x + 1

class ModelNew(nn.Module):
    def forward(self, x):
        return x + 1.0

def get_inputs():
    return [torch.randn({n})]

def get_init_inputs():
    return []
"""

POISON = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        # An out-of-bounds gather: a device-side assert, which leaves the CUDA context unusable.
        return x[torch.full((4,), 1 << 30, device=x.device, dtype=torch.long)]

def get_inputs():
    return [torch.randn(16)]

def get_init_inputs():
    return []
"""


def _folder(tmp_path, names):
    folder = tmp_path / "tasks"
    folder.mkdir()
    for i, (name, body) in enumerate(names):
        (folder / f"{i}_{name}.py").write_text(textwrap.dedent(body))
    return folder


def _run(capsys, folder, tmp_path, *extra):
    out = tmp_path / "out.json"
    rc = main(["analyze", str(folder), "--time", "--trials", "20", "--json", str(out), "--no-progress", *extra])
    err = capsys.readouterr().err
    # On the H200 (2026-12-02) the poison test once found no JSON at all, and the command's own
    # words had been swallowed here: say them.
    assert out.exists(), f"exit {rc}, no {out.name} written; stderr ends: {err[-3000:]}"
    return rc, {t["task"]: t for t in json.loads(out.read_text())["tasks"]}


def test_timing_worker_is_reused_across_tasks(tmp_path, capsys):
    folder = _folder(tmp_path, [(f"tiny{n}", TINY.replace("{n}", str(n))) for n in (1024, 4096, 1 << 20)])
    rc, by = _run(capsys, folder, tmp_path)
    assert rc == 0
    for t in by.values():
        assert t["status"] == "ok" and t["t_ref_ms"] > 0, t
        assert "worker_replaced" not in t, t["worker_replaced"]  # nothing changed: one worker for all
        assert t["timing"]["inputs"] == "gpu"
        (c,) = t["candidates"]
        assert c["correct"] and c["correctness"]["passed"] == 5 and "worker_replaced" not in c


def test_a_cuda_error_costs_its_task_only(tmp_path, capsys):
    folder = _folder(tmp_path, [("before", TINY.replace("{n}", "1024")), ("poison", POISON),
                                ("after", TINY.replace("{n}", "1024"))])
    rc, by = _run(capsys, folder, tmp_path)
    assert rc == 1
    assert by["1_poison"]["status"] == "error"
    assert by["0_before"]["status"] == by["2_after"]["status"] == "ok"
    assert by["2_after"]["candidates"][0]["correct"] is True
