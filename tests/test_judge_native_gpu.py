"""The judge's GPU passes (csrc/judge_stats.cu) against the torch path they replace: the same
sums (to float64 rounding), the same counts and extremes, the same verdicts; a checksum that sees
one flipped bit. GPU only: elsewhere the torch path is the judge (tests/test_judge_compare.py)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from roofline_ext.judge import compare as cmp  # noqa: E402
from roofline_ext.judge import guard  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def native():
    from roofline_ext.device.native import cuda_function

    fn = cuda_function("judge_compare_stats")
    if fn is None:
        pytest.skip("the native core was built without its CUDA part")
    return fn


def _torch_sums(a, b, tol):
    s = cmp._Sums()
    fa, fb = a.reshape(-1), b.reshape(-1)
    for start in range(0, fa.numel(), cmp._CHUNK):
        cmp._accumulate_exact(s, fa[start:start + cmp._CHUNK].double(), fb[start:start + cmp._CHUNK].double(), tol)
    return s


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.float64, 1e-4), (torch.float16, 1e-2),
                                       (torch.bfloat16, 1e-2)])
@pytest.mark.parametrize("n", [1, 1000, (1 << 25) + 17])
def test_the_gpu_sums_are_the_torch_sums(native, dtype, tol, n):
    g = torch.Generator(device="cuda").manual_seed(n)
    a = torch.randn(n, device="cuda", generator=g).to(dtype)
    b = (a.double() + 3 * tol * torch.randn(n, device="cuda", generator=g, dtype=torch.float64)).to(dtype)
    got, want = cmp._native_sums(a, b, tol), _torch_sums(a, b, tol)
    assert got is not None
    for k in ("sa", "sb", "saa", "sbb", "sab", "sdd"):
        assert getattr(got, k) == pytest.approx(getattr(want, k), rel=1e-9, abs=1e-9), k
    assert (got.n, got.bad, got.max_abs, got.b_min, got.b_max) == (want.n, want.bad, want.max_abs, want.b_min,
                                                                   want.b_max)
    assert n < 1000 or got.bad > 0  # the tolerance test ran: 3 tol of noise puts some elements beyond it


def test_the_verdicts_are_the_torch_paths(native, monkeypatch):
    x = torch.randn(4096, 4096, device="cuda").softmax(-1)
    cases = {"honest": x * (1 + 1e-6), "zeros": torch.zeros_like(x), "shuffled": x[:, torch.randperm(4096)],
             "off": x * 1.01, "transposed-equal": x.t().contiguous().t()}
    native_verdicts = {k: cmp.compare_outputs(x, v, 1e-4) for k, v in cases.items()}
    monkeypatch.setattr(cmp, "_native_sums", lambda a, b, tol: None)
    torch_verdicts = {k: cmp.compare_outputs(x, v, 1e-4) for k, v in cases.items()}
    assert {k: (v.ok, v.kind) for k, v in native_verdicts.items()} == \
        {k: (v.ok, v.kind) for k, v in torch_verdicts.items()}
    assert native_verdicts["honest"].ok and native_verdicts["zeros"].kind == "degenerate"


def test_nan_sends_the_comparison_to_the_torch_path_that_says_where(native):
    a = torch.randn(10_000, device="cuda")
    b = a.clone()
    b[123] = float("nan")
    assert cmp._native_sums(a, b, 1e-4) is None
    c = cmp.compare_outputs(a, b, 1e-4)
    assert not c.ok and c.kind == "nonfinite"


@pytest.mark.parametrize("n", [1, 3, 4097, 1 << 24])
def test_the_checksum_sees_one_flipped_bit_and_a_moved_word(native, n):
    t = torch.randint(0, 2**15, (n,), device="cuda", dtype=torch.int16)  # 2n bytes: a tail when n is odd
    d0 = guard.digest(t)
    assert d0[0] == "checksum" and guard.digest(t) == d0 and guard.digest(t.clone()) == d0
    u = t.clone()
    u.view(torch.uint8)[-1] ^= 1  # the last byte: the tail word when there is one
    assert guard.digest(u) != d0
    if n > 2:
        w = t.clone()
        w[0], w[1] = t[1].item(), t[0].item()
        assert (t[0] == t[1]).item() or guard.digest(w) != d0
