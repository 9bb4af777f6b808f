"""Fake results made without the fake implementation, for ops where that implementation is slow and
its result is known from the arguments' metadata alone.

A count runs every op under ``FakeTensorMode``, whose result for an op it has not seen with those
shapes is computed by the op's meta function or Python decomposition and then cached. The cache
lives in the process, and a count runs in a fresh worker forked from a server that has seen only
its warm-up task, so most ops of a task miss it. Two misses are costly out of proportion:

- batch norm in eval mode (``_native_batch_norm_legit_no_training``): the fake mode runs its Python decomposition, about fifteen ops
  that all miss the cache too (10 ms a call on the 2-core VM, the largest single cost of counting
  KernelBench's levels 1-3 in fresh workers: 5.8 of 28 s spent in ops). Its result is a new tensor
  shaped and laid out as a contiguous input, and two empty tensors of the input's dtype.
- ``uniform_`` on a fake tensor (every ``nn.Linear`` and ``nn.Conv*`` initialises its parameters
  with it): a decomposition that makes a random tensor and copies it in, 1.6 ms a call, to return
  its argument unchanged (a fake tensor has no values to fill). The other in-place initialisers
  of ``nn`` modules are the same: ``zero_`` and ``fill_`` (batch and layer norm's statistics,
  weights and biases: five per batch norm), ``normal_`` (embeddings); each a dispatch through the
  fake mode, ~0.3-1 ms in a fresh worker, to return its argument.
- ``empty`` (every parameter and buffer an ``nn`` module makes), ``zeros`` and ``ones`` (batch
  norm's running statistics), ``rand`` and ``randn`` (a task's inputs; the fake mode never caches a
  random op) and batch norm's three outputs: a factory dispatched to the fake mode,
  which computes a cache key, misses or rebuilds the tensor from its cache entry; made here as the
  mode makes them (``make_shortcuts(fake_mode)``).
- ``detach``, which ``nn.Parameter`` calls on every fake parameter (two per ``nn.Linear`` or
  ``nn.Conv*``; 0.3-0.7 ms each through the fake mode in a fresh worker): the meta op run as the
  mode runs it, without the cache key and lookup. With the factories above, 5-10 % of the CPU of
  counting KernelBench level 3 in fresh workers (measured in pairs on the shared 2-core VM).

Each shortcut applies only where its result is exactly what the fake mode returns (same shapes,
strides, dtypes, devices; a new storage where the fake mode makes one), and returns None elsewhere,
so that the op runs as usual: tests/test_tasks_shortcuts.py compares the two over many layouts.
The op counter still sees the op and counts it as before; only the fake mode below it is skipped.
"""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["make_shortcuts"]


def make_shortcuts(fake_mode: Any = None) -> dict[Any, Callable[[tuple, dict], Any]]:
    """{OpOverload: f(args, kwargs) -> the fake result, or None to run the op as usual}.

    ``fake_mode``: the FakeTensorMode the count runs under. With it, new tensors (``empty``, batch
    norm's outputs) are made as that mode makes them (a meta tensor made in its kernel-invocation
    context, wrapped as its FakeTensor on the CPU) instead of by dispatching a factory to it; each
    such shortcut first checks that this mode is the active fake mode."""
    import torch
    from torch._prims_common import make_contiguous_strides_for
    from torch._subclasses.fake_tensor import FakeTensor

    floating = (torch.float32, torch.float64, torch.float16, torch.bfloat16)

    def plain_fake(t) -> bool:
        # constant: a small fake tensor that carries real values, which an in-place op would change
        return type(t) is FakeTensor and t.constant is None and t.layout == torch.strided

    ours, new_fake, factories = _factories(fake_mode, floating)

    def batch_norm(args: tuple, kwargs: dict) -> Any:
        # _native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum,
        # eps): what F.batch_norm dispatches in eval mode
        if kwargs or len(args) != 7:
            return None
        x, stats = args[0], args[1:5]
        if not plain_fake(x) or x.dim() < 2 or x.dtype not in floating:
            return None
        if str(x.device) != "cpu" or tuple(x.stride()) != tuple(make_contiguous_strides_for(x.shape)):
            return None
        channels = int(x.shape[1])
        for i, t in enumerate(stats):
            if t is None and i < 2:  # weight and bias are optional, the running statistics are not
                continue
            if (not plain_fake(t) or t.dtype not in floating or t.dim() != 1
                    or int(t.shape[0]) != channels or str(t.device) != "cpu"):
                return None
        # What the decomposition returns on the CPU in eval mode: the normalised input, laid out
        # as the (contiguous) input, and the saved mean and inverse std as empty tensors.
        if x.fake_mode is fake_mode and ours():
            return new_fake(tuple(x.shape), x.dtype), new_fake((0,), x.dtype), new_fake((0,), x.dtype)
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        return out, x.new_zeros((0,)), x.new_zeros((0,))

    aten = torch.ops.aten
    return {**_in_place_inits(plain_fake, floating), aten._native_batch_norm_legit_no_training.default: batch_norm,
            **factories}


