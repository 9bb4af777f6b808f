"""FLOPs and compulsory bytes of a task, counted without running it.

How
---
The model is built and run under ``FakeTensorMode``: every tensor made by ``get_init_inputs()``,
the constructor and ``get_inputs()`` is a *fake* tensor (shape, dtype, strides, no data), and every op
runs only its shape function. A task with 10 GB of inputs counts in milliseconds and a few MB. Fake
tensors live on the CPU device; ops run their CPU dispatch paths (the counts below are
device-independent except where noted). Ops without a fake/meta implementation are *not* run for real
(``allow_fallback_kernels=False``): that would allocate the full tensors; such a task is reported as an
``unsupported-op`` error, as are ops whose output shape depends on data (``nonzero``, ``.item()``). A
constructor that needs tensor values is built for real on the CPU instead, within a memory budget
(:mod:`roofline_ext.tasks.realbuild`), and its forward pass is counted on fake inputs.

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

What is counted (the rules, each with its reason, are in docs/counting.md)
---------------
``flops``
    Tensor-core FLOPs: matmuls (mm, bmm, addmm, baddbmm, mv, dot, addbmm), convolutions and transposed
    convolutions, attention; 2 FLOPs per multiply-add (formulas.py). A convolution counts only the
    pairs of a real input element and a kernel tap (no taps on implicit zero padding, no
    contributions to output positions a transposed convolution crops away). Attention counts only
    the (query, key) pairs that a causal flag or a known mask keeps, and the same holds for
    attention written by hand with a triangular mask (masks.py). mkldnn is switched off while
    counting so that RNNs (LSTM) decompose into matmuls that are counted, rather than one opaque
    mkldnn op counted as 0.
``flops_flopcounter``
    What ``torch.utils.flop_counter.FlopCounterMode`` counts for the same forward pass (taps on
    padding and the full attention square included, no formula for mv/dot/addbmm), for comparison.
``simt_flops``
    Work that cannot run on tensor cores: pointwise ops, reductions, norms, softmax, pooling, …
    **Approximation: one FLOP per output element per op** (``gelu`` on N elements: N; ``sum`` to a
    scalar: 1; ``softmax``/``layer_norm`` over N elements: N). It is a lower bound (a GELU is really
    ~10 instructions, a reduction over N needs N-1 adds), which is what a floor needs. Views, copies,
    dtype casts, factories/random init and pure data movement (cat, pad, gather, index, …) count 0.
    Attention's internal softmax counts one per kept score; outputs a mask makes known count 0.
``bytes``
    Compulsory traffic (traffic.py): what the forward pass reads of its inputs, parameters, buffers
    and constants, once, and every output written once (``input_bytes + param_bytes +
    output_bytes``). State the forward pass never reads counts 0; a view counts the 32-byte sectors
    it covers; a lookup (embedding, index_select, gather, ``x[idx]``) counts min(table, one row per
    index). Tensors that share a storage (views, tied weights, one input passed twice, ``[X, X.t()]``)
    count once. Non-tensor arguments count 0. An output is counted as written even if it aliases an
    input (an in-place op still writes it).

Mode
----
A task is counted in **eval mode** (``model.eval()``), as it is timed and as KernelBench's harness
runs it: batch norm normalises with its running statistics and updates nothing, dropout is the
identity. A task file that sets ``TRAINING = True`` at module level is counted in training mode
(``model.train()``): batch norm with batch statistics and its running-statistics update, dropout's
masks drawn and applied. ``Counts.mode`` (``"eval"`` or ``"train"``) says which.

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

import contextlib
import os
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import UserError
from ..peaks.units import ROOF_ORDER, TASK_DTYPES, task_dtype_name
from .formulas import flop_formulas, flopcounter_formulas
from .loading import Task, TaskError, describe_exception, load_task, located
from .opcounter import make_op_counter
from .opcounts import UNWRITTEN_OUTPUT, ModuleTracker, OpCount, OpRecorder, family_functions, op_family
from .realbuild import build_for_real
from .traffic import Reads, storage_bytes

__all__ = ["Counts", "count_task", "parse_dtype", "require_torch", "DTYPE_CHOICES"]

DTYPE_CHOICES = tuple(TASK_DTYPES)

#: The version of the counting rules (docs/counting.md): raised whenever a rule changes any count, so
#: that a published table (floors/) names the rules that made it. 2: op families, eval mode.
COUNTING_RULES = 2

#: The module-level name a task file sets to ``True`` to be counted in training mode (see "Mode").
TRAINING_FLAG = "TRAINING"
MODES = ("eval", "train")


def counted_mode(task: Task) -> str:
    """``"train"`` for a task file that sets ``TRAINING = True``, else ``"eval"`` (the default)."""
    return "train" if getattr(task.module, TRAINING_FLAG, False) is True else "eval"


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
    flops_flopcounter: int = 0
    # Per-op counting (count_task(..., ops=True)); None when it was not asked for. The unfused
    # traffic is summed per op name while counting, apart from the rows (opcounts.py).
    ops: list[OpCount] | None = None
    unfused_read_bytes: int | None = None
    unfused_write_bytes: int | None = None
    # "eval" (the default) or "train" (a task file with TRAINING = True): see "Mode" above.
    mode: str = "eval"

    def __post_init__(self) -> None:
        # Counts cross a process boundary as dataclasses.asdict(): rebuild the rows.
        if self.ops is not None:
            self.ops = [o if isinstance(o, OpCount) else OpCount(**o) for o in self.ops]

    @property
    def unfused_bytes(self) -> int | None:
        """The traffic of every op run as a kernel of its own: its inputs read, its outputs written."""
        if self.unfused_read_bytes is None or self.unfused_write_bytes is None:
            return None
        return self.unfused_read_bytes + self.unfused_write_bytes

    @property
    def total_flops(self) -> int:
        """Tensor-core and SIMT FLOPs together."""
        return self.flops + self.simt_flops

    @property
    def arithmetic_intensity(self) -> float | None:
        """All FLOPs (tensor-core and SIMT) per compulsory byte, as ``roofline()`` defines it;
        None when nothing is moved."""
        return (self.flops + self.simt_flops) / self.bytes if self.bytes else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["arithmetic_intensity"] = self.arithmetic_intensity
        d["total_flops"] = self.total_flops
        d["unfused_bytes"] = self.unfused_bytes
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

    tensor_cuda, tensor_to = torch._C.TensorBase.cuda, torch._C.TensorBase.to
    rnn_funcs = {f for f in (getattr(torch, n, None) for n in ("lstm", "gru", "rnn_tanh", "rnn_relu")) if f}
    families = family_functions()

    class _FunctionMode(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.snapshot = None   # set while forward runs: () -> a tuple of {op: count} dicts
            self.adjust = None     # and its sink: the same dicts, as deltas -> None
            self.mark_read = None  # tensor -> None: read in full (the short runs read a part)
            self.op_counter = None  # per-op counting: a family call's ops are one row (opcounts)
            self.placeholder = lambda like, shape: like.new_empty(shape)  # the full-length output

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is tensor_cuda:
                return args[0]
            args, kwargs = _on_cpu(func is tensor_to, args, kwargs or {})
            family = None
            if self.op_counter is not None:
                try:
                    family = families.get(func)
                except TypeError:  # an unhashable callable is no family function
                    family = None
            if func in rnn_funcs and self.snapshot is not None and RNN_SHORTCUT:
                shortcut = self._rnn(func, args, kwargs, family)
                if shortcut is not None:
                    return shortcut
            if family is not None:
                return self._family(family, func, args, kwargs)
            return func(*args, **kwargs)

        def _family(self, family, func, args, kwargs):
            if family is None:
                return func(*args, **kwargs)
            previous = self.op_counter.begin_family(family, args, kwargs)
            out = None
            try:
                out = func(*args, **kwargs)
            finally:
                self.op_counter.end_family(previous, out)
            return out

        def _rnn(self, func, args, kwargs, family=None):
            return _rnn_shortcut(self, func, args, kwargs, family)

    return _FunctionMode()


def _rnn_shortcut(mode, func, args: tuple, kwargs: dict, family: str | None):
    """An RNN layer's call (``torch.lstm`` & co.) counted from runs of 2 and 3 steps and extrapolated
    (``_make_function_mode``), or None where the call is not of the unpacked form with > 4 steps.

    Unpacked form only: (input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    batch_first); PackedSequence inputs step through as usual. Counting per op, each short run is
    one call of the layer's family (``lstm``, ``gru``...): the GPU runs the layer as cuDNN's fused
    kernels where the fake CPU run decomposes it, so the two match only as one op, and the call's
    own traffic (input, weights, states, outputs) is what a fused kernel cannot avoid. The two rows
    extrapolate to T steps."""
    import torch

    if kwargs or len(args) != 9 or not isinstance(args[2], (list, tuple)):
        return None
    x, batch_first = args[0], bool(args[8])
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        return None
    tdim = 1 if batch_first else 0
    steps = int(x.shape[tdim])
    if steps <= 4:
        return None
    # Base points 2 and 3, not 1 and 2: with one step some reshapes are free views that need a copy
    # from two steps on, so counts are affine in T only from T = 2.
    s0 = mode.snapshot()
    mode._family(family, func, (x.narrow(tdim, 0, 2), *args[1:]), {})
    s1 = mode.snapshot()
    out = mode._family(family, func, (x.narrow(tdim, 0, 3), *args[1:]), {})
    s2 = mode.snapshot()
    mode.adjust(*_rnn_deltas(s0, s1, s2, steps), steps=steps, label=getattr(func, "__name__", "rnn"))
    mode.mark_read(x)
    output = out[0]
    shape = list(output.shape)
    shape[tdim] = steps
    return (mode.placeholder(output, shape), *out[1:])


def _on_cpu(is_to: bool, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """A call's arguments with every CUDA device request made a CPU one (``device=`` and, for
    ``Tensor.to``, a positional device)."""
    if "device" in kwargs and _is_cuda(kwargs["device"]):
        kwargs = {**kwargs, "device": "cpu"}
    if is_to and any(_is_cuda(a) for a in args[1:]):
        args = tuple("cpu" if _is_cuda(a) else a for a in args)
    return args, kwargs


def _rnn_deltas(s0: tuple, s1: tuple, s2: tuple, steps: int) -> list[dict]:
    """What to add to each ``{op: count}`` dict after the 2- and 3-step runs (snapshots ``s0``
    before, ``s1`` between, ``s2`` after) so that it holds T = ``steps`` steps: counted so far
    c(2) + c(3), wanted c(2) + (T-2)(c(3) - c(2))."""
    deltas = []
    for a, b, c in zip(s0, s1, s2):
        keys = set(a) | set(b) | set(c)
        c2 = {k: b.get(k, 0) - a.get(k, 0) for k in keys}
        c3 = {k: c.get(k, 0) - b.get(k, 0) for k in keys}
        deltas.append({k: (steps - 2) * (c3[k] - c2[k]) - c3[k] for k in keys})
    return deltas



# --- what fake tensors cannot run ------------------------------------------------------------------

# Messages of errors that mean "this needs real data or a real kernel", raised as plain RuntimeErrors
# by torch (custom ops without a fake implementation, .numpy()/.tolist() on a fake tensor, compiled
# extensions that read a data pointer).
_NEEDS_REAL_DATA = (
    "no fake impl", "fake impl registered", "not supported for tensor subclasses", "doesn't have storage",
    "data pointer", "fake tensor", "faketensor", "meta tensor",
)

_READS_A_VALUE = ("its result depends on tensor values (it reads a value: .item(), .tolist(), int(t) or "
                  "an `if` on a tensor)")


def _fake_failure(exc: BaseException) -> tuple[str, str] | None:
    """(what, why) when ``exc`` (or what caused it) means "fake tensors cannot run this", else None:
    the task is not wrong, it just cannot be counted without running it."""
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
                if "_local_scalar_dense" in str(op):
                    return "it", _READS_A_VALUE
                return (f"op `{op}`" if op is not None else f"op {_first_line(str(e))}"), why
        text = str(e).lower()
        if any(marker in text for marker in _NEEDS_REAL_DATA):
            return "it", f"it needs real tensor data or kernels: {_first_line(str(e))}"
        e = e.__cause__ or e.__context__
    return None


def _unsupported(exc: BaseException) -> str | None:
    """The one-line reason for :func:`_fake_failure`, or None."""
    failure = _fake_failure(exc)
    return None if failure is None else f"{failure[0]} cannot be counted without running it: {failure[1]}"


def _first_line(text: str) -> str:
    return " ".join(text.split())[:200]


# --- the count -----------------------------------------------------------------------------------

def _describe_tensor(t) -> str:
    return f"{str(t.dtype).replace('torch.', '')}[{', '.join(str(s) for s in t.shape)}]"


def _op_name(op) -> str:
    # "mm" for aten.mm: FlopCounterMode keys by OpOverloadPacket, our own mode by its __name__ too
    return str(getattr(op, "__name__", op))


class _StorageKey:
    """A tensor's storage identity (the address of its StorageImpl: valid while the tensors live, which
    they do for the whole count).

    A real tensor (a task's module-level constant, a model built for real) stands for the fake tensor
    the mode makes of it (memoized), so that ``X`` and a view of it made under the mode are one
    storage. A fake tensor the mode does not own (``copy.deepcopy`` of a fake parameter, as
    ``nn.TransformerEncoder`` does for its layers, makes one: "not our fake" to the mode, which
    converts it) and a fake tensor that carries a constant have views on another storage:
    :meth:`alias` files that one under the tensor's own."""

    def __init__(self, fake_mode) -> None:
        from torch._subclasses.fake_tensor import FakeTensor

        self.fake_mode, self.fake_type = fake_mode, FakeTensor
        self.aliases: dict[int, int] = {}
        self.keep: list = []
        self.fakes: dict[int, tuple] = {}

    def __call__(self, t) -> int:
        if not isinstance(t, self.fake_type):
            # one fake for the whole count (kept, with the real tensor, so that ids stay unique)
            entry = self.fakes.get(id(t))
            if entry is None:
                try:
                    entry = (t, self.fake_mode.from_tensor(t))
                except Exception:  # a tensor the mode cannot convert: its own storage
                    entry = (t, t)
                self.fakes[id(t)] = entry
            t = entry[1]
        raw = t.untyped_storage()._cdata
        return self.aliases.get(raw, raw)

    def alias(self, t) -> None:
        # aten.alias, not t.view(t.shape): a view op the mode places on the same storage as every
        # other view, for a third of the cost (view's fake implementation reshapes in Python: about
        # 1.5 ms a tensor in a fresh worker, against 0.5 ms), for every parameter, buffer and input
        import torch

        if type(t) is self.fake_type and t.fake_mode is self.fake_mode and t.constant is None:
            # One of this mode's own fakes, without a constant: the mode puts its views on the
            # tensor's own storage (a cached view is set_ on view_arg.untyped_storage(), an uncached
            # one is the meta kernel's view of it), so the probe would file nothing. Skipped: 5,131
            # probes over KernelBench L1-L3, ~0.3-1 ms each in a fresh worker.
            return
        view = torch.ops.aten.alias.default(t)
        own, of_views = self(t), self(view)
        if of_views != own:
            self.aliases[of_views] = own
            self.keep.append(view)  # that storage lives only as long as a view of it


def _build(task: Task, init_inputs: list, model: str) -> tuple[Any, list[str]]:
    """The model on fake tensors; built for real when its constructor needs tensor values."""
    try:
        return task.build(init_inputs, which=model), []
    except TaskError as exc:
        failure = _fake_failure(exc.__cause__) if exc.kind == "init" and exc.__cause__ else None
        if failure is None:
            raise
        module = build_for_real(task, model, exc, failure[1])
    note = (f"{model} was built for real on the CPU, because fake tensors cannot build it: {failure[1]}; "
            "its forward pass was counted on fake tensors")
    return module, [note]


def _setup(task: Task, model: str, cast) -> tuple[Any, list, list[str]]:
    """Build the model and make the inputs (fake, or real where the task made them so), cast."""
    import torch

    init_inputs = task.init_inputs()
    module, notes = _build(task, init_inputs, model)
    inputs = task.inputs()
    if cast is not None:
        # as KernelBench's harness: model.to(dtype) (floating parameters and buffers) and
        # the floating inputs; integer inputs (indices) stay as they are
        module = task.call(module.to, f"{model}.to({cast})", "init", cast)
        inputs = [x.to(cast) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    mode = counted_mode(task)
    task.call(module.train, f"{model}.{mode}()", "init", mode == "train")
    if mode == "train":
        notes.append(f"counted in training mode (the task sets {TRAINING_FLAG} = True): batch norm uses batch "
                     "statistics and updates its running ones, dropout draws and applies its masks")
    return module, inputs, notes


def _connect_rnn_shortcut(fmode, ops, key) -> None:
    marks: list[int] = []  # where each snapshot left the per-op rows

    def snapshot():
        fc = {_op_name(k): v for k, v in ops.fc_counts.items()}
        if ops.recorder is not None:
            marks.append(ops.recorder.mark())
        return (dict(ops.flops), dict(ops.simt), dict(ops.calls), fc, dict(ops.read_by_name),
                dict(ops.write_by_name))

    def adjust(d_flops, d_simt, d_calls, d_fc, d_read, d_write, *, steps: int, label: str):
        for target, delta in ((ops.flops, d_flops), (ops.simt, d_simt), (ops.calls, d_calls),
                              (ops.fc_adjust, d_fc), (ops.read_by_name, d_read), (ops.write_by_name, d_write)):
            for k, v in delta.items():
                target[k] += v
        if ops.recorder is not None:
            ops.recorder.extrapolate(marks[-3], marks[-2], steps, label)

    def placeholder(like, shape):
        # The layer's full-length output: the extrapolated row wrote it (the totals count it as an
        # output), so it gets no row of its own, nor the "written by no op" row an output no op
        # wrote gets.
        recorder, ops.recorder = ops.recorder, None
        try:
            out = like.new_empty(shape)
        finally:
            ops.recorder = recorder
        if recorder is not None:
            recorder.written.add(key(out))
        return out

    fmode.snapshot, fmode.adjust, fmode.mark_read, fmode.placeholder = snapshot, adjust, ops.mark_read, placeholder


def _dtypes(tensors: list) -> tuple[str | None, list[str], str | None]:
    """(dtype, dtypes, compute_dtype) of the floating tensors (see the module docstring)."""
    floating = sorted({str(t.dtype) for t in tensors if t.is_floating_point()})
    if not floating:
        return None, floating, None
    if len(floating) == 1:
        return floating[0], floating, floating[0]
    compute = min(floating, key=lambda d: ROOF_ORDER.index(d) if d in ROOF_ORDER else len(ROOF_ORDER))
    return "mixed", floating, compute


def _by_op(ops) -> dict[str, dict[str, int]]:
    """Calls and work per aten op, a backend's internal forms under their family's name
    (``_scaled_dot_product_flash_attention_for_cpu`` is ``scaled_dot_product_attention``)."""
    by_op: dict[str, dict[str, int]] = {}
    for name in set(ops.calls) | set(ops.flops) | set(ops.simt):
        row = by_op.setdefault(op_family(name), {"calls": 0, "flops": 0, "simt_flops": 0})
        row["calls"] += ops.calls.get(name, 0)
        row["flops"] += ops.flops.get(name, 0)
        row["simt_flops"] += ops.simt.get(name, 0)
    return dict(sorted(by_op.items(), key=lambda kv: (-kv[1]["flops"], -kv[1]["simt_flops"], kv[0])))


@dataclass
class _Run:
    """What one counted forward pass left: the op counter (FlopCounterMode's count too), the tensors."""

    ops: Any
    inputs: list
    state: list
    outputs: list
    written: Reads
    notes: list[str]


def count_task(task_or_path: Task | str | os.PathLike, dtype=None, *, model: str = "Model",
               ops: bool = False) -> Counts:
    """Count FLOPs, SIMT FLOPs and compulsory bytes of one forward pass of ``model`` (``"Model"``, the
    reference, or ``"ModelNew"``). ``task_or_path`` is a loaded :class:`Task` or a task file (which is
    then loaded, i.e. its code runs; see :mod:`roofline_ext.tasks.loading`). ``dtype`` (``fp32|fp16|bf16`` or
    a ``torch.dtype``) casts the model and floating inputs first. ``ops``: also count every op on
    its own (``Counts.ops``, the unfused traffic; :mod:`roofline_ext.tasks.opcounts`), in the same
    pass. Raises :class:`TaskError`.
    """
    torch = require_torch()
    if not isinstance(task_or_path, (Task, str, os.PathLike)):
        raise UserError(f"count_task takes a Task or a task file's path, got {type(task_or_path).__name__}")
    task = task_or_path if isinstance(task_or_path, Task) else load_task(task_or_path)
    cast = dtype if (dtype is None or isinstance(dtype, torch.dtype)) else parse_dtype(dtype)
    t0 = time.perf_counter()
    run = _run(task, model, cast, ops)
    return _counts(task, model, cast, run, time.perf_counter() - t0)


def _run(task: Task, model: str, cast, per_op: bool = False) -> _Run:
    """Build, make the inputs and run forward on fake tensors, counting; torch's state put back."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.flop_counter import FlopCounterMode

    # allow_non_fake_inputs: module-level constant tensors of the task are real; fake mode converts
    # them on use (no copy of their data). allow_fallback_kernels=False: never run a real kernel on
    # zero-filled stand-ins, which would allocate the full size (see module docstring).
    fake_mode = FakeTensorMode(allow_fallback_kernels=False, allow_non_fake_inputs=True)
    mkldnn_was, grad_was, apply_was = torch.backends.mkldnn.enabled, torch.is_grad_enabled(), torch.nn.Module._apply
    try:
        torch.set_grad_enabled(False)
        # torch types the flag as the ContextProp descriptor that stores it, not as the bool it holds.
        torch.backends.mkldnn.enabled = False  # type: ignore[assignment]
        # Patching the method is the point (and undone below); mypy refuses any method assignment.
        torch.nn.Module._apply = _make_fake_safe_apply(apply_was)  # type: ignore[method-assign]
        fmode, key = _make_function_mode(), _StorageKey(fake_mode)
        ops = make_op_counter(flop_formulas(), key)
        ops.fc_adjust = defaultdict(int)
        with fake_mode, fmode:
            with ops:  # follows values only: a mask made here is known in forward
                module, inputs, notes = _setup(task, model, cast)
            input_tensors = [t for t in tree_leaves(inputs) if isinstance(t, torch.Tensor)]
            state = list(module.parameters()) + list(module.buffers())
            for t in state + input_tensors:
                key.alias(t)
            ops.sources = {**{key(t): "param" for t in state}, **{key(t): "input" for t in input_tensors}}
            # What FlopCounterMode would count, counted by the op counter itself from the same
            # registry (FlopCounterMode's own, made here as it makes it): a second dispatch mode
            # under ours, with its module hooks, cost about a tenth of a count (opcounter.py).
            ops.fc_registry = FlopCounterMode(display=False, custom_mapping=flopcounter_formulas()).flop_registry
            _connect_rnn_shortcut(fmode, ops, key)
            ops.counting = ops.masks.counting = True
            tracker = ModuleTracker(module) if per_op else None
            if tracker is not None:
                ops.recorder = OpRecorder(tracker)
                fmode.op_counter = ops
            with ops, (tracker if tracker is not None else contextlib.nullcontext()):
                out = _forward(task, module, inputs, model)
            ops.fc_registry = None
            fmode.snapshot = fmode.adjust = fmode.mark_read = fmode.op_counter = None
            outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            written = Reads()
            for t in outputs:
                written.add_tensor(key(t), "output", t)
            if ops.recorder is not None:
                _unwritten_outputs(ops, written)
    finally:
        torch.nn.Module._apply = apply_was  # type: ignore[method-assign]  # undoing the patch above
        torch.backends.mkldnn.enabled = mkldnn_was
        torch.set_grad_enabled(grad_was)
    return _Run(ops, input_tensors, state, outputs, written, notes)


def _unwritten_outputs(ops, written: Reads) -> None:
    """Outputs whose storage no op wrote (forward returned an input, a parameter, or a view of one)
    count as written in the compulsory traffic; one row carries them in the unfused traffic too."""
    missing = sum(storage_bytes(reads, written.nbytes[k]) for k, reads in written.reads.items()
                  if k not in ops.recorder.written)
    if missing:
        ops.recorder.unwritten_output(missing)
        ops.write_by_name[UNWRITTEN_OUTPUT] += missing


def _counts(task: Task, model: str, cast, run: _Run, seconds: float) -> Counts:
    read = run.ops.reads.bytes_by_category()
    input_bytes, param_bytes = read.get("input", 0), read.get("param", 0)
    output_bytes = run.written.bytes_by_category().get("output", 0)
    flopcounter = sum(int(v) for v in run.ops.fc_counts.values())
    flopcounter += sum(run.ops.fc_adjust.values())
    dtype_name, floating, compute = _dtypes(run.inputs + run.state)
    notes = list(run.notes)
    if task.get_init_inputs_fn is None:
        notes.append("no get_init_inputs(): Model built without arguments")
    return Counts(
        task=task.name,
        path=str(task.path),
        model=model,
        flops=int(sum(run.ops.flops.values())),
        simt_flops=int(sum(run.ops.simt.values())),
        bytes=int(input_bytes + param_bytes + output_bytes),
        input_bytes=int(input_bytes),
        param_bytes=int(param_bytes),
        output_bytes=int(output_bytes),
        dtype=dtype_name,
        dtypes=floating,
        compute_dtype=compute,
        cast=None if cast is None else str(cast),
        inputs=[_describe_tensor(t) for t in run.inputs],
        outputs=[_describe_tensor(t) for t in run.outputs],
        by_op=_by_op(run.ops),
        seconds=seconds,
        has_model_new=task.has_model_new,
        notes=notes + list(run.ops.masks.notes),
        flops_flopcounter=int(flopcounter),
        ops=run.ops.recorder.counts() if run.ops.recorder is not None else None,
        unfused_read_bytes=None if run.ops.recorder is None else int(sum(run.ops.read_by_name.values())),
        unfused_write_bytes=None if run.ops.recorder is None else int(sum(run.ops.write_by_name.values())),
        mode=counted_mode(task),
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
    try:
        return module(*inputs)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit too: a task must not end a batch
        failure = _fake_failure(exc)
        if failure is not None:
            what = f"{model}.forward()" if failure[0] == "it" else failure[0]
            raise TaskError(f"{located(task.path, exc)}: {what} cannot be counted without running it: {failure[1]}",
                            kind="unsupported-op", path=task.path) from exc
        raise TaskError(
            f"{located(task.path, exc)}: {model}.forward() failed: {describe_exception(exc)}",
            kind="forward", path=task.path,
        ) from exc
