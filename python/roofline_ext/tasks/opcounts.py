"""Per-op counts of one forward pass: every aten op, under the module that called it.

The op counter (:mod:`.opcounter`) counts the task as a whole; with per-op counting on it also
hands each op of the forward pass to an :class:`OpRecorder` here, in dispatch order, from the same
counting pass (no second forward). Each op gets:

- its tensor-core FLOPs and SIMT FLOPs, exactly as the task's totals count them (a mask's
  take-back lands on the op whose work it takes back), so the per-op FLOPs add up to the task's;
- the bytes of its *own* inputs read and outputs written (``read_bytes``/``write_bytes``): every
  tensor argument's sectors (a lookup: the rows it can name), each storage once per op, and every
  output written once. Views cost nothing; an allocation (``empty``) writes nothing. This is the
  traffic of running each op as a kernel of its own, the *unfused traffic* (docs/counting.md);
- the innermost ``nn.Module`` running when it was dispatched, by qualified name
  (``layers.3.conv1``; ``""`` is the task's model itself).

**Op families.** One operation dispatches to different aten ops by device, backend and mode:
``F.scaled_dot_product_attention`` is ``_scaled_dot_product_flash_attention_for_cpu`` on the fake
CPU tensors of the count and a flash, memory-efficient, cuDNN or math kernel (the math one a dozen
aten ops) on a GPU; ``F.batch_norm`` is ``_native_batch_norm_legit[_no_training]`` here and
``cudnn_batch_norm`` there; dropout in training is ``bernoulli_``/``div_``/``mul`` on the CPU and
``native_dropout`` on CUDA. So the op is what the user called: a call of one of
:data:`FAMILY_FUNCTIONS` is one row named by that function (``scaled_dot_product_attention``,
``batch_norm``, ``conv2d``), holding the work of every aten op it dispatched, and the traffic of the
call itself (what it reads that existed before it, what it returns or overwrites; its temporaries
and side outputs such as attention's logsumexp are not traffic of the call). The GPU's profiled run
groups its ops the same way (``tasks/opranges.py``), so the two match whatever each backend
dispatched. An aten op met outside such a call (``torch.compile`` emits aten ops directly, a task
may call ``torch.ops.aten``) is named by :func:`op_family` from a table of the known variants.

RNN layers (``torch.lstm``, ``gru``, ``rnn_tanh``, ``rnn_relu``: what ``nn.LSTM``/``GRU``/``RNN``
call) are family functions too: the GPU runs them as cuDNN's fused kernels, the fake CPU run as
matmuls and pointwise ops per step, and only the call matches the call. They are counted from two
short runs (``counting._make_function_mode``), each one family row, replaced by one row per
(module, op) of the layer, extrapolated to the full sequence the way the totals are (``note`` says
it was extrapolated).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .traffic import Read, storage_bytes

__all__ = ["OpCount", "OpRecorder", "ModuleTracker", "ZERO_WRITE", "UNWRITTEN_OUTPUT", "FAMILY_FUNCTIONS",
           "family_functions", "op_family", "match_key"]

#: Ops that allocate or only change metadata: their output is not written by a kernel.
ZERO_WRITE = frozenset("""
    empty empty_like empty_strided new_empty new_empty_strided resize_ resize_as_ set_ lift_fresh
    lift_fresh_copy record_stream _assert_tensor_metadata _assert_async _functional_assert_async
    _assert_scalar _local_scalar_dense
""".split())

#: The op name of the row for task outputs that no op of the forward pass wrote (forward returned
#: an input, a parameter or a view of one): the compulsory traffic counts them as written, so a
#: kernel that returns them must write them.
UNWRITTEN_OUTPUT = "(output written by no op)"


#: Functions whose call is one op (see the module docstring), by the name the user wrote. Looked up
#: in torch.nn.functional, torch and torch._C._nn, by identity (:func:`family_functions`).
FAMILY_FUNCTIONS = tuple("""
    scaled_dot_product_attention batch_norm instance_norm group_norm layer_norm rms_norm
    conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
    dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout
    lstm gru rnn_tanh rnn_relu
