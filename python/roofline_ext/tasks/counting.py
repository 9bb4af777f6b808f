"""FLOPs and compulsory bytes of a task, counted without running it.

How
---
The model is built and run under ``FakeTensorMode``: every tensor made by ``get_init_inputs()``,
the constructor and ``get_inputs()`` is a *fake* tensor (shape, dtype, strides, no data), and every op
runs only its shape function. A task with 10 GB of inputs counts in milliseconds and a few MB. Fake
tensors live on the CPU device; ops run their CPU dispatch paths (the counts below are
device-independent except where noted). Ops without a fake/meta implementation are *not* run for real
(``allow_fallback_kernels=False``): that would allocate the full tensors; such a task is reported as an
``unsupported-op`` error, as are ops whose output shape depends on data (``nonzero``, ``.item()``).

The forward pass runs under ``torch.no_grad()``, never ``torch.inference_mode()`` (what KernelBench's
harness uses is no_grad). Under inference mode composite ops (``matmul``, ``linear``) reach dispatch
modes undecomposed, which is how FLOPs come to read 0 or matmuls to look like elementwise work; a task
may still use inference mode itself (``@torch.inference_mode()`` on forward), so our op counter
decomposes such ops the way ``FlopCounterMode`` does, and the counts are the same either way.

While counting, and restored afterwards: grad mode is off; mkldnn is off (see ``flops``);
``nn.Module._apply`` is replaced by a version that works on fake parameters (``Module.to/.cuda/.half``
in a task's constructor, and ``--dtype``); and a torch-function mode turns CUDA requests of the task
(``.cuda()``, ``device="cuda"``) into CPU ones, and counts RNN layers from two short runs instead of
stepping through every time step (exactly; see ``_make_function_mode``). Counting is not thread-safe.

What is counted
---------------
``flops``
    What ``torch.utils.flop_counter.FlopCounterMode`` counts: matmuls (mm, bmm, addmm, baddbmm),
    convolutions and transposed convolutions, scaled-dot-product attention; 2 FLOPs per
    multiply-add. These are the ops that run on tensor cores. Added, with the same 2·m·n·k rule, where
    ``FlopCounterMode`` has no formula but the op is a matrix product: ``mv``, ``addmv``, ``dot``,
    ``vdot``, ``addbmm`` and the CPU flash-attention kernel that fake CPU tensors dispatch to (on a GPU,
    ``FlopCounterMode`` counts the CUDA attention kernels with the same formula). Causal attention counts
    only the pairs the mask keeps (``FlopCounterMode`` counts the full square, which is no floor). mkldnn is switched off while counting so that RNNs
    (LSTM) decompose into matmuls that are counted, rather than one opaque mkldnn op counted as 0.
``simt_flops``
    Work that cannot run on tensor cores: pointwise ops, reductions, norms, softmax, pooling, …
    **Approximation: one FLOP per output element per op** (``gelu`` on N elements: N; ``sum`` to a
    scalar: 1; ``softmax``/``layer_norm`` over N elements: N). It is a lower bound (a GELU is really
    ~10 instructions, a reduction over N needs N-1 adds), which is what a floor needs. Views, copies,
    dtype casts, factories/random init and pure data movement (cat, pad, gather, index, …) count 0.
    Attention's internal softmax counts one per score (batch·heads·Lq·Lk; with a causal mask, per
    unmasked score).
``bytes``
    Compulsory traffic: every input tensor, parameter and buffer read once, every output written
    once (``input_bytes + param_bytes + output_bytes``). Tensors that share a storage (views, tied
    weights, one input passed twice) count once, as the part of the storage they cover. Non-tensor
    arguments count 0. Plain tensor attributes of the model (not registered as buffers) and tensors
    from the task's module that the forward pass reads are state too and go into ``param_bytes``. An
    output is counted as written even if it aliases an input (an in-place op still writes it).

dtype
-----
``dtype`` is the floating dtype of the inputs, parameters and buffers (``"torch.float32"``…),
``"mixed"`` when there are several (``dtypes`` lists them), ``None`` when there is none (an
integer-only task). ``compute_dtype`` is the dtype whose compute roof applies: with mixed dtypes the
one with the fastest roof (fp16/bf16 before fp32 before fp64), so that the floor stays a floor.
``count_task(..., dtype="bf16")`` first casts the model (``model.to(dtype)``: floating parameters and
buffers) and the floating inputs, as KernelBench's harness does for its precision option.
"""
from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import UserError
from ..peaks.units import ROOF_ORDER, TASK_DTYPES, task_dtype_name
from .loading import Task, TaskError, load_task

