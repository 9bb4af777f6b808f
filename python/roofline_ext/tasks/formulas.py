"""FLOP formulas: what a tensor-core op must compute, from shapes (and, for attention, the pairs kept).

2 FLOPs per multiply-add throughout. ``FlopCounterMode`` has formulas for matmuls, convolutions and
attention; this module adds the ones it lacks (``mv``, ``dot``, ``addbmm``, the CPU flash-attention
kernel that fake CPU tensors dispatch to) and replaces two of its conventions that count work no
kernel has to do: convolution taps that land on implicit zero padding, and (for transposed
convolutions) contributions to output positions that the padding crops away. See docs/counting.md.
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["conv_flops", "tap_pairs", "kept_lower", "kept_upper", "causal_pairs", "attention_flops",
           "flop_formulas", "flopcounter_formulas", "CONV_OPS"]

# aten.convolution's positional arguments; aten._convolution starts with the same nine.
_CONV_ARGS = ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding",
              "groups")
CONV_OPS = ("convolution", "_convolution")


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def tap_pairs(n_iter: int, n_bound: int, taps: int, stride: int, padding: int, dilation: int) -> int:
    """Pairs (position x, tap j), x in [0, n_iter), j in [0, taps), with 0 <= x*stride + j*dilation -
    padding < n_bound: the (output, input) pairs along one spatial dimension that touch a real element.

    A convolution iterates output positions and bounds on the input length; a transposed convolution
    iterates input positions and bounds on the (cropped) output length: the same count. O(taps)."""
    total = 0
    for j in range(taps):
        off = j * dilation - padding
        lo = max(0, _ceil_div(-off, stride))
        hi = min(n_iter - 1, (n_bound - 1 - off) // stride)
        total += max(0, hi - lo + 1)
    return total


def _per_dim(value, n: int) -> list[int]:
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value] if len(value) == n else [int(value[0])] * n
    return [int(value)] * n


def conv_flops(args: tuple, kwargs: dict, out) -> int:
    """Convolution FLOPs over real (input element, kernel tap) pairs only; separable per spatial dim."""
    a = dict(zip(_CONV_ARGS, args))
    a.update({k: v for k, v in kwargs.items() if k in _CONV_ARGS})
    x, w = a["input"], a["weight"]
    n = w.dim() - 2
    transposed = bool(a.get("transposed", False))
    stride, padding, dilation = (_per_dim(a.get(key, d), n) for key, d in
                                 (("stride", 1), ("padding", 0), ("dilation", 1)))
    in_sizes, out_sizes, taps = x.shape[-n:], out.shape[-n:], w.shape[2:]
    pairs = 1
    for i in range(n):
        it, bound = (in_sizes[i], out_sizes[i]) if transposed else (out_sizes[i], in_sizes[i])
        pairs *= tap_pairs(int(it), int(bound), int(taps[i]), stride[i], padding[i], dilation[i])
    batch = _prod(x.shape[:-n - 1])  # unbatched input: no leading dims
    # w is (Cout, Cin/groups, k...) or, transposed, (Cin, Cout/groups, k...): both channel products
    return 2 * batch * int(w.shape[0]) * int(w.shape[1]) * pairs


def kept_lower(rows: int, cols: int, diag: int) -> int:
    """Entries (i, j) of a rows x cols matrix with j - i <= diag: what ``tril(·, diag)`` keeps."""
    # row i keeps clamp(i + diag + 1, 0, cols): none before i0, all from i1, a ramp between
    i0 = min(max(0, -diag), rows)
    i1 = min(max(0, cols - diag - 1), rows)
    ramp = (i1 - i0) * (i0 + i1 - 1) // 2 + (i1 - i0) * (diag + 1)
    return ramp + (rows - i1) * cols


def kept_upper(rows: int, cols: int, diag: int) -> int:
    """Entries with j - i >= diag (what ``triu(·, diag)`` keeps): the transpose of a lower count."""
    return kept_lower(cols, rows, -diag)


def causal_pairs(lq: int, lk: int) -> int:
    """(query, key) pairs a causal mask keeps: torch's mask is tril(ones(Lq, Lk)), top-left aligned."""
    return kept_lower(lq, lk, 0)


def attention_flops(q, k, v, pairs: int) -> int:
    """softmax(Q Kᵀ) V over ``pairs`` (query, key) pairs per (batch, head): Q Kᵀ is 2·E and P V 2·Ev
    per pair. Query heads set the count (grouped-query attention broadcasts K/V heads)."""
    return 2 * _prod(q.shape[:-2]) * pairs * (int(q.shape[-1]) + int(v.shape[-1]))


# --- formulas FlopCounterMode lacks (shape functions, FlopCounterMode's calling convention) --------

def _mv_flops(a_shape, x_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * _prod(a_shape)  # (m, n) @ (n,): one multiply-add per matrix element


def _addmv_flops(self_shape, a_shape, x_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * _prod(a_shape)


def _dot_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * _prod(a_shape)


def _addbmm_flops(self_shape, b1_shape, b2_shape, *args, out_shape=None, **kwargs) -> int:
    b, m, k = b1_shape
    return 2 * b * m * int(b2_shape[-1]) * k


def _full_attention_flops(q_shape, k_shape, v_shape, *args, out_shape=None, **kwargs) -> int:
    # FlopCounterMode's convention for the CUDA kernels: the full square, causal or not
    batch = _prod(q_shape[:-2])
    return 2 * batch * int(q_shape[-2]) * int(k_shape[-2]) * (int(q_shape[-1]) + int(v_shape[-1]))


def _cpu_flash():
    import torch

    return getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def flopcounter_formulas() -> dict:
    """``custom_mapping`` for the FlopCounterMode that gives ``flops_flopcounter``: only the CPU flash
    kernel (fake CPU tensors dispatch SDPA to it), counted as FlopCounterMode counts the CUDA ones."""
    flash = _cpu_flash()
    return {flash: _full_attention_flops} if flash is not None else {}


def flop_formulas() -> dict[Any, Callable[[tuple, dict, Any], int]]:
    """packet -> f(args, kwargs, out) for every op counted as tensor-core FLOPs: FlopCounterMode's
    registry, the ops it lacks, and real-pair convolutions. Attention is counted by the op counter,
    which knows the mask (see masks.py)."""
    import torch
    from torch.utils._pytree import tree_map
    from torch.utils.flop_counter import flop_registry, get_shape

    def shapes(f):
        def count(args, kwargs, out):
            a, kw, o = tree_map(get_shape, (args, kwargs, out))
            return f(*a, out_shape=o, **kw)
        return count

    def registry(f):
        return lambda args, kwargs, out: f(*args, **kwargs, out_val=out)

    aten = torch.ops.aten
    formulas = {packet: registry(f) for packet, f in flop_registry.items()}
    formulas.update({aten.mv: shapes(_mv_flops), aten.addmv: shapes(_addmv_flops), aten.dot: shapes(_dot_flops),
                     aten.vdot: shapes(_dot_flops), aten.addbmm: shapes(_addbmm_flops)})
    for name in CONV_OPS:
        formulas[getattr(aten, name)] = conv_flops
    return formulas