""".split())

# Aten ops met outside a family call, by the family they belong to: every backend's form of the
# operation (torch.compile emits these directly). Convolutions are named by their arguments.
_ATEN_FAMILY = {
    **dict.fromkeys("""
        _scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_flash_attention
        _scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention
        _scaled_dot_product_attention_math _scaled_dot_product_attention_math_for_mps
        _scaled_dot_product_fused_attention_overrideable _flash_attention_forward
        _efficient_attention_forward _cudnn_attention_forward
    """.split(), "scaled_dot_product_attention"),
    **dict.fromkeys("""
        native_batch_norm _native_batch_norm_legit _native_batch_norm_legit_no_training
        _native_batch_norm_legit_functional cudnn_batch_norm miopen_batch_norm _batch_norm_impl_index
        _batch_norm_with_update _batch_norm_with_update_functional _batch_norm_no_update
    """.split(), "batch_norm"),
    "native_layer_norm": "layer_norm",
    "native_group_norm": "group_norm",
    "_fused_rms_norm": "rms_norm",
    "native_dropout": "dropout",
}
_CONVOLUTIONS = frozenset("""
    convolution _convolution convolution_overrideable cudnn_convolution cudnn_convolution_transpose
    cudnn_convolution_relu cudnn_convolution_add_relu miopen_convolution miopen_convolution_transpose
    miopen_depthwise_convolution mkldnn_convolution _slow_conv2d_forward slow_conv3d_forward
    slow_conv_dilated2d slow_conv_dilated3d slow_conv_transpose2d slow_conv_transpose3d
    _conv_depthwise2d conv_depthwise3d thnn_conv2d _nnpack_spatial_convolution
""".split())


def _conv_family(name: str, args: tuple | None) -> str:
    """conv{1,2,3}d or conv_transpose{1,2,3}d from the weight's rank and the transposed flag."""
    args = args or ()
    weight = args[1] if len(args) > 1 else None
    dims = getattr(weight, "dim", None)
    if dims is None:
        return "convolution"
    transposed = "transpose" in name or (name in ("convolution", "_convolution", "convolution_overrideable")
                                         and len(args) > 6 and bool(args[6]))
    return f"conv_transpose{dims() - 2}d" if transposed else f"conv{dims() - 2}d"


def op_family(name: str, args: tuple | None = None) -> str:
    """The op a user wrote, for an aten op dispatched outside a family call: every backend's form of
    attention, batch norm, layer/group/RMS norm, dropout, convolution and recurrent layer by its
    family's name (a convolution or a fused RNN by its arguments where they are given); any other
    op by its own name."""
    if name in _CONVOLUTIONS:
        return _conv_family(name, args)
    if name in _FUSED_RNNS:
        mode = args[_FUSED_RNNS[name]] if args and len(args) > _FUSED_RNNS[name] else None
        return _RNN_MODES.get(mode, "rnn") if isinstance(mode, int) else "rnn"
    return _ATEN_FAMILY.get(name, name)


# The fused RNN ops of cuDNN and MIOpen, with the index of their mode argument (cuDNN's numbering:
# 0 ReLU, 1 tanh, 2 LSTM, 3 GRU).
_FUSED_RNNS = {"_cudnn_rnn": 6, "miopen_rnn": 6}
_RNN_MODES = {0: "rnn_relu", 1: "rnn_tanh", 2: "lstm", 3: "gru"}
_RNN_NAMES = frozenset({"rnn", *_RNN_MODES.values()})


_CONV_NAMES = frozenset({"convolution"} | {f"conv{t}{d}d" for t in ("", "_transpose") for d in (1, 2, 3)})


def match_key(name: str) -> str:
    """The name two passes' ops are matched by: the family, in place (``relu_``) or not. Coarser
    than the family where an aten form alone cannot tell the family: a convolution named without
    its arguments is any convolution, and instance norm runs as batch norm on every backend."""
    key = op_family(name).rstrip("_") or name
    if key in _CONV_NAMES:
        return "convolution"
    if key in _RNN_NAMES:  # a fused RNN op named without its mode is any recurrent layer
        return "rnn"
    return "batch_norm" if key == "instance_norm" else key


_FUNCTIONS: dict[Any, str] | None = None


def family_functions() -> dict[Any, str]:
    """{function object: family name} of :data:`FAMILY_FUNCTIONS` as this torch has them (torch is
    imported on first use only)."""
    global _FUNCTIONS
    if _FUNCTIONS is None:
        import torch
        import torch.nn.functional as F

        found: dict[Any, str] = {}
        for name in FAMILY_FUNCTIONS:
            for where in (F, torch, torch._C._nn, torch._C._VariableFunctions):
                fn = getattr(where, name, None)
                if fn is not None:
                    found[fn] = name
        _FUNCTIONS = found
    return _FUNCTIONS