__all__ = ["Counts", "count_task", "parse_dtype", "require_torch", "DTYPE_CHOICES"]

DTYPE_CHOICES = tuple(TASK_DTYPES)

# Ops that move or create data but compute nothing: no SIMT FLOPs. Views are recognised from their
# schema (OpOverload.is_view) and need not be listed; matrix products are counted in `flops` instead.
_NO_ARITHMETIC = frozenset("""
    clone copy copy_ _copy_from _copy_from_and_resize _to_copy to contiguous detach detach_ alias
    lift lift_fresh lift_fresh_copy _unsafe_view view reshape _reshape_alias resize_ resize_as_ set_
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones
    ones_like new_ones full full_like new_full fill fill_ zero_ scalar_tensor arange linspace logspace
    eye rand rand_like randn randn_like randint randint_like randperm normal normal_ uniform_
    bernoulli bernoulli_ exponential_ random_ geometric_ cauchy_ log_normal_ tril_indices triu_indices
    cat stack hstack vstack constant_pad_nd reflection_pad1d reflection_pad2d reflection_pad3d
    replication_pad1d replication_pad2d replication_pad3d repeat repeat_interleave flip roll index
    index_select gather embedding take narrow_copy slice_scatter select_scatter as_strided_scatter
    diagonal_scatter index_put index_put_ split_with_sizes_copy unbind_copy pixel_shuffle
    pixel_unshuffle channel_shuffle native_channel_shuffle im2col _local_scalar_dense item
    sym_size sym_stride sym_numel sym_storage_offset _assert_async _assert_tensor_metadata
    _functional_assert_async _assert_scalar set_grad_enabled record_stream
""".split())

# Attention kernels: (query, key, value) are the first three arguments.
_ATTENTION_NAMES = frozenset({
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
})


@dataclass
class Counts:
    """What one forward pass of a task costs at least. All sizes in FLOPs and bytes."""

    task: str
    path: str
    model: str
    flops: int
    simt_flops: int
    bytes: int
    input_bytes: int
    param_bytes: int
    output_bytes: int
    dtype: str | None
    dtypes: list[str]
    compute_dtype: str | None
    cast: str | None
    inputs: list[str]
    outputs: list[str]
    by_op: dict[str, dict[str, int]]
    seconds: float
    has_model_new: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def arithmetic_intensity(self) -> float | None:
        """All FLOPs (tensor-core and SIMT) per compulsory byte, as ``roofline()`` defines it;
        None when nothing is moved."""
        return (self.flops + self.simt_flops) / self.bytes if self.bytes else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["arithmetic_intensity"] = self.arithmetic_intensity
        return d


def require_torch():
    """``torch``, or a one-line ``UserError`` saying how to install it (counting needs it; the rest of
    the package does not, so it is an optional dependency)."""
    try:
        import torch
    except ImportError as exc:
        raise UserError(
            "counting FLOPs and bytes needs PyTorch, which is not installed: "
            "pip install 'roofline-ext[torch]' (or any torch >= 2.1)"
        ) from exc
    return torch


def parse_dtype(name: str | None):
    """``fp32|fp16|bf16`` (and the torch spellings) → ``torch.dtype``; None stays None."""
    if name is None:
        return None
    import torch

    return getattr(torch, task_dtype_name(str(name)))


# --- storages and bytes --------------------------------------------------------------------------

def _storage_key(t) -> int:
    # The address of the StorageImpl: the same for every view of one storage, fake or real. Valid as
    # an identity only while the tensors are alive, which they are for the whole count.
    return t.untyped_storage()._cdata


