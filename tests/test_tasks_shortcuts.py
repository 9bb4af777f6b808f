"""The counting shortcuts (tasks/shortcuts.py) return exactly what the fake mode returns, or decline."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from roofline_ext.tasks.shortcuts import make_shortcuts  # noqa: E402

aten = torch.ops.aten


def _meta(t):
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, str(t.device), t.requires_grad,
            type(t).__name__)


@pytest.fixture()
def fake_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_fallback_kernels=False, allow_non_fake_inputs=True)
    with torch.no_grad(), mode:
        yield mode


def _bn_args(x, channels, dtype=torch.float32, affine=True):
    stats = [torch.empty(channels, dtype=dtype) for _ in range(4)]
    if not affine:
        stats[0] = stats[1] = None
    return (x, *stats, 0.1, 1e-5)


SHAPES = [(8, 16), (8, 16, 5), (2, 3, 4, 5), (1, 3, 1, 1), (4, 1, 7, 1), (2, 6, 1, 3, 3), (1, 1, 1, 1), (3, 5, 0, 2)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_shortcut_is_the_fake_result(fake_mode, shape, dtype, affine):
    op = aten._native_batch_norm_legit_no_training.default
    shortcut = make_shortcuts()[op]
    args = _bn_args(torch.empty(shape, dtype=dtype), shape[1], affine=affine)
    got = shortcut(args, {})
    want = op(*args)
    assert got is not None
    assert [_meta(t) for t in got] == [_meta(t) for t in want]
    assert all(g.untyped_storage()._cdata != args[0].untyped_storage()._cdata for g in got)


def test_batch_norm_shortcut_on_a_contiguous_slice(fake_mode):
    op = aten._native_batch_norm_legit_no_training.default
    args = _bn_args(torch.empty(10, 3, 4)[2:4], 3)  # contiguous, at an offset in its storage
    got = make_shortcuts()[op](args, {})
    assert got is not None and [_meta(t) for t in got] == [_meta(t) for t in op(*args)]


@pytest.mark.parametrize("make", [
    lambda: torch.empty(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),  # not contiguous
    lambda: torch.empty(3, 2, 4).transpose(0, 1),
    lambda: torch.empty(2, 3, 8)[..., ::2],
    lambda: torch.empty(2, 1, 4).expand(2, 3, 4),  # a broadcast view: stride 0
    lambda: torch.empty(2, 3, 4, dtype=torch.int64),
    lambda: torch.empty(3),  # one dimension
])
def test_batch_norm_shortcut_declines_other_layouts(fake_mode, make):
    x = make()
    shortcut = make_shortcuts()[aten._native_batch_norm_legit_no_training.default]
    channels = x.shape[1] if x.dim() > 1 else 3
    assert shortcut(_bn_args(x, channels), {}) is None


def test_batch_norm_shortcut_declines_odd_arguments(fake_mode):
    shortcut = make_shortcuts()[aten._native_batch_norm_legit_no_training.default]
    x = torch.empty(2, 3, 4)
    args = list(_bn_args(x, 3))
    assert shortcut(tuple(args), {"eps": 1e-5}) is None
    assert shortcut(tuple(args[:-1]), {}) is None
    for i in (3, 4):  # no running statistics: the op itself says why
        missing = list(args)
        missing[i] = None
        assert shortcut(tuple(missing), {}) is None
    wrong = list(args)
    wrong[1] = torch.empty(4)  # a weight for another number of channels
    assert shortcut(tuple(wrong), {}) is None


def test_batch_norm_shortcut_declines_real_tensors():
    shortcut = make_shortcuts()[aten._native_batch_norm_legit_no_training.default]
    assert shortcut(_bn_args(torch.zeros(2, 3, 4), 3), {}) is None


def test_uniform_shortcut_returns_the_tensor(fake_mode):
    shortcut = make_shortcuts()[aten.uniform_.default]
    w = torch.empty(4, 5)
    assert shortcut((w, -0.5, 0.5), {}) is w
    assert aten.uniform_.default(w, -0.5, 0.5) is w  # what the fake mode returns too
    assert shortcut((torch.empty(3, dtype=torch.int64),), {}) is None
    assert shortcut((torch.zeros(3),), {}) is not None


def test_uniform_shortcut_declines_real_and_constant_tensors(fake_mode):
    shortcut = make_shortcuts()[aten.uniform_.default]
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        real = torch.zeros(3)
    constant = torch.empty(3)
    constant.constant = real  # a fake tensor that carries values (small literals may): they would change
    assert shortcut((constant,), {}) is None
    assert shortcut((real,), {}) is None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("make", [lambda d: torch.empty(4, 5, dtype=d), lambda d: torch.empty(4, 5, dtype=d)[1],
                                  lambda d: torch.empty(3, 4, dtype=d).t(), lambda d: torch.empty(0, dtype=d)])
def test_in_place_init_shortcuts_return_what_the_fake_mode_returns(fake_mode, dtype, make):
    shortcuts = make_shortcuts()
    for op, args, kwargs in ((aten.zero_.default, (), {}), (aten.fill_.Scalar, (1,), {}), (aten.fill_.Scalar, (0.5,), {}),
                             (aten.normal_.default, (0.0, 0.02), {}), (aten.normal_.default, (), {"std": 2.0})):
        t = make(dtype)
        want = op(t, *args, **kwargs)
        got = shortcuts[op]((t, *args), kwargs)
        assert got is want is t, op  # in place: the tensor itself
        assert _meta(got) == _meta(want)


def test_in_place_init_shortcuts_decline_what_might_fail_or_change_values(fake_mode):
    shortcuts = make_shortcuts()
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        real = torch.zeros(3)
    w = torch.empty(3)
    with pytest.raises(RuntimeError, match="std >= 0"):  # the op's own check, which the shortcut leaves to it
        aten.normal_.default(w, 0.0, -1.0)
    assert shortcuts[aten.normal_.default]((w, 0.0, -1.0), {}) is None
    assert shortcuts[aten.normal_.default]((w, 0.0, float("nan")), {}) is None
    assert shortcuts[aten.normal_.default]((torch.empty(3, dtype=torch.int64),), {}) is None
    assert shortcuts[aten.fill_.Scalar]((torch.empty(3, dtype=torch.int64), 1), {}) is None  # integers: as usual
    assert shortcuts[aten.fill_.Scalar]((w, 1j), {}) is None
    for op, args in ((aten.zero_.default, (real,)), (aten.fill_.Scalar, (real, 1.0)), (aten.normal_.default, (real,))):
        assert shortcuts[op](args, {}) is None  # a real tensor has values to change


def _fake_mode_shortcuts(mode):
    return make_shortcuts(mode)


@pytest.mark.parametrize("size", [(4, 5), (3,), (), (0, 2), (2, 3, 4, 5), (1, 1, 1)])
@pytest.mark.parametrize("kwargs", [{}, {"dtype": torch.float16}, {"dtype": torch.int64}, {"dtype": torch.bool},
                                    {"device": torch.device("cpu")}, {"layout": torch.strided, "pin_memory": False},
                                    {"memory_format": torch.contiguous_format}, {"dtype": torch.bfloat16}])
def test_empty_shortcut_is_the_fake_result(fake_mode, size, kwargs):
    op = aten.empty.memory_format
    got = _fake_mode_shortcuts(fake_mode)[op]((list(size),), dict(kwargs))
    want = op(list(size), **kwargs)
    assert got is not None
    assert _meta(got) == _meta(want) and got.fake_mode is want.fake_mode is fake_mode
    assert got.untyped_storage().nbytes() == want.untyped_storage().nbytes()
    assert got.constant is None and want.constant is None
    assert got.untyped_storage()._cdata != want.untyped_storage()._cdata  # a storage of its own


def test_empty_shortcut_declines_other_requests(fake_mode):
    op = aten.empty.memory_format
    shortcut = _fake_mode_shortcuts(fake_mode)[op]
    assert shortcut(([2, 3],), {"memory_format": torch.channels_last}) is None
    assert shortcut(([2, 3],), {"device": torch.device("meta")}) is None
    assert shortcut(([2, 3],), {"pin_memory": True}) is None
    assert shortcut(([2, 3],), {"dtype": torch.complex64}) is None
    assert shortcut(([2, -1],), {}) is None
    assert shortcut(([2, 3],), {"names": None}) is None
    assert make_shortcuts()[op](([2, 3],), {}) is None  # no fake mode given
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():  # another fake mode, or none, active: declined
        assert shortcut(([2, 3],), {}) is None


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_batch_norm_shortcut_with_the_fake_mode_is_the_fake_result(fake_mode, shape, dtype):
    op = aten._native_batch_norm_legit_no_training.default
    args = _bn_args(torch.empty(shape, dtype=dtype), shape[1])
    got = _fake_mode_shortcuts(fake_mode)[op](args, {})
    want = op(*args)
    assert got is not None
    assert [_meta(t) for t in got] == [_meta(t) for t in want]
    assert all(g.fake_mode is fake_mode and g.constant is None for g in got)
    assert len({g.untyped_storage()._cdata for g in got} | {args[0].untyped_storage()._cdata}) == 4


@pytest.mark.parametrize("op", [aten.zeros.default, aten.ones.default, aten.rand.default, aten.randn.default])
@pytest.mark.parametrize("size", [(4, 5), (3,), (), (0, 2), (2, 3, 4, 5)])
@pytest.mark.parametrize("kwargs", [{}, {"dtype": torch.float16}, {"dtype": torch.int64}, {"dtype": torch.bool},
                                    {"device": torch.device("cpu"), "pin_memory": False}, {"layout": torch.strided},
                                    {"dtype": torch.bfloat16}, {"dtype": torch.float64}])
def test_zeros_ones_and_random_shortcuts_are_the_fake_result(fake_mode, op, size, kwargs):
    if op in (aten.rand.default, aten.randn.default) and kwargs.get("dtype") in (torch.int64, torch.bool):
        assert _fake_mode_shortcuts(fake_mode)[op]((list(size),), dict(kwargs)) is None  # the op's own check
        return
    rng = torch.random.get_rng_state()
    got = _fake_mode_shortcuts(fake_mode)[op]((list(size),), dict(kwargs))
    want = op(list(size), **kwargs)
    assert got is not None
    assert _meta(got) == _meta(want) and got.fake_mode is want.fake_mode is fake_mode
    assert got.untyped_storage().nbytes() == want.untyped_storage().nbytes()
    assert got.constant is None and want.constant is None  # the fake mode keeps no values for them either
    assert got.untyped_storage()._cdata != want.untyped_storage()._cdata  # a storage of its own
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        assert torch.equal(torch.random.get_rng_state(), rng)  # nothing drawn, by either


@pytest.mark.parametrize("op", [aten.zeros.default, aten.ones.default, aten.rand.default, aten.randn.default])
def test_zeros_ones_and_random_shortcuts_decline_other_requests(fake_mode, op):
    shortcut = _fake_mode_shortcuts(fake_mode)[op]
    assert shortcut(([2, 3],), {"device": torch.device("meta")}) is None
    assert shortcut(([2, 3],), {"dtype": torch.complex64}) is None
    assert shortcut(([2, -1],), {}) is None
    assert make_shortcuts()[op](([2, 3],), {}) is None  # no fake mode given


@pytest.mark.parametrize("make", [lambda: torch.empty(4, 5), lambda: torch.empty(4, 5)[1:3], lambda: torch.empty(3, 4).t(),
                                  lambda: torch.empty(2, 1, 4).expand(2, 3, 4), lambda: torch.empty(0),
                                  lambda: torch.empty((), dtype=torch.int64), lambda: torch.empty(3, dtype=torch.float16)])
def test_detach_shortcut_is_the_fake_result(fake_mode, make):
    x = make()
    got = _fake_mode_shortcuts(fake_mode)[aten.detach.default]((x,), {})
    want = aten.detach.default(x)
    assert got is not None and got is not x
    assert _meta(got) == _meta(want) and got.fake_mode is want.fake_mode is fake_mode
    assert got._is_view() == want._is_view() and got.constant is None
    # the input's storage, and its version counter (an in-place op on one is seen by the others)
    assert got.untyped_storage()._cdata == want.untyped_storage()._cdata == x.untyped_storage()._cdata
    x.add_(1)
    assert got._version == want._version == x._version


def test_detach_shortcut_declines_real_constant_and_foreign_tensors(fake_mode):
    shortcut = _fake_mode_shortcuts(fake_mode)[aten.detach.default]
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        real = torch.zeros(3)
        other = FakeTensorMode().from_tensor(real)  # another fake mode's tensor
    constant = torch.empty(3)
    constant.constant = real  # a fake tensor that carries values: the fake mode propagates them
    assert shortcut((real,), {}) is None
    assert shortcut((constant,), {}) is None
    assert shortcut((other,), {}) is None
    assert shortcut((torch.empty(3),), {"extra": 1}) is None
    x = torch.empty(3)
    assert make_shortcuts()[aten.detach.default]((x,), {}) is None  # no fake mode given
    with _disable_current_modes():  # the fake mode not active: declined
        assert shortcut((x,), {}) is None
