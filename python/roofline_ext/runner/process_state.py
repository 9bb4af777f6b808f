"""Process state a task can change and the next task in the same process would feel.

A timing worker runs one task after another, so after each task it compares the process with a
snapshot taken before the first one. Any difference means the worker is replaced before the next
task: a task that patched ``torch.matmul``, changed the working directory, installed a signal
handler, left a thread running or flipped a torch flag (TF32, cuDNN benchmark mode, the default
dtype) must not change how the next task runs or what it measures.

What is compared (each a one-line reason when it differs): the working directory; every signal's
handler and the blocked-signal mask; the environment; ``sys.path``, the import hooks and the
``sys`` hooks (stdout/stderr, trace, profile, excepthook); the CPU affinity; non-daemon threads
still running; the code of every loaded module (:mod:`.fingerprint`: every module's namespace,
every class's, every Python function's code and defaults, module-level registries, torch's config
modules, compared by identity); torch's global flags and modes; and the operators and kernels
registered with torch's dispatcher. Modules a task imported are not a change: a module imported
once behaves the same for the next task.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable

from . import fingerprint


@dataclass(frozen=True)
class Snapshot:
    cwd: str
    signals: dict[int, Any]
    sigmask: frozenset[int]
    environ: dict[str, str]
    sys_path: tuple[str, ...]
    sys_hooks: tuple[Any, ...]
    affinity: frozenset[int] | None
    threads: frozenset[int]
    torch_flags: dict[str, Any]
    code: fingerprint.Fingerprint | None = None  # None in the "now" side of a comparison


def _sys_hooks() -> tuple[Any, ...]:
    # Flat, so that the objects compare by identity; the counts keep the two lists apart.
    return (sys.stdout, sys.stderr, sys.stdin, sys.gettrace(), sys.getprofile(), sys.excepthook,
            sys.displayhook, len(sys.meta_path), *sys.meta_path, len(sys.path_hooks), *sys.path_hooks)


def _signals() -> dict[int, Any]:
    out = {}
    for sig in signal.valid_signals():
        try:
            out[int(sig)] = signal.getsignal(sig)
        except (OSError, ValueError):  # not readable on this platform
            continue
    return out


def _sigmask() -> frozenset[int]:
    if not hasattr(signal, "pthread_sigmask"):
        return frozenset()
    return frozenset(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, []))


def _affinity() -> frozenset[int] | None:
    return frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def _threads() -> frozenset[int]:
    main = threading.main_thread()
    return frozenset(t.ident for t in threading.enumerate()
                     if t is not main and not t.daemon and t.is_alive() and t.ident is not None)


def _torch_flags() -> dict[str, Any]:
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    # Lambdas throughout: a getter this torch lacks fails when called, and is then left out.
    b = torch.backends
    getters: dict[str, Callable[[], Any]] = {
        "default dtype": lambda: torch.get_default_dtype(),
        "grad mode": lambda: torch.is_grad_enabled(),
        "inference mode": lambda: torch.is_inference_mode_enabled(),
        "anomaly detection": lambda: torch.is_anomaly_enabled(),
        "intra-op threads": lambda: torch.get_num_threads(),
        "inter-op threads": lambda: torch.get_num_interop_threads(),
        "deterministic algorithms": lambda: torch.are_deterministic_algorithms_enabled(),
        "float32 matmul precision": lambda: torch.get_float32_matmul_precision(),
        "default device": lambda: str(torch.get_default_device()),
        "cuDNN enabled": lambda: b.cudnn.enabled,
        "cuDNN benchmark": lambda: b.cudnn.benchmark,
        "cuDNN deterministic": lambda: b.cudnn.deterministic,
        "cuDNN TF32": lambda: b.cudnn.allow_tf32,
        "cuBLAS TF32": lambda: b.cuda.matmul.allow_tf32,
        "cuBLAS fp16 reduced precision": lambda: b.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuBLAS bf16 reduced precision": lambda: b.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "flash SDPA": lambda: b.cuda.flash_sdp_enabled(),
        "memory-efficient SDPA": lambda: b.cuda.mem_efficient_sdp_enabled(),
        "math SDPA": lambda: b.cuda.math_sdp_enabled(),
        "mkldnn": lambda: b.mkldnn.enabled,
        "torch function modes": lambda: torch._C._len_torch_function_stack(),
        "torch dispatch modes": lambda: torch._C._len_torch_dispatch_stack(),
        # An operator a task registers (torch.library) would clash with the next task's of that name.
        "registered operators": lambda: _OpNames(torch._C._dispatch_get_all_op_names()),
        # A kernel a task registers for an existing operator (torch.library.impl, register_fake)
        # changes what that operator does for every later task; torch keeps their names here.
        "kernels registered with torch.library": lambda: frozenset(torch.library._impls),
    }
    flags = {}
    for name, get in getters.items():
        try:
            flags[name] = get()
        except Exception:  # a getter this torch does not have: nothing to compare
            continue
    return flags


class _OpNames(frozenset):
    """The registered operator names; compared as a set, shown as the names a job added."""

    def __repr__(self) -> str:
        return f"{len(self)} operators"


def snapshot(renew: Callable[[], Any] | None = None) -> Snapshot:
    """The process state that :func:`changes` compares: taken once per worker (the code's
    fingerprint, the bulk of it, takes about a second), compared after every task. ``renew``:
    what the worker runs after every job (:meth:`.fingerprint.Fingerprint.settle`)."""
    code = fingerprint.take()
    if renew is not None:
        code.settle(renew)
    return dataclasses.replace(_state(), code=code)


def _state() -> Snapshot:
    return Snapshot(
        cwd=os.getcwd(), signals=_signals(), sigmask=_sigmask(), environ=dict(os.environ),
        sys_path=tuple(sys.path), sys_hooks=_sys_hooks(), affinity=_affinity(), threads=_threads(),
        torch_flags=_torch_flags(),
    )


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _dict_changes(before: dict[str, Any], after: dict[str, Any], what: str, same=lambda a, b: a == b) -> list[str]:
    changed = sorted(k for k in before if k not in after or not same(before[k], after[k]))
    if not changed:
        return []
    shown = ", ".join(changed[:4]) + (f" (+{len(changed) - 4} more)" if len(changed) > 4 else "")
    return [f"{what}: {shown}"]


def changes(before: Snapshot) -> list[str]:
    """One line per kind of state that differs from ``before``; empty when the process is as it was."""
    now = _state()
    reasons: list[str] = []
    if now.cwd != before.cwd:
        reasons.append(f"working directory changed to {now.cwd}")
    sigs = sorted(s for s in before.signals if now.signals.get(s) != before.signals[s])
    if sigs:
        reasons.append("signal handlers changed: " + ", ".join(_signal_name(s) for s in sigs[:4]))
    if now.sigmask != before.sigmask:
        reasons.append("blocked-signal mask changed")
    env = set(before.environ.items()) ^ set(now.environ.items())
    if env:
        reasons.append("environment changed: " + ", ".join(sorted({k for k, _ in env})[:4]))
    if now.sys_path != before.sys_path:
        reasons.append("sys.path changed")
    if len(now.sys_hooks) != len(before.sys_hooks) or any(
            a is not b and a != b for a, b in zip(now.sys_hooks, before.sys_hooks)):
        reasons.append("sys hooks changed (stdout/stderr, trace, profile, excepthook or import hooks)")
    if now.affinity != before.affinity:
        reasons.append("CPU affinity changed")
    left = now.threads - before.threads
    if left:
        names = [t.name for t in threading.enumerate() if t.ident in left]
        reasons.append(f"{len(left)} non-daemon thread(s) still running: {', '.join(names[:3])}")
    patched = before.code.changes() if before.code is not None else []
    if patched:
        reasons.append("patched: " + ", ".join(patched[:4]) + (f" (+{len(patched) - 4} more)" if len(patched) > 4 else ""))
    ops_key = "registered operators"
    flags_before = {k: v for k, v in before.torch_flags.items() if k != ops_key}
    reasons += _dict_changes(flags_before, now.torch_flags, "torch flags changed")
    ops_before, ops_now = before.torch_flags.get(ops_key, frozenset()), now.torch_flags.get(ops_key, frozenset())
    if ops_before != ops_now:  # named: a task's own library, or torch registering something late
        added, removed = sorted(ops_now - ops_before), sorted(ops_before - ops_now)
        for what, names in (("registered", added), ("removed", removed)):
            if names:
                reasons.append(f"operators {what}: {', '.join(names[:4])}"
                               + (f" (+{len(names) - 4} more)" if len(names) > 4 else ""))
    return reasons
