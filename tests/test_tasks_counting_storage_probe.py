"""The storage probe (``counting._StorageKey.alias``) is skipped for the fake mode's own fakes
without a constant, because the mode puts their views on their own storage: that is checked here
for the kinds of tensor a model's state and inputs are, so that a torch whose fake mode did
otherwise fails this test rather than miscount. Fakes the mode does not own (deepcopy) and
constants are still probed."""
from __future__ import annotations

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")

from roofline_ext.tasks.counting import _StorageKey  # noqa: E402

aten = torch.ops.aten


@pytest.fixture()
def fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_fallback_kernels=False, allow_non_fake_inputs=True)
    with torch.no_grad(), mode:
        yield mode


def _storage(t) -> int:
    return t.untyped_storage()._cdata


@pytest.mark.parametrize("make", [
    lambda: torch.empty(4, 5),
    lambda: torch.nn.Parameter(torch.empty(4, 5)),
    lambda: torch.nn.Linear(5, 3).weight,
    lambda: torch.nn.BatchNorm2d(3).running_var,
    lambda: torch.empty(4, 6)[:, 1:3],
    lambda: torch.empty(3, 4).t(),
    lambda: torch.empty(2, 1, 4).expand(2, 3, 4),
    lambda: torch.empty(3, dtype=torch.int64),
    lambda: torch.empty(0),
    lambda: torch.randn(8, 8).half(),
])
def test_views_of_own_fakes_share_their_storage(fake_mode, make):
    t = make()
    assert type(t).__name__ == "FakeTensor" and t.fake_mode is fake_mode and t.constant is None
    for _ in range(2):  # a cache miss, then a hit
        assert _storage(aten.alias.default(t)) == _storage(t)
    key = _StorageKey(fake_mode)
    key.alias(t)
    assert key.aliases == {} and key(aten.alias.default(t)) == key(t)


def test_deepcopied_and_constant_fakes_are_still_probed(fake_mode):
    p = torch.nn.Parameter(torch.empty(4, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deepcopy reads the fake's data pointer, which torch warns about
        q = copy.deepcopy(p)  # a fake this mode does not own: its views are on another storage
    assert q.fake_mode is not fake_mode
    const = torch.tensor(0, dtype=torch.long)  # a small literal: a fake that carries a constant
    key = _StorageKey(fake_mode)
    key.alias(q)
    key.alias(const)
    assert key(aten.alias.default(q)) == key(q)  # filed under q's own storage
    assert len(key.aliases) >= 1