@dataclass(frozen=True)
class OpCount:
    """What one aten op of the forward pass costs on its own (or, with ``calls`` > 1, the ops an RNN
    row stands for). FLOPs and bytes as the task's counts define them (docs/counting.md)."""

    index: int
    op: str
    module: str
    flops: int
    simt_flops: int
    read_bytes: int
    write_bytes: int
    calls: int = 1
    note: str | None = None

    @property
    def bytes(self) -> int:
        return self.read_bytes + self.write_bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ModuleTracker:
    """The innermost module running, by qualified name, from global forward hooks.

    ``names`` maps ``id(module)`` to its name in the root model (``named_modules``); a module the
    root does not hold (made inside forward) is named by its class, under its caller."""

    def __init__(self, root: Any) -> None:
        self.names = {id(m): name for name, m in root.named_modules()}
        self.stack: list[str] = []
        self._handles: list[Any] = []

    @property
    def current(self) -> str:
        return self.stack[-1] if self.stack else ""

    def _pre(self, module, args) -> None:
        name = self.names.get(id(module))
        if name is None:
            outer = self.current
            name = f"{outer}.<{type(module).__name__}>" if outer else f"<{type(module).__name__}>"
        self.stack.append(name)

    def _post(self, module, args, out) -> None:
        if self.stack:
            self.stack.pop()

    def __enter__(self) -> "ModuleTracker":
        from torch.nn.modules import module as nn_module

        self._handles = [nn_module.register_module_forward_pre_hook(self._pre),
                         nn_module.register_module_forward_hook(self._post, always_call=True)]
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        self.stack = []


class _Row:
    __slots__ = ("op", "module", "flops", "simt", "read", "write", "calls", "note")

    def __init__(self, op: str, module: str) -> None:
        self.op, self.module = op, module
        self.flops = self.simt = self.read = self.write = 0
        self.calls = 1
        self.note: str | None = None


class OpRecorder:
    """The rows of one count, in dispatch order; the op counter fills them (see module docstring)."""

    def __init__(self, tracker: ModuleTracker | None = None) -> None:
        self.rows: list[_Row] = []
        self.tracker = tracker
        self.written: set[int] = set()  # storages some op wrote

    def begin(self, op: str) -> int:
        self.rows.append(_Row(op, self.tracker.current if self.tracker is not None else ""))
        return len(self.rows) - 1

    def work(self, index: int, bucket: str, amount: int) -> None:
        row = self.rows[index]
        if bucket == "flops":
            row.flops += amount
        else:
            row.simt += amount

    def traffic(self, index: int, reads: dict[int, tuple[list[Read], int | None]],
                writes: dict[int, int]) -> tuple[int, int]:
        """Record an op's reads (storage -> (its reads, storage size)) and writes (storage -> bytes);
        returns (read bytes, write bytes)."""
        row = self.rows[index]
        row.read = sum(storage_bytes(r, n) for r, n in reads.values())
        row.write = sum(writes.values())
        self.written.update(writes)
        return row.read, row.write

    # --- RNN layers: counted from a 2-step and a 3-step run --------------------------------------

    def mark(self) -> int:
        return len(self.rows)

    def extrapolate(self, start: int, middle: int, steps: int, label: str) -> None:
        """Replace the rows of a 2-step run (``start:middle``) and a 3-step run (``middle:``) by one
        row per (module, op): c(2) + (steps - 2) (c(3) - c(2)), as the totals are extrapolated (the
        totals are extrapolated apart, per op name, so that the two can be checked against each
        other)."""
        def sums(rows: list[_Row]) -> dict[tuple[str, str], list[int]]:
            out: dict[tuple[str, str], list[int]] = {}
            for r in rows:
                acc = out.setdefault((r.module, r.op), [0, 0, 0, 0, 0])
                for i, v in enumerate((r.flops, r.simt, r.read, r.write, r.calls)):
                    acc[i] += v
            return out

        c2, c3 = sums(self.rows[start:middle]), sums(self.rows[middle:])
        order = list(dict.fromkeys([(r.module, r.op) for r in self.rows[start:]]))
        del self.rows[start:]
        for key in order:
            a, b = c2.get(key, [0] * 5), c3.get(key, [0] * 5)
            value = [a[i] + (steps - 2) * (b[i] - a[i]) for i in range(5)]
            row = _Row(key[1], key[0])
            row.flops, row.simt, row.read, row.write, row.calls = value
            row.note = f"{label}: extrapolated to {steps} steps from runs of 2 and 3 steps"
            self.rows.append(row)

    def unwritten_output(self, nbytes: int) -> None:
        row = _Row(UNWRITTEN_OUTPUT, "")
        row.calls, row.write = 0, nbytes
        self.rows.append(row)

    def counts(self) -> list[OpCount]:
        return [OpCount(i, r.op, r.module, int(r.flops), int(r.simt), int(r.read), int(r.write), int(r.calls),
                        r.note) for i, r in enumerate(self.rows)]
