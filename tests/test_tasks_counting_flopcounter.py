"""``flops_flopcounter`` is what ``torch.utils.flop_counter.FlopCounterMode`` counts, although the
op counter now counts it itself (one dispatch mode fewer per op, tasks/opcounter.py): each model
here is run under a real FlopCounterMode (same registry, fake tensors, no_grad, mkldnn off, as
counting runs) and the two figures must agree."""
from __future__ import annotations

import textwrap

import pytest
import torch

from roofline_ext.tasks.counting import count_task
from roofline_ext.tasks.formulas import flopcounter_formulas

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"

MODELS = {
    "linear_gelu": ("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(64, 32)
            def forward(self, x):
                return F.gelu(self.fc(x)) @ self.fc.weight
        """, "[torch.randn(8, 64)]"),
    "conv_stack": ("""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = nn.Conv2d(3, 8, 3, padding=1)
                self.c2 = nn.ConvTranspose2d(8, 4, 2, stride=2)
                self.c3 = nn.Conv1d(4, 4, 3)
                self.bn = nn.BatchNorm2d(8)
            def forward(self, x):
                y = self.c2(torch.relu(self.bn(self.c1(x))))
                return self.c3(y.flatten(2)[:, :, :20]).sum()
        """, "[torch.randn(2, 3, 16, 16)]"),
    "attention_bmm": ("""
        class Model(nn.Module):
            def forward(self, q, k, v):
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                s = torch.softmax(torch.bmm(q[0], k[0].transpose(1, 2)), -1)
                return a.sum() + torch.baddbmm(s, s, s).sum() + torch.addmm(v[0, 0], q[0, 0], k[0, 0].t()).sum()
        """, "[torch.randn(2, 4, 16, 16), torch.randn(2, 4, 16, 16), torch.randn(2, 4, 16, 16)]"),
    "matmul_in_inference_mode": ("""
        class Model(nn.Module):
            @torch.inference_mode()
            def forward(self, a, b):
                return torch.matmul(a, b) + torch.einsum("ij,jk->ik", a, b)
        """, "[torch.randn(32, 48), torch.randn(48, 16)]"),
}


def _flopcounter_of(path) -> int:
    """What a real FlopCounterMode counts for the task's forward pass, run the way counting runs it."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    from roofline_ext.tasks.loading import load_task

    task = load_task(path)
    mkldnn_was = torch.backends.mkldnn.enabled
    try:
        torch.backends.mkldnn.enabled = False  # type: ignore[assignment]
        with FakeTensorMode(allow_fallback_kernels=False, allow_non_fake_inputs=True), torch.no_grad():
            model = task.build(task.init_inputs()).eval()
            inputs = task.inputs()
            with FlopCounterMode(display=False, custom_mapping=flopcounter_formulas()) as counter:
                model(*inputs)
    finally:
        torch.backends.mkldnn.enabled = mkldnn_was
        task.unload()
    return counter.get_total_flops()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_flops_flopcounter_is_what_flopcountermode_counts(tmp_path, name):
    body, inputs = MODELS[name]
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(body) + f"\n\ndef get_inputs():\n    return {inputs}\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    expected = _flopcounter_of(path)
    assert expected > 0  # the model has work FlopCounterMode counts: the comparison means something
    assert count_task(path).flops_flopcounter == expected
    assert count_task(path, ops=True).flops_flopcounter == expected