def _factories(fake_mode: Any, floating: tuple) -> tuple[Callable[[], bool], Callable[..., Any], dict[Any, Any]]:
    """(ours, new_fake, shortcuts): whether ``fake_mode`` is the active fake mode; a new fake tensor
    made as that mode makes one; the shortcuts of the plain factories (``empty``, ``zeros``,
    ``ones``, ``rand``, ``randn``) and of ``detach``."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

    plain_dtypes = (*floating, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)
    cpu = torch.device("cpu")
    fake_key = torch._C._TorchDispatchModeKey.FAKE
    aten = torch.ops.aten

    def ours() -> bool:
        return fake_mode is not None and torch._C._get_dispatch_mode(fake_key) is fake_mode

    def new_fake(shape: tuple, dtype) -> Any:
        # what FakeTensorMode's constructors (fake_impls.constructors) and its cache do: the meta
        # tensor made with fake dispatch off, wrapped as a FakeTensor of the mode on the CPU
        with in_kernel_invocation_manager(fake_mode):
            meta = torch.empty(shape, dtype=dtype, device="meta")
        return FakeTensor(fake_mode, meta, cpu)

    def factory(args: tuple, kwargs: dict) -> Any:
        # empty.memory_format(size, *, dtype, layout, device, pin_memory, memory_format), and
        # zeros/ones(size, *, dtype, layout, device, pin_memory): how every nn module makes its
        # parameters and buffers (batch norm's statistics are zeros and ones); plain requests only.
        # A fake tensor has no values, so zeros and ones are made as empty is: a new contiguous
        # tensor of a storage of its own, no constant (the fake mode makes none for a factory).
        if len(args) != 1 or set(kwargs) - {"dtype", "layout", "device", "pin_memory", "memory_format"}:
            return None
        size = args[0]
        if not isinstance(size, (list, tuple)) or not all(type(n) is int and n >= 0 for n in size):
            return None
        if (kwargs.get("layout") not in (None, torch.strided) or kwargs.get("pin_memory") not in (None, False)
                or kwargs.get("memory_format") not in (None, torch.contiguous_format)):
            return None
        device, dtype = kwargs.get("device"), kwargs.get("dtype")
        if (device is not None and device != cpu) or (dtype is not None and dtype not in plain_dtypes) or not ours():
            return None
        return new_fake(tuple(size), dtype if dtype is not None else torch.get_default_dtype())

    def random(args: tuple, kwargs: dict) -> Any:
        # rand/randn(size, *, dtype, layout, device, pin_memory): how get_inputs() makes a task's
        # inputs. The fake mode never caches a random op (1.6-1.8 ms a call in a fresh worker) and
        # draws nothing (the generator's state is left as it was): a new fake, as for empty.
        # Floating dtypes only: randn refuses an integer dtype, which is the op's to say.
        dtype = kwargs.get("dtype")
        return factory(args, kwargs) if dtype is None or dtype in floating else None

    def detach(args: tuple, kwargs: dict) -> Any:
        # nn.Parameter(fake) detaches it (two per nn.Linear or nn.Conv*): what the fake mode does for
        # it, without its cache key and lookup: the meta op run with fake dispatch off, wrapped as a
        # FakeTensor of the mode (same storage, shape, strides, offset and version counter)
        x = args[0] if len(args) == 1 and not kwargs else None
        if (type(x) is not FakeTensor or x.fake_mode is not fake_mode or x.constant is not None
                or x.layout != torch.strided or x.fake_device != cpu or not ours()):
            return None
        with in_kernel_invocation_manager(fake_mode):
            meta = aten.detach.default(x)
        return FakeTensor(fake_mode, meta, cpu)

    return ours, new_fake, {aten.empty.memory_format: factory, aten.zeros.default: factory,
                            aten.ones.default: factory, aten.rand.default: random, aten.randn.default: random,
                            aten.detach.default: detach}


def _in_place_inits(plain_fake: Callable[[Any], bool], floating: tuple) -> dict[Any, Callable[[tuple, dict], Any]]:
    """uniform_, zero_, fill_ and normal_ on plain fakes: in place, on a tensor without values, the
    tensor itself, as the fake mode returns; declined where the op could fail or has values."""
    import torch

    def uniform_(args: tuple, kwargs: dict) -> Any:
        self: Any = args[0] if args else None
        if not plain_fake(self) or not self.is_floating_point() or self.is_complex():
            return None
        return self  # in place, on a tensor without values: the tensor itself, as the fake mode returns

    def zero_(args: tuple, kwargs: dict) -> Any:
        self: Any = args[0] if len(args) == 1 and not kwargs else None
        return self if plain_fake(self) else None

    def fill_(args: tuple, kwargs: dict) -> Any:
        # fill_.Scalar(self, value): a Python number into a floating tensor (what nn.init does);
        # anything else (integer tensors, values that might not convert) runs as usual
        if kwargs or len(args) != 2 or type(args[1]) not in (int, float, bool):
            return None
        self: Any = args[0]
        if not plain_fake(self) or self.dtype not in floating:
            return None
        return self

    def normal_(args: tuple, kwargs: dict) -> Any:
        # normal_(self, mean=0, std=1, *, generator=None): the op checks std >= 0, so only a
        # non-negative Python std is answered here
        mean = args[1] if len(args) > 1 else kwargs.get("mean", 0.0)
        std = args[2] if len(args) > 2 else kwargs.get("std", 1.0)
        if len(args) > 3 or set(kwargs) - {"mean", "std", "generator"}:
            return None
        if type(mean) not in (int, float) or type(std) not in (int, float) or not std >= 0:
            return None
        return uniform_(args[:1], {})  # the same conditions on the tensor: floating, plain fake

    aten = torch.ops.aten
    return {aten.uniform_.default: uniform_, aten.zero_.default: zero_, aten.fill_.Scalar: fill_,
            aten.normal_.default: normal_}