def _distinct_bytes(t) -> int:
    """Bytes of the distinct elements ``t`` addresses: broadcast (stride-0) dims count once."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if size == 0:
            return 0
        if stride != 0:
            n *= size
    return n * t.element_size()


def _span(t) -> tuple[int, int]:
    """[first byte, last byte + 1) that ``t`` touches in its storage."""
    if t.numel() == 0:
        return (0, 0)
    lo = t.storage_offset()
    hi = lo + sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if st > 0) + 1
    neg = sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if st < 0)
    item = t.element_size()
    return ((lo + neg) * item, hi * item)


def _storage_bytes(tensors: list) -> int:
    """Bytes of one storage that a group of tensors viewing it covers.

    One tensor: its distinct elements (so ``x[::2]`` is half of ``x``, an expanded row is one row).
    Several: the union of their byte spans, capped by the sum of their distinct bytes and by the
    storage itself (exact for the common cases: the same tensor twice, slices, transposes)."""
    if len(tensors) == 1:
        return _distinct_bytes(tensors[0])
    spans = sorted(_span(t) for t in tensors)
    union, cur_lo, cur_hi = 0, None, None
    for lo, hi in spans:
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None:
                union += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None:
        union += cur_hi - cur_lo
    total = min(union, sum(_distinct_bytes(t) for t in tensors))
    try:
        total = min(total, tensors[0].untyped_storage().nbytes())
    except Exception:  # a storage whose size cannot be read: keep the estimate
        pass
    return total


class _StorageGroups:
    """Tensors grouped by storage, each storage filed under the first category it was seen in."""

    def __init__(self) -> None:
        self.groups: dict[int, list] = {}
        self.category: dict[int, str] = {}

    def add(self, t, category: str) -> None:
        key = _storage_key(t)
        if key not in self.groups:
            self.groups[key] = [t]
            self.category[key] = category
        elif not any(t is u for u in self.groups[key]):
            self.groups[key].append(t)

    def __contains__(self, key: int) -> bool:
        return key in self.groups

    def bytes_by_category(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for key, ts in self.groups.items():
            out[self.category[key]] += _storage_bytes(ts)
        return out


def _describe_tensor(t) -> str:
    return f"{str(t.dtype).replace('torch.', '')}[{', '.join(str(s) for s in t.shape)}]"


# --- FLOP formulas FlopCounterMode lacks (called with shapes, via its custom_mapping) ------------

def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _mv_flops(a_shape, x_shape, *args, out_shape=None, **kwargs) -> int:
    # (m, n) @ (n,): one multiply-add per matrix element
    return 2 * _prod(a_shape)


def _addmv_flops(self_shape, a_shape, x_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * _prod(a_shape)


def _dot_flops(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * _prod(a_shape)


def _addbmm_flops(self_shape, b1_shape, b2_shape, *args, out_shape=None, **kwargs) -> int:
    b, m, k = b1_shape
    n = b2_shape[-1]
    return 2 * b * m * n * k


def _causal_pairs(lq: int, lk: int) -> int:
    """(query, key) pairs a causal mask keeps: torch's mask is tril(ones(Lq, Lk)), top-left aligned."""
    full_rows = min(lq, lk)  # row i keeps i + 1 keys while i < Lk, then all Lk
    return full_rows * (full_rows + 1) // 2 + max(0, lq - lk) * lk


def _attention_flops(q_shape, k_shape, v_shape, *args, out_shape=None, **kwargs) -> int:
    # softmax(Q Kᵀ) V: Q Kᵀ is 2·Lq·Lk·E per (batch, head), P V is 2·Lq·Lk·Ev. Query heads set the
    # count (grouped-query attention broadcasts K/V heads). Leading dims are batch and heads.
    # Causal: only the unmasked pairs need computing, and flash kernels do skip the masked blocks;
    # counting the full square would put the floor above what PyTorch itself reaches (seen on the
    # H200, 2026-11-30: a causal bf16 SDPA ran at 121% of a floor counted in full).
    batch = _prod(q_shape[:-2])
    lq, e = q_shape[-2], q_shape[-1]
    lk, ev = k_shape[-2], v_shape[-1]
    is_causal = bool(args[1]) if len(args) > 1 else bool(kwargs.get("is_causal", False))
    pairs = _causal_pairs(lq, lk) if is_causal else lq * lk
    return 2 * batch * pairs * e + 2 * batch * pairs * ev


