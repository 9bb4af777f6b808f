"""Where a timing job draws a model's initial weights (tasks/building.py, ``build_where``).

No GPU here: the meta device stands in for the GPU (a device that is not the CPU, whose factory
calls make tensors without values), which is enough to see which way the constructor ran."""
from __future__ import annotations

import textwrap

import pytest
import torch

from roofline_ext.tasks import building
from roofline_ext.tasks.loading import load_task

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)
        {extra}

    def forward(self, x):
        return self.lin(x)


def get_inputs():
    return [torch.randn(2, 8)]


def get_init_inputs():
    return [8]
'''


def _task(tmp_path, extra: str = "pass"):
    path = tmp_path / "t.py"
    path.write_text(textwrap.dedent(TASK).replace("{extra}", extra))
    return load_task(path)


def test_a_reference_only_build_draws_the_weights_on_the_device(tmp_path, monkeypatch):
    task = _task(tmp_path)
    seen = []
    real = torch.nn.Linear.reset_parameters
    monkeypatch.setattr(torch.nn.Linear, "reset_parameters", lambda self: (seen.append(self.weight.device.type), real(self))[1])
    model, where = building.build_where(task, task.model_cls, [8], torch.device("meta"), None, 0, "Model", "gpu")
    assert where == "gpu" and seen == ["meta"]  # initialised where it will run, not on the CPU first
    assert model.lin.weight.device.type == "meta" and not model.training


def test_a_constructor_that_fails_on_the_device_is_built_on_the_cpu(tmp_path):
    task = _task(tmp_path, extra="self.lin.weight.detach().numpy()  # needs values on the CPU")
    model, where = building.build_where(task, task.model_cls, [8], torch.device("meta"), None, 0, "Model", "gpu")
    assert where == "cpu" and model.lin.weight.device.type == "meta"  # built on the CPU, then moved


def test_a_judged_build_stays_on_the_cpu_and_is_the_same_for_the_same_seed(tmp_path):
    task = _task(tmp_path)
    a = building.build(task, task.model_cls, [8], torch.device("cpu"), None, 3, "Model")
    b, where = building.build_where(task, task.model_cls, [8], torch.device("cpu"), None, 3, "Model", "cpu")
    assert where == "cpu" and torch.equal(a.lin.weight, b.lin.weight)


@pytest.mark.parametrize("inputs, weights", [("auto", "gpu"), ("cpu", "cpu")])
def test_weights_follow_the_inputs_option(inputs, weights):
    assert building.weights_for(inputs) == weights
