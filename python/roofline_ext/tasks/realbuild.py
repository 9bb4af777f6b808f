"""Building a model for real, on the CPU, when its constructor needs tensor values.

Some constructors read values (``[x.item() for x in torch.linspace(0, rate, n)]`` for a stochastic
depth schedule in KernelBench's Swin models), which fake tensors do not have. Such a model is built
with real tensors instead, as long as what the constructor allocates stays within
:data:`REAL_BUILD_BUDGET` bytes; the forward pass is still counted on fake inputs (a real parameter
is converted to a fake one where an op uses it, without copying its data).

The budget is checked before each allocation by the tensor factories (``torch.empty``, ``zeros``,
``ones``, ``rand``, ``randn``, ``full``, ``randint``, ``arange``, ``linspace``, ``eye``, and
``Tensor.new_*``), which is how ``nn.Module`` constructors make their parameters and buffers.
"""
from __future__ import annotations

import math
from typing import Any

from .loading import Task, TaskError

__all__ = ["REAL_BUILD_BUDGET", "build_for_real"]

#: Bytes a constructor may allocate when a model is built for real (1 GiB).
REAL_BUILD_BUDGET = 1 << 30


class _OverBudget(Exception):
    pass


def _numel(size) -> int:
    return math.prod(int(s) for s in size)


def _requested(func, args: tuple, kwargs: dict) -> int:
    """Bytes a factory call (one of :func:`_factories`) is about to allocate."""
    import torch

    name = getattr(func, "__name__", "")
    sizes = [a for a in args if isinstance(a, (tuple, list, torch.Size))]
    if "size" in kwargs:
        numel = _numel(kwargs["size"])
    elif name == "arange":
        ends = [float(a) for a in args if isinstance(a, (int, float))] or [0.0]
        start, end, step = (0.0, ends[0], 1.0) if len(ends) == 1 else (ends + [1.0])[:3]
        numel = max(0, math.ceil((end - start) / step)) if step else 0
    elif name == "linspace":
        numel = int(args[2]) if len(args) > 2 else int(kwargs.get("steps", 0))
    elif name == "eye":
        numel = int(args[0]) * int(args[1] if len(args) > 1 and isinstance(args[1], int) else args[0])
    elif sizes:
        numel = _numel(sizes[0])
    else:
        numel = _numel(a for a in args if isinstance(a, int))
    dtype = kwargs.get("dtype") or (args[0].dtype if args and isinstance(args[0], torch.Tensor) else None)
    dtype = dtype or (torch.int64 if name == "randint" else torch.get_default_dtype())
    return numel * dtype.itemsize


def _factories() -> frozenset:
    import torch

    names = ("empty", "zeros", "ones", "rand", "randn", "full", "randint", "arange", "linspace", "eye")
    methods = ("new_empty", "new_zeros", "new_ones", "new_full")
    return frozenset([getattr(torch, n) for n in names] + [getattr(torch.Tensor, n) for n in methods])


def _budget_mode(limit: int):
    from torch.overrides import TorchFunctionMode

    factories = _factories()

    class _Budget(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.left = limit

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in factories:
                self.left -= _requested(func, args, kwargs)
            if self.left < 0:
                raise _OverBudget()
            return func(*args, **kwargs)

    return _Budget()


def build_for_real(task: Task, model: str, failure: TaskError, why: str) -> Any:
    """``model`` built with real CPU tensors, after ``failure`` (building it on fake tensors) for the
    reason ``why``. Raises a one-line :class:`TaskError` (``unsupported-op``) if that fails too."""
    from torch.utils._python_dispatch import _disable_current_modes

    what = f"{model}(*get_init_inputs())"
    try:
        with _disable_current_modes(), _budget_mode(REAL_BUILD_BUDGET):
            return task.build(task.init_inputs(), which=model)
    except TaskError as exc:
        where = str(failure).split(": ", 1)[0]
        if isinstance(exc.__cause__, _OverBudget):
            reason = (f"building it for real on the CPU would allocate more than "
                      f"{REAL_BUILD_BUDGET / 2**30:g} GiB")
        else:
            reason = f"building it for real on the CPU failed too: {str(exc).split(': ', 1)[-1]}"
        raise TaskError(f"{where}: {what} cannot be counted without running it: {why}, and {reason}",
                        kind="unsupported-op", path=task.path) from exc