def _custom_mapping() -> dict:
    import torch

    aten = torch.ops.aten
    mapping = {
        aten.mv: _mv_flops,
        aten.addmv: _addmv_flops,
        aten.dot: _dot_flops,
        aten.vdot: _dot_flops,
        aten.addbmm: _addbmm_flops,
    }
    # Fake tensors are CPU tensors, and SDPA on the CPU dispatches to this kernel, which
    # FlopCounterMode has no formula for (it would read 0).
    cpu_flash = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if cpu_flash is not None:
        mapping[cpu_flash] = _attention_flops
    return mapping


# --- the dispatch mode that counts SIMT work and notices state ----------------------------------

def _make_op_counter(tensor_core_ops, known: _StorageGroups):
    """Build the TorchDispatchMode (defined lazily: torch is imported only when counting)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    Tensor = torch.Tensor

    class _OpCounter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.calls: dict[str, int] = defaultdict(int)
            self.simt: dict[str, int] = defaultdict(int)
            self.produced: set[int] = set()
            # pre-existing tensors that forward() read but that are neither inputs, parameters
            # nor buffers (model attributes, module globals): state, read once
            self.extra = _StorageGroups()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func.namespace == "prim":  # prim.device, prim.layout: metadata queries
                return func(*args, **kwargs)
            # Under torch.inference_mode (a task may decorate forward with it) composite ops such as
            # aten.matmul or aten.linear reach this mode whole, not decomposed into mm/addmm as they
            # are otherwise. Decompose them here, as FlopCounterMode does, so that the same ops are
            # seen (and a matmul is not counted as SIMT work) either way.
            with self:
                decomposed = func.decompose(*args, **kwargs)
            if decomposed is not NotImplemented:
                return decomposed
            out = func(*args, **kwargs)
            packet = func._overloadpacket
            name = packet.__name__
            self.calls[name] += 1
            for a in tree_leaves((args, kwargs)):
                if isinstance(a, Tensor):
                    key = _storage_key(a)
                    if key not in known and key not in self.produced:
                        self.extra.add(a, "param")
            first = None
            for o in tree_leaves(out):
                if isinstance(o, Tensor):
                    self.produced.add(_storage_key(o))
                    if first is None:
                        first = o
            if first is None:
                return out
            if name in _ATTENTION_NAMES:
                q, k = args[0], args[1]
                causal = bool(args[4]) if len(args) > 4 else bool(kwargs.get("is_causal", False))
                lq, lk = int(q.shape[-2]), int(k.shape[-2])
                pairs = _causal_pairs(lq, lk) if causal else lq * lk
                self.simt[name] += _prod(q.shape[:-2]) * pairs
            elif packet in tensor_core_ops or func.is_view or name in _NO_ARITHMETIC:
                pass
            else:
                self.simt[name] += first.numel()
            return out

    return _OpCounter()


# Tests turn this off to check the RNN shortcut against stepping through every time step.
RNN_SHORTCUT = True


# --- the torch-function layer: CUDA requests and RNN loops --------------------------------------

def _is_cuda(d) -> bool:
    return (isinstance(d, str) and d.strip().lower().startswith("cuda")) or (
        type(d).__name__ == "device" and getattr(d, "type", None) == "cuda")


def _make_function_mode():
    """A TorchFunctionMode with two jobs (defined lazily: torch is imported only when counting).

    1. Keep everything on the fake CPU device. Task files often say ``.cuda()`` or ``device="cuda"``;
       on a machine without CUDA that raises, and fake CUDA tensors mixed with fake CPU ones raise
       too. Shapes and FLOPs do not depend on the device, so CUDA requests become CPU ones.
    2. Count RNNs without stepping through every time step. ``nn.LSTM/GRU/RNN`` decompose into ~15
       ops per step and layer; a 6-layer, 512-step GRU is ~50 000 fake ops, seconds each task. Their
       counts are affine in the sequence length T (the input projection is one matmul over T·B rows,
       every step repeats the same ops), so the RNN runs on the first 2 and 3 steps, and the counts
       of T steps are c(2) + (T-2)·(c(3) - c(2)), exactly what stepping through would count.
    """
    import torch
    from torch.overrides import TorchFunctionMode

    tensor_cuda = torch._C.TensorBase.cuda
    tensor_to = torch._C.TensorBase.to
    rnn_funcs = {f for f in (getattr(torch, n, None) for n in ("lstm", "gru", "rnn_tanh", "rnn_relu")) if f}

    class _FunctionMode(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.snapshot = None  # set while forward runs: () -> (flops, simt, calls) dicts
            self.adjust = None    # and its sink: (flops, simt, calls) -> None

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is tensor_cuda:
                return args[0]
            if "device" in kwargs and _is_cuda(kwargs["device"]):
                kwargs = {**kwargs, "device": "cpu"}
            if func is tensor_to and any(_is_cuda(a) for a in args[1:]):
                args = tuple("cpu" if _is_cuda(a) else a for a in args)
            if func in rnn_funcs and self.snapshot is not None and RNN_SHORTCUT:
                shortcut = self._rnn(func, args, kwargs)
                if shortcut is not None:
                    return shortcut
            return func(*args, **kwargs)

        def _rnn(self, func, args, kwargs):
            # Unpacked form only: (input, hx, params, has_biases, num_layers, dropout, train,
            # bidirectional, batch_first). PackedSequence inputs step through as usual.
            if kwargs or len(args) != 9 or not isinstance(args[2], (list, tuple)):
                return None
            x, batch_first = args[0], bool(args[8])
            if not isinstance(x, torch.Tensor) or x.dim() != 3:
                return None
            tdim = 1 if batch_first else 0
            steps = int(x.shape[tdim])
            if steps <= 4:
                return None
            # Base points 2 and 3, not 1 and 2: with one step some reshapes are free views that need
            # a copy from two steps on, so counts are affine in T only from T = 2.
            s0 = self.snapshot()
            func(x.narrow(tdim, 0, 2), *args[1:])
            s1 = self.snapshot()
            out = func(x.narrow(tdim, 0, 3), *args[1:])
            s2 = self.snapshot()
            # counted so far: c(2) + c(3); wanted: c(2) + (T-2)(c(3) - c(2)); add the difference per op
            deltas = []
            for a, b, c in zip(s0, s1, s2):
                keys = set(a) | set(b) | set(c)
                c2 = {k: b.get(k, 0) - a.get(k, 0) for k in keys}
                c3 = {k: c.get(k, 0) - b.get(k, 0) for k in keys}
                deltas.append({k: (steps - 2) * (c3[k] - c2[k]) - c3[k] for k in keys})
            self.adjust(*deltas)
            output = out[0]
            shape = list(output.shape)
            shape[tdim] = steps
            return (output.new_empty(shape), *out[1:])

    return _FunctionMode()


# --- the count -----------------------------------------------------------------------------------

def _op_name(op) -> str:
    # "mm" for aten.mm: FlopCounterMode keys by OpOverloadPacket, our own mode by its __name__ too
    return str(getattr(op, "__name__", op))


def _dtype_str(dt) -> str:
    return str(dt)


# Messages of errors that mean "this needs real data or a real kernel", raised as plain RuntimeErrors
# by torch (custom ops without a fake implementation, .numpy()/.tolist() on a fake tensor, compiled
# extensions that read a data pointer).
_NEEDS_REAL_DATA = (
    "no fake impl", "fake impl registered", "not supported for tensor subclasses", "doesn't have storage",
    "data pointer", "fake tensor", "faketensor", "meta tensor",
)


def _unsupported(exc: BaseException) -> str | None:
    """A one-line reason when ``exc`` (or what caused it) means "fake tensors cannot run this",
    else None: the task is not wrong, it just cannot be counted without running it."""
    from torch._subclasses import fake_tensor as ft

    reasons = (
        (getattr(ft, "DataDependentOutputException", None), "its result depends on tensor values"),
        (getattr(ft, "DynamicOutputShapeException", None), "its output shape depends on tensor values"),
        (getattr(ft, "UnsupportedOperatorException", None), "it has no fake/meta implementation"),
        (getattr(ft, "UnsupportedFakeTensorException", None), "it does not support fake tensors"),
    )
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:  # the exception and its causes
        seen.add(id(e))
        for cls, why in reasons:
            if cls is not None and isinstance(e, cls):
                op = getattr(e, "func", None)
                op = f"`{op}`" if op is not None else _first_line(str(e))
                return f"op {op} cannot be counted without running it: {why}"
        text = str(e).lower()
        if any(marker in text for marker in _NEEDS_REAL_DATA):
            return f"cannot be counted without running it (it needs real tensor data or kernels): {_first_line(str(e))}"
        e = e.__cause__ or e.__context__
    return None


def _first_line(text: str) -> str:
    return " ".join(text.split())[:200]


def count_task(task_or_path: Task | str | os.PathLike, dtype=None, *, model: str = "Model") -> Counts:
    """Count FLOPs, SIMT FLOPs and compulsory bytes of one forward pass of ``model`` (``"Model"``, the
    reference, or ``"ModelNew"``). ``task_or_path`` is a loaded :class:`Task` or a task file (which is
    then loaded, i.e. its code runs; see :mod:`roofline_ext.tasks.loading`). ``dtype`` (``fp32|fp16|bf16`` or
    a ``torch.dtype``) casts the model and floating inputs first. Raises :class:`TaskError`.
    """
    torch = require_torch()
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.flop_counter import FlopCounterMode

    task = task_or_path if isinstance(task_or_path, Task) else load_task(task_or_path)
    cast = dtype if (dtype is None or isinstance(dtype, torch.dtype)) else parse_dtype(dtype)
    t0 = time.perf_counter()

    # allow_non_fake_inputs: module-level constant tensors of the task are real; fake mode converts
    # them on use (no copy of their data). allow_fallback_kernels=False: never run a real kernel on
    # zero-filled stand-ins, which would allocate the full size (see module docstring).
    fake_mode = FakeTensorMode(allow_fallback_kernels=False, allow_non_fake_inputs=True)
    mkldnn_was = torch.backends.mkldnn.enabled
    grad_was = torch.is_grad_enabled()
    apply_was = torch.nn.Module._apply
    try:
        torch.set_grad_enabled(False)
        torch.backends.mkldnn.enabled = False
        torch.nn.Module._apply = _make_fake_safe_apply(apply_was)
        fmode = _make_function_mode()
        with fake_mode, fmode:
            init_inputs = task.init_inputs()
            module = task.build(init_inputs, which=model)
            inputs = task.inputs()
            if cast is not None:
                # as KernelBench's harness: model.to(dtype) (floating parameters and buffers) and
                # the floating inputs; integer inputs (indices) stay as they are
                module = task.call(module.to, f"{model}.to({cast})", "init", cast)
                inputs = [x.to(cast) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                          for x in inputs]

            known = _StorageGroups()
            input_tensors = [t for t in tree_leaves(inputs) if isinstance(t, torch.Tensor)]
            for t in input_tensors:
                known.add(t, "input")
            # Tied weights appear once in parameters(); a storage shared otherwise is deduplicated.
            # Plain tensor attributes (self.h0 = torch.randn(...)) are found when forward reads them.
            state = list(module.parameters()) + list(module.buffers())
            for t in state:
                known.add(t, "param")

            counter = FlopCounterMode(display=False, custom_mapping=_custom_mapping())
            ops = _make_op_counter(frozenset(counter.flop_registry), known)
            flop_adjust: dict[str, int] = defaultdict(int)

            def snapshot():
                flops = {_op_name(k): v for k, v in counter.get_flop_counts().get("Global", {}).items()}
                return flops, dict(ops.simt), dict(ops.calls)

            def adjust(d_flops, d_simt, d_calls):
                for k, v in d_flops.items():
                    flop_adjust[k] += v
                for k, v in d_simt.items():
                    ops.simt[k] += v
                for k, v in d_calls.items():
                    ops.calls[k] += v

            fmode.snapshot, fmode.adjust = snapshot, adjust
            with counter, ops:
                out = _forward(task, module, inputs, model)
            fmode.snapshot = fmode.adjust = None
            output_tensors = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            written = _StorageGroups()
            for t in output_tensors:
                written.add(t, "output")
    finally:
        torch.nn.Module._apply = apply_was
        torch.backends.mkldnn.enabled = mkldnn_was
        torch.set_grad_enabled(grad_was)

    read = known.bytes_by_category()
    extra = ops.extra.bytes_by_category()
    input_bytes = read.get("input", 0)
    param_bytes = read.get("param", 0) + extra.get("param", 0)
    output_bytes = written.bytes_by_category().get("output", 0)

    flop_by_op: dict[str, int] = defaultdict(int)
    for k, v in counter.get_flop_counts().get("Global", {}).items():
        flop_by_op[_op_name(k)] += int(v)
    for k, v in flop_adjust.items():
        flop_by_op[k] += v
    by_op: dict[str, dict[str, int]] = {}
    for name in set(ops.calls) | set(flop_by_op):
        by_op[name] = {"calls": ops.calls.get(name, 0), "flops": flop_by_op.get(name, 0),
                       "simt_flops": ops.simt.get(name, 0)}
    by_op = dict(sorted(by_op.items(), key=lambda kv: (-kv[1]["flops"], -kv[1]["simt_flops"], kv[0])))

    floating = sorted({_dtype_str(t.dtype) for t in input_tensors + state if t.is_floating_point()})
    if not floating:
        dtype_name, compute = None, None
    elif len(floating) == 1:
        dtype_name = compute = floating[0]
    else:
        dtype_name = "mixed"
        compute = min(floating, key=lambda d: ROOF_ORDER.index(d) if d in ROOF_ORDER else len(ROOF_ORDER))

    notes = []
    if task.get_init_inputs_fn is None:
        notes.append("no get_init_inputs(): Model built without arguments")
    return Counts(
        task=task.name,
        path=str(task.path),
        model=model,
        flops=int(sum(flop_by_op.values())),
        simt_flops=int(sum(ops.simt.values())),
        bytes=int(input_bytes + param_bytes + output_bytes),
        input_bytes=int(input_bytes),
        param_bytes=int(param_bytes),
        output_bytes=int(output_bytes),
        dtype=dtype_name,
        dtypes=floating,
        compute_dtype=compute,
        cast=None if cast is None else str(cast),
        inputs=[_describe_tensor(t) for t in input_tensors],
        outputs=[_describe_tensor(t) for t in output_tensors],
        by_op=by_op,
        seconds=time.perf_counter() - t0,
        has_model_new=task.has_model_new,
        notes=notes,
    )


def _make_fake_safe_apply(original):
    """A ``Module._apply`` that works on modules with fake parameters.

    ``Module.to/cuda/half/float`` end in ``_apply``, which for fake parameters always swaps the old
    parameter object with the new one in place (``torch.utils.swap_tensors``); fake tensors carry weak
    references, which make the swap fail, so a task whose constructor says ``nn.Linear(...).cuda()``
    or ``.half()`` (and ``--dtype``) would fail. This version puts new Parameter objects in place
    instead (keeping tied weights tied) and defers to the original for modules without fake tensors.
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    state = {"depth": 0, "memo": {}}

    def _apply(self, fn, recurse=True):
        # Take over for the whole tree (recursively), so that one memo covers a weight tied across
        # two submodules; the original stays in charge of modules without fake parameters.
        if not any(isinstance(p, FakeTensor) for p in self.parameters(recurse=recurse)):
            return original(self, fn, recurse)
        state["depth"] += 1
        try:
            if recurse:
                for child in self.children():
                    child._apply(fn)
            memo = state["memo"]
            for key, param in list(self._parameters.items()):
                if param is None:
                    continue
                if id(param) not in memo:  # tied weights: one new Parameter for one old one
                    with torch.no_grad():
                        applied = fn(param)
                    new = param if applied is param else torch.nn.Parameter(applied, requires_grad=param.requires_grad)
                    memo[id(param)] = (param, new)  # the old one kept alive so that its id stays unique
                self._parameters[key] = memo[id(param)][1]
            for key, buf in list(self._buffers.items()):
                if buf is not None:
                    self._buffers[key] = fn(buf)
            return self
        finally:
            state["depth"] -= 1
            if state["depth"] == 0:
                state["memo"] = {}

    return _apply


def _forward(task: Task, module, inputs: list, model: str):
    from .loading import _describe_exception, _where

    try:
        return module(*inputs)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit too: a task must not end a batch
        reason = _unsupported(exc)
        if reason is not None:
            raise TaskError(f"{_where(task.path, exc)}: {reason}", kind="unsupported-op", path=task.path) from exc
        raise TaskError(
            f"{_where(task.path, exc)}: {model}.forward() failed: {_describe_exception(exc)}",
            kind="forward", path=task.path,
        ) from exc
