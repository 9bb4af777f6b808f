"""A reference's ops in numbered profiler ranges, numbered as the counting pass numbers them, so
each kernel the profiler sees can be put on the op it ran for (``analyze --time --ops``).

During the profiled run (:func:`profile_reference`, in the timing worker) a dispatch mode wraps
every aten op in ``record_function("roofline_ext.op#<i>")`` (:data:`~roofline_ext.measure.kernel_profile.OP_RANGE`),
numbering the ops as the counting pass does (every op that is not a view, in dispatch order) and
noting the module that called it. The profiling itself, and finding each kernel under its op's
range, is measurement (:mod:`roofline_ext.measure.kernel_profile`); this module is what it must know
about a task's ops. (Moved from ``runner/kernel_profile.py``, issue 25 step 4.)

Op families (``tasks/opcounts.py``): a call of a family function (``scaled_dot_product_attention``,
``batch_norm``, ``conv2d``, ``dropout``, ...) is one op in both passes, whatever aten ops each
backend dispatched beneath it: a torch-function mode opens the call's one range and names it by the
function, and the aten ops inside it get no range of their own. So the GPU's flash, efficient, cuDNN
or math attention is the counted ``scaled_dot_product_attention``, ``cudnn_batch_norm`` the counted
``batch_norm``. (A torch-function mode makes ``has_torch_function`` true, which turns off
``nn.MultiheadAttention``'s and ``nn.TransformerEncoderLayer``'s native fast path in this one run, as
it is off in the count: the profiled run then runs the ops that were counted.)

The profiled ops are then matched to the counted ones (:func:`~roofline_ext.model.profiled.align`, where
:func:`~roofline_ext.model.profiled.place_profile` puts a profile on a result) by their sequence of
(family, module) names (:func:`~roofline_ext.tasks.opcounts.match_key`: the family, in place or
not): where the two passes dispatch the same ops (nearly always), the indices agree one to one;
where they do not (an RNN is one cuDNN op on the GPU and a counted loop on the CPU) the ops that do
not match are reported, with the kernel time that could not be put on a counted op. Matched ops' kernels go onto the result's ops
(:func:`roofline_ext.model.ops.attach_kernels`), held to each op's floor under the L2/HBM rule.
"""
from __future__ import annotations

from typing import Any, Callable

from ..measure.kernel_profile import OP_RANGE, profile_kernels
from .opcounter import ALIAS_OPS, run_if_not_counted
from .opcounts import ModuleTracker, family_functions, op_family

__all__ = ["profile_reference"]


def _make_mode(record: list[dict[str, Any]], tracker):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Numbering(TorchDispatchMode):
        """Every non-view aten op in a profiler range of its own, numbered as the counting pass numbers
        its per-op rows; inside a family call (:func:`_make_family_mode`) the call's range holds them."""

        def __init__(self) -> None:
            super().__init__()
            self.in_family: list[int] = []  # the family call running: its ops dispatched so far

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            handled, value = run_if_not_counted(self, func, args, kwargs)
            if handled:
                return value
            name = func._overloadpacket.__name__
            if func.is_view or name in ALIAS_OPS:
                return func(*args, **kwargs)
            if self.in_family:
                # the family's own range (record_function) dispatches profiler ops: not the call's
                self.in_family[-1] += func.namespace != "profiler"
                return func(*args, **kwargs)
            i = len(record)
            record.append({"index": i, "op": op_family(name, args), "module": tracker.current, "kernels": []})
            with torch.autograd.profiler.record_function(f"{OP_RANGE}{i}"):
                return func(*args, **kwargs)

    return _Numbering()


def _make_family_mode(record: list[dict[str, Any]], tracker, numbering):
    """A torch-function mode that makes each family call one numbered op, named by the function, its
    range around every aten op it dispatches (as the count makes it one row, tasks/opcounts.py). A
    call that dispatched no op (dropout in eval mode) leaves no record, as it leaves no row."""
    import torch
    from torch.overrides import TorchFunctionMode

    families = family_functions()

    class _Families(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            try:
                family = families.get(func)
            except TypeError:  # an unhashable callable is no family function
                family = None
            if family is None or numbering.in_family:
                return func(*args, **kwargs)
            i = len(record)
            record.append({"index": i, "op": family, "module": tracker.current, "kernels": []})
            numbering.in_family.append(0)
            try:
                with torch.autograd.profiler.record_function(f"{OP_RANGE}{i}"):
                    return func(*args, **kwargs)
            finally:
                if numbering.in_family.pop() == 0 and len(record) == i + 1:
                    record.pop()

    return _Families()


def profile_reference(fn: Callable[[], Any], model: Any, device: int, flush: Callable[[], None] | None) -> dict[str, Any]:
    """Run ``fn()`` (the reference's forward, already warm) once under the profiler, each op of
    ``model`` in its numbered range; JSON-ready: ``ops`` (number, op, module, kernels as [name, ms]),
    ``kernel_sum_ms`` (every kernel of the forward), ``outside_ms`` (kernels under no op),
    ``kernels``, ``l2_bytes`` of the device, ``queued``
    (:func:`~roofline_ext.measure.kernel_profile.profile_kernels`). A profiler that cannot run gives
    ``{"error": reason}``: the timing itself stands."""
    def ranges() -> tuple[list[dict[str, Any]], tuple[Any, ...]]:
        # Made inside the profiled run's guard, as before the move: a mode that cannot be made is
        # the profiler's error, and the timing stands.
        record: list[dict[str, Any]] = []
        tracker = ModuleTracker(model)
        mode = _make_mode(record, tracker)
        # Entered in this order around the call: the module tracker, the families, the numbering.
        return record, (tracker, _make_family_mode(record, tracker, mode), mode)

    return profile_kernels(fn, device, flush, ranges)
