"""Every KernelBench L1-L3 task counts (250 of them), and the issue-14 rules show on the tasks that
motivated them. Skipped where KernelBench is not checked out next to the repository (the project
does not depend on it): ../shared/kernelbench/level{1,2,3} from the repository root."""
from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path

import pytest

from roofline_ext.tasks.counting import count_task
from roofline_ext.tasks.loading import TaskError, find_task_files

KERNELBENCH = (Path(__file__).resolve().parents[1] / ".." / "shared" / "kernelbench").resolve()
LEVELS = [KERNELBENCH / f"level{n}" for n in (1, 2, 3)]

# slow: every test reads the module fixture that counts all 250 tasks in this process (36 s on 2 cores).
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not all(d.is_dir() for d in LEVELS),
                                 reason=f"KernelBench is not at {KERNELBENCH} (level1-3)")]


def _count(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return count_task(path)


@pytest.fixture(scope="module")
def counts() -> dict[str, object]:
    out = {}
    for level in LEVELS:
        for p in find_task_files(level):
            try:
                out[f"{level.name}/{p.stem}"] = _count(p)
            except TaskError as exc:
                out[f"{level.name}/{p.stem}"] = exc
    return out


def test_all_250_tasks_count(counts):
    assert len(counts) == 250
    failed = {k: str(v) for k, v in counts.items() if isinstance(v, TaskError)}
    if importlib.util.find_spec("einops") is None:  # L3 48/49 import it: they say how to install it
        assert all("pip install einops" in v for v in failed.values()), failed
        failed = {}
    assert failed == {}


def test_convolutions_count_no_padding_taps(counts):
    alexnet = counts["level3/5_AlexNet"]
    assert 0.90 < alexnet.flops / alexnet.flops_flopcounter < 0.93  # about 8% of its taps hit padding


@pytest.mark.parametrize("name", ["43_MinGPTCausalAttention", "44_MiniGPTBlock", "50_ReLUSelfAttention"])
def test_hand_written_causal_attention_is_recognised(counts, name):
    c = counts[f"level3/{name}"]
    assert c.flops < c.flops_flopcounter
    assert any("lower-triangular mask" in n for n in c.notes)


@pytest.mark.parametrize("name", ["29_SwinMLP", "30_SwinTransformerV2"])
def test_constructors_reading_values_are_built_for_real(counts, name):
    c = counts[f"level3/{name}"]
    assert not isinstance(c, TaskError) and c.flops > 0
    assert any("built for real" in n for n in c.notes)
