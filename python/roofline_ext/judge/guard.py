"""What the candidate must not touch: a fingerprint taken before its import, checked again later.

A candidate runs in the judge's process (its kernels need the same CUDA context), so it could
replace what the judge and the timer call: ``torch.allclose``, ``torch.cuda.Event.elapsed_time``,
``torch.cuda.Event`` itself, a tensor method, this package's comparison function (or only its
``__code__``), the reference model's ``forward`` or its weights. :meth:`Guard.take` records, before
the candidate is imported, the identity of every callable (and of its code, defaults and
closure) in the namespaces that matter, the hooks and modes torch and Python consult on every call,
the reference model's parameters, and the threads and child processes alive. :meth:`Guard.check`
lists every difference, each a one-line reason; any one makes the candidate *invalid*. It is run
before each comparison and before and after the timing, so a patch that is undone "after the
check" is seen at the check.

Names a namespace *gains* are not a change (torch imports submodules lazily), nor are modules the
candidate imported: nothing of the judge calls them.

An audit hook (:func:`arm_audit`) also records, while candidate code runs, calls that read the
harness instead of computing: walking the garbage collector (``gc.get_objects``,
``gc.get_referrers``, ``gc.get_referents``) and other threads' frames (``sys._current_frames``).
"""
from __future__ import annotations

import gc
import operator
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from types import FunctionType, ModuleType
from typing import Any, Iterable

import torch

from ..device.native import core_or_none, cuda_function

# Module-name prefixes whose namespaces are fingerprinted: torch's, ours, and the standard library
# the judge and the timer run on.
_MODULE_PREFIXES = ("torch", "roofline_ext")
_STDLIB = ("builtins", "gc", "time", "math", "statistics", "threading", "os", "sys", "json", "secrets",
           "random", "functools", "itertools", "operator", "copy", "inspect", "traceback",
           "contextlib", "struct", "pickle", "socket", "signal", "dataclasses", "numpy")
# torch submodules that are data (op tables, generated docs), large and never what a judge calls.
_SKIP = ("torch._refs", "torch._decomp", "torch._prims", "torch.testing._internal", "torch._dynamo",
         "torch._inductor", "torch.fx", "torch.onnx", "torch._export", "torch.export", "torch.distributed",
         "torch._functorch", "torch.ao", "torch.package", "torch.utils.data", "torch.utils.tensorboard")
_AUDITED = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"})


def _is_watched(value: Any) -> bool:
    return callable(value) or isinstance(value, (staticmethod, classmethod, property))


def _is_bound(value: Any, own: bool) -> bool:
    """Whether a module's binding of ``value`` is watched: callables and submodules everywhere
    (``torch.cuda = fake_module`` swaps every ``torch.cuda.Event`` the judge makes), and in this
    package's own modules every binding but ``None`` (its thresholds and tables: a candidate that
    sets ``streams._TRIGGER_FRACTION = 1e9`` has switched off the all-stream check; ``None`` is
    what a lazily made cache starts as)."""
    return _is_watched(value) or isinstance(value, ModuleType) or (own and value is not None)


def _functions_in(value: Any) -> list[FunctionType]:
    """The Python functions behind a namespace entry, whose code a patch can swap in place."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if isinstance(f, FunctionType)]
    return [value] if isinstance(value, FunctionType) else []


def _wanted(name: str) -> bool:
    if name.startswith(_SKIP):
        return False
    return name.split(".")[0] in _MODULE_PREFIXES or name in _STDLIB


@dataclass
class Fingerprint:
    """Each watched namespace (a module's or a class's live dict) with the callables it held, and
    each distinct Python function with its code, defaults and closure.

    Checking is a C-level subset test per namespace (``saved.items() <= live.items()``; a binding
    that changed fails it), the audit hook's log of writes to the functions' code and defaults,
    and an identity pass over what a write to no attribute can change: the callables in the
    functions' closure cells (``f.__closure__[0].cell_contents = cheat`` swaps what a decorator's
    wrapper calls, and is not audited) and the contents of their keyword-default dicts. It costs
    milliseconds and runs before every comparison and around every timing."""

    spaces: list[tuple[str, Any, dict[str, Any]]]
    functions: dict[int, tuple[FunctionType, Any, Any, Any, Any]]
    modules: set[str] = field(default_factory=set)
    modules_classes_done: set[str] = field(default_factory=set)
    # With the audit hook installed: the function changes found when this fingerprint was taken,
    # and where in the hook's log of function-attribute writes its own watch begins (None: no
    # hook, every function is compared at every check).
    at_take: list[str] = field(default_factory=list)
    audited_from: int | None = None
    # Closure cells that held a callable, what each held, and whose they are; each keyword-default
    # dict with a copy of it.
    cells: list[Any] = field(default_factory=list)
    cell_values: list[Any] = field(default_factory=list)
    cell_owners: list[str] = field(default_factory=list)
    kwdefaults: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    # Each watched class with the size and the names of its dict: a name a class gains is a change
    # when it shadows one of a base class (``torch.Tensor.add = cheat`` leaves TensorBase.add as it
    # was and adds a name to Tensor's dict that every tensor now finds first).
    class_keys: list[tuple[str, type, Any, int, frozenset[str]]] = field(default_factory=list)

    @classmethod
    def take(cls, extra: Iterable[tuple[str, Any]] = ()) -> "Fingerprint":
        """The watched namespaces now. The modules' part is taken once per process and reused (a
        worker that judged a candidate as correct checked it unchanged at the end of the job, and
        one that did not is replaced), so a later take scans only modules loaded since."""
        global _BASE
        if _BASE is None:
            _BASE = cls([], {}, audited_from=_log_size() if _installed else None)
            _BASE._add_modules()
        fp = cls(list(_BASE.spaces), dict(_BASE.functions), set(_BASE.modules), cells=list(_BASE.cells),
                 cell_values=list(_BASE.cell_values), cell_owners=list(_BASE.cell_owners),
                 kwdefaults=list(_BASE.kwdefaults), class_keys=list(_BASE.class_keys),
                 modules_classes_done=set(_BASE.modules_classes_done))
        fp._add_modules()
        classes: dict[int, tuple[str, type]] = {}
        for label, obj in extra:
            if isinstance(obj, type):
                classes.setdefault(id(obj), (label, obj))
            elif isinstance(obj, dict):
                fp._add(label, obj, {k: v for k, v in obj.items() if _is_watched(v)})
        for label, c in classes.values():
            fp._add_class(label, c)
        if _installed:
            # From now on the hook's log says what was written: reading __code__ raises an audit
            # event itself, so comparing 9,000 functions cost 20-30 ms on a 2-core VM, at every
            # check (a dozen per candidate) and then still once per take. Now only the functions
            # the log shows written since the base was taken (the hook was in before it) are
            # compared with the base; the rest cannot differ, and those this take added are fresh.
            fp.audited_from = _log_size()
            written = None
            if _BASE.audited_from is not None:
                written = {fid for fid, _, _ in _writes_since(_BASE.audited_from)}
            fp.at_take = fp._function_changes(written)
        return fp

    def _add_modules(self) -> None:
        classes: dict[int, tuple[str, type]] = {}
        legacy = _legacy_types()
        for name, mod in list(sys.modules.items()):
            if name in self.modules or mod is None or not _wanted(name):
                continue
            live = getattr(mod, "__dict__", None)
            if not isinstance(live, dict):
                continue
            self.modules.add(name)
            own = name.split(".")[0] == "roofline_ext"
            saved = {k: v for k, v in list(live.items()) if _is_bound(v, own)}
            self._add(name, live, saved)
            for k, v in saved.items():
                if isinstance(v, type) and getattr(v, "__module__", None) == name and v not in legacy:
                    classes.setdefault(id(v), (f"{name}.{k}", v))
        if "torch" not in self.modules_classes_done:
            self.modules_classes_done.add("torch")
            core: tuple[type, ...] = (torch.Tensor, torch._C.TensorBase, torch.nn.Module, torch.cuda.Event,
                                      torch.cuda.Stream)
            for c in core:
                classes.setdefault(id(c), (f"{c.__module__}.{c.__qualname__}", c))
        for label, c in classes.values():
            self._add_class(label, c)

    def _add_class(self, label: str, c: type) -> None:
        live = vars(c)
        self._add(label, live, {k: v for k, v in live.items() if _is_watched(v)})
        self.class_keys.append((label, c, live, len(live), frozenset(live)))

    def _add(self, label: str, live: Any, saved: dict[str, Any]) -> None:
        self.spaces.append((label, live, saved))
        for v in saved.values():
            for f in _functions_in(v):
                if id(f) not in self.functions:
                    self.functions[id(f)] = (f, f.__code__, f.__defaults__, f.__kwdefaults__, f.__closure__)
                    self._add_contents(f)

    def _add_contents(self, f: FunctionType) -> None:
        owner = f"{f.__module__}.{f.__qualname__}"
        for cell in f.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # empty until the enclosing function assigns it
                continue
            if _is_watched(value):
                self.cells.append(cell)
                self.cell_values.append(value)
                self.cell_owners.append(owner)
        if f.__kwdefaults__:
            self.kwdefaults.append((owner, f.__kwdefaults__, dict(f.__kwdefaults__)))

    def changes(self) -> list[str]:
        out = []
        for label, live, saved in self._changed_spaces():
            out += [f"{label}.{k} was replaced or removed" for k, v in saved.items()
                    if live.get(k, _MISSING) is not v]
        out += self._content_changes()
        out += self._shadowing()
        if self.audited_from is None:
            return out + self._function_changes()
        return out + self.at_take + _written(_writes_since(self.audited_from), self.functions)

    def _shadowing(self) -> list[str]:
        out = []
        for label, c, live, n, keys in self.class_keys:
            if len(live) == n:  # a name gained and an unwatched one deleted in one go is not seen
                continue
            for k in sorted(set(live) - keys):
                if any(k in vars(b) for b in c.__mro__[1:]):
                    out.append(f"{label}.{k} was added over the one it inherits")
        return out

    def _changed_spaces(self) -> list[tuple[str, Any, dict[str, Any]]]:
        """The namespaces that no longer hold every saved binding: in one native pass where the core
        has it (csrc/judge_fingerprint.cpp, a sixth of the time), else a subset test per namespace."""
        native = _changed_spaces_native()
        if native is not None:
            pairs = [(live, saved) for _, live, saved in self.spaces]
            return [self.spaces[i] for i in native(pairs)]
        return [space for space in self.spaces if not self._subset_same(space[1], space[2])]

    @staticmethod
    def _subset_same(live: Any, saved: dict[str, Any]) -> bool:
        try:
            return saved.items() <= live.items()
        except Exception:  # a value with an odd __eq__: changed (the native pass says the same)
            return False

    def _content_changes(self) -> list[str]:
        out = []
        try:
            live = list(map(_CELL_CONTENTS, self.cells))
        except ValueError:  # a cell emptied since: find it one by one
            live = [_cell_value(c) for c in self.cells]
        if any(map(operator.is_not, live, self.cell_values)):
            out += list(dict.fromkeys(f"{owner}: a callable in its closure was replaced" for owner, a, b in
                                      zip(self.cell_owners, live, self.cell_values) if a is not b))
        out += [f"{owner}: its keyword defaults were changed in place" for owner, d, saved in self.kwdefaults
                if d != saved]
        return out

    def _function_changes(self, only: set[int] | None = None) -> list[str]:
        """The functions (all, or those whose id is in ``only``) whose code, defaults or closure is
        not what was saved."""
        saved = self.functions.values() if only is None else [self.functions[i] for i in only if i in self.functions]
        return [f"{f.__module__}.{f.__qualname__}: its code, defaults or closure changed"
                for f, code, defaults, kwdefaults, closure in saved
                if f.__code__ is not code or f.__defaults__ is not defaults or f.__kwdefaults__ is not kwdefaults
                or f.__closure__ is not closure]

    def size(self) -> int:
        return sum(len(s) for _, _, s in self.spaces)


_MISSING = object()
_BASE: Fingerprint | None = None
_CELL_CONTENTS = operator.attrgetter("cell_contents")


def _changed_spaces_native() -> Any:
    core = core_or_none()
    return getattr(core, "judge_changed_spaces", None) if core is not None else None


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _MISSING


def _written(log: list[tuple[int, str, str]], functions: dict[int, Any]) -> list[str]:
    """The writes in ``log`` to any of ``functions``, one line each (a patch and its undoing: one)."""
    return list(dict.fromkeys(f"{name}: its {attr[2:-2]} was replaced" for fid, name, attr in log if fid in functions))


def _legacy_types() -> frozenset[type]:
    """``torch.FloatTensor``, ``torch.cuda.HalfTensor`` and the 36 others: legacy constructors whose
    class dicts (686 entries each, half of everything watched) no tensor and no judge code looks
    up; their bindings in torch's namespaces stay watched."""
    return frozenset(getattr(torch, "_tensor_classes", ()))


def _hooks() -> dict[str, Any]:
    """The process-wide hooks and modes every call may pass through."""
    from torch.nn.modules import module as nn_module

    hooks: dict[str, Any] = {
        "sys.trace": sys.gettrace(), "sys.profile": sys.getprofile(),
        "threading.trace": threading.gettrace() if hasattr(threading, "gettrace") else None,
        "torch function modes": torch._C._len_torch_function_stack(),
        "torch dispatch modes": torch._C._len_torch_dispatch_stack(),
    }
    # Numerics flags: a candidate that turns TF32 or reduced-precision reductions on would make the
    # reference (which runs after it) as imprecise as itself.
    cuda_mm, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    hooks.update({
        "torch flag float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch flag cuda.matmul.allow_tf32": cuda_mm.allow_tf32,
        "torch flag cuda.matmul.allow_fp16_reduced_precision_reduction": cuda_mm.allow_fp16_reduced_precision_reduction,
        "torch flag cuda.matmul.allow_bf16_reduced_precision_reduction": cuda_mm.allow_bf16_reduced_precision_reduction,
        "torch flag cudnn.allow_tf32": cudnn.allow_tf32, "torch flag cudnn.enabled": cudnn.enabled,
        "torch flag deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "torch flag default dtype": str(torch.get_default_dtype()),
        "torch flag cudnn.benchmark": cudnn.benchmark, "torch flag cudnn.deterministic": cudnn.deterministic,
    })
    for name in ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled", "cudnn_sdp_enabled",
                 "fp16_bf16_reduction_math_sdp_allowed"):
        flag = getattr(torch.backends.cuda, name, None)
        if flag is not None:
            hooks[f"torch flag cuda.{name}"] = flag()
    # Kernels registered in Python for torch's own operators (``torch.library.Library("aten",
    # "IMPL").impl("_softmax", cheat, "CUDA")``): the reference's forward runs on the dispatcher
    # too, so such an override makes the reference compute the candidate's answer. Registrations in
    # other namespaces are not a change: the candidate's own custom ops, and the prims that
    # torch.compile's first use registers (46 of them, 2026-12-02, torch 2.13; it registered no
    # aten kernel). C++ registrations from a compiled extension are not seen here (docs/scoring.md).
    hooks["torch.library kernels for aten operators"] = frozenset(
        k for k in getattr(torch.library, "_impls", ()) if k.startswith("aten/"))
    # The current CUDA stream and device: left changed, the judge's events would record on the
    # candidate's stream (read only once CUDA is up: reading it must not initialise CUDA).
    if torch.cuda.is_initialized():
        dev = torch.cuda.current_device()
        hooks["torch.cuda current device and stream"] = (dev, torch.cuda.current_stream(dev).cuda_stream)
    for name in dir(nn_module):
        if name.startswith("_global_") and name.endswith("hooks"):
            hooks[f"torch.nn global {name[8:]}"] = tuple(getattr(nn_module, name).values())
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        hooks["sys.monitoring"] = tuple(monitoring.get_tool(i) for i in range(6))
    # Code that runs inside the judge's own calls without passing through the candidate: a garbage
    # collector callback (every collection), a profile hook for new threads.
    hooks["gc.callbacks"] = tuple(gc.callbacks)
    if hasattr(threading, "getprofile"):
        hooks["threading.profile"] = threading.getprofile()
    # A Python signal handler runs between any two bytecodes of the main thread, the judge's own
    # code included; an interval timer makes it run every few microseconds, so it could patch right
    # after a check and restore before the next (a namespace rebinding leaves no audit record). The
    # handlers and whether a timer is armed (its remaining time changes, so not the values) are
    # part of the fingerprint; so are the hooks Python calls on an exception inside the judge's code
    # (an exception in a __del__ of the candidate's runs sys.unraisablehook).
    hooks["signal handlers"] = _signal_handlers()
    hooks["signal interval timers armed"] = tuple(
        signal.getitimer(w) != (0.0, 0.0) for w in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF))
    hooks["sys.excepthook"], hooks["sys.unraisablehook"] = sys.excepthook, sys.unraisablehook
    hooks["threading.excepthook"] = threading.excepthook
    return hooks


def _signal_handlers() -> tuple[Any, ...]:
    out = []
    for sig in sorted(signal.valid_signals()):
        try:
            out.append(signal.getsignal(sig))
        except (ValueError, OSError):  # a signal Python cannot report
            out.append(None)
    return tuple(out)


def _children() -> set[int]:
    """Child processes of this one that are still running (zombies have ended)."""
    me, out = os.getpid(), set[int]()
    try:
        tids = os.listdir(f"/proc/{me}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{me}/task/{tid}/children") as f:
                out.update(int(p) for p in f.read().split())
        except OSError:
            continue
    alive = set()
    for pid in out:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            alive.add(pid)
    return alive


def _threads() -> dict[int, str]:
    return {t.ident: t.name for t in threading.enumerate() if t.ident is not None and t.is_alive()}


def _module_state(model: Any) -> dict[str, Any]:
    """The reference model's code, hooks and weights, so a candidate cannot make it agree with itself."""
    if not isinstance(model, torch.nn.Module):
        return {}
    out: dict[str, Any] = {}
    for name, m in model.named_modules():
        fwd = type(m).forward
        out[f"{name or 'model'}.forward"] = (type(m), vars(m).get("forward"), fwd,
                                              getattr(fwd, "__code__", None))
        out[f"{name or 'model'}.hooks"] = tuple(len(getattr(m, h, {})) for h in (
            "_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_state_dict_hooks"))
    with torch.no_grad():
        for name, t in [*model.named_parameters(), *model.named_buffers()]:
            out[f"{name} (weights)"] = (t.data_ptr(), t.dtype, tuple(t.shape), digest(t))
    return out


def digest(t: torch.Tensor) -> tuple[Any, ...]:
    """What changes when a tensor's values do (a candidate writing zeros, or copying): on a GPU
    with the native core, a 64-bit checksum of its bytes in one pass (csrc/judge_stats.cu: every
    bit counts, at memory speed; the float64 sums took 10 ms per 6 GiB on an H200 and run twice per
    input set); else two float64 sums, one of them order-sensitive."""
    if t.numel() == 0:
        return (0.0, 0.0)
    checksum = cuda_function("judge_checksum") if t.is_cuda else None
    if checksum is not None:
        c = t.detach().contiguous()
        dev = c.device.index if c.device.index is not None else torch.cuda.current_device()
        return ("checksum", checksum(c.data_ptr(), c.numel() * c.element_size(),
                                     torch.cuda.current_stream(dev).cuda_stream, dev))
    flat = t.detach().reshape(-1)
    if flat.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    w = torch.arange(1, 1 + min(flat.numel(), 4099), device=flat.device, dtype=torch.float64)
    head = float((flat[: w.numel()].to(torch.float64) * w).sum())  # order-sensitive on the first elements
    return (float(flat.sum(dtype=torch.float64)), head)


@dataclass
class Guard:
    """The fingerprint of one candidate's surroundings; :meth:`check` returns what changed."""

    fingerprint: Fingerprint
    hooks: dict[str, Any]
    model: dict[str, Any]
    threads: dict[int, str]
    children: set[int]
    reference: Any = None
    audit_from: int = 0

    @classmethod
    def take(cls, reference: Any = None, extra: Iterable[tuple[str, Any]] = ()) -> "Guard":
        """Before the candidate is imported: every identity, hook, weight, thread and child now."""
        extra = tuple(extra)
        if reference is not None:
            extra += tuple((f"reference {type(m).__qualname__}", type(m)) for m in _modules_of(reference))
        arm_audit()
        return cls(Fingerprint.take(extra), _hooks(), _module_state(reference), _threads(), _children(),
                   reference, _log_size())

    def check(self, where: str) -> list[str]:
        """Every change since :meth:`take`, as one-line reasons (empty: nothing changed)."""
        reasons = self.fingerprint.changes()
        try:  # read through what the candidate may have replaced: a failure to read is a change too
            hooks = _hooks()
            reasons += [f"{name} changed" for name in self.hooks
                        if not _same((self.hooks[name],), (hooks.get(name),))]
            state = _module_state(self.reference)
            reasons += [f"the reference model's {name} changed" for name, v in self.model.items()
                        if state.get(name) != v]
        except Exception as exc:  # noqa: BLE001 - any failure here is the candidate's doing
            reasons.append(f"the judge's hooks or the reference model could not be read ({type(exc).__name__}: "
                           f"{exc})")
        new_threads = {i: n for i, n in _threads().items() if i not in self.threads}
        if new_threads:
            reasons.append(f"thread(s) started and still running: {', '.join(sorted(new_threads.values()))}")
        children = _children() - self.children
        if children:
            reasons.append(f"child process(es) still running: {', '.join(map(str, sorted(children)))}")
        reasons += [f"called {event}" for event in _inspections_since(self.audit_from)]
        return [f"{where}: {r}" for r in reasons]


def _modules_of(model: Any) -> list[Any]:
    return list(model.modules()) if isinstance(model, torch.nn.Module) else []


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y or (type(x) is type(y) and _eq_plain(x, y)) for x, y in zip(a, b))


def _eq_plain(x: Any, y: Any) -> bool:
    # Numbers, strings, frozensets and tuples of them compare by value (hook counts, registration
    # names); everything else by identity.
    if isinstance(x, (int, float, str, bool, type(None), frozenset)):
        return x == y
    if isinstance(x, tuple):
        return _same(x, y)
    return False


# --- the audit hook --------------------------------------------------------------------------------

# One log, append-only, of what the hook saw since it was installed, as (event, function id or 0,
# module.qualname, attribute):
# * every write of a Python function's code, defaults or keyword defaults: CPython raises
#   "object.__setattr__" for each (and "object.__delattr__" for setting the defaults to None), on
#   any thread, however it is written (``f.__code__ = ...``, the descriptor,
#   ``object.__setattr__``); __closure__ cannot be written at all, though its cells' contents can
#   (Fingerprint compares those). The watched functions are held by the fingerprints, so an id
#   here is theirs;
# * the calls that read the harness (``_AUDITED``) and audit hooks added later.
# Where the native core has it (csrc/judge_audit.cpp) the hook and the log are C: nothing in Python
# can remove the one or edit the other, and no audited event costs a Python call. Otherwise this
# module's hook keeps the log in ``_LOG``.
_LOG: list[tuple[str, int, str, str]] = []
_FUNCTION_SLOTS = frozenset(("__code__", "__defaults__", "__kwdefaults__"))
_armed = threading.local()
_installed = False
_judge_thread: int | None = None
_native: Any = None  # the core's audit functions, once its hook is in


def arm_audit() -> None:
    """Install the audit hook once per process (audit hooks cannot be removed): the native core's
    where it has one, else this module's. The thread that installs it is the judge's."""
    global _installed, _judge_thread, _native
    if not _installed:
        _judge_thread = threading.get_ident()
        core = core_or_none()
        if core is not None and hasattr(core, "judge_audit_install") and core.judge_audit_install():
            _native = core
        else:
            sys.addaudithook(_audit)
        _installed = True


def _log_size() -> int:
    return int(_native.judge_audit_size()) if _native is not None else len(_LOG)


def _log_since(start: int) -> list[tuple[str, int, str, str]]:
    return [tuple(e) for e in _native.judge_audit_since(start)] if _native is not None else _LOG[start:]


def _writes_since(start: int) -> list[tuple[int, str, str]]:
    """(function id, name, attribute) of every function write logged from ``start`` on."""
    return [(fid, name, attr) for _, fid, name, attr in _log_since(start) if fid]


def _inspections_since(start: int) -> list[str]:
    """Each harness-reading call (or audit hook added) logged from ``start`` on, as a reason. The
    native log has every one, on any thread; this module's hook those made while candidate code
    runs or on a thread other than the judge's (nothing of the judge makes them)."""
    out = []
    for event, fid, _, _ in _log_since(start):
        if fid:
            continue
        if event == "sys.addaudithook":
            # An audit hook of the candidate's would run on every audited event of the judge's own
            # code from then on (reading a function's __code__ is one): code where no check looks.
            out.append(event + " (the candidate installed an audit hook, which runs inside the judge's code)")
        else:
            out.append(event + " (the candidate read the harness's objects instead of computing)")
    return out


def _candidate_running() -> bool:
    return getattr(_armed, "on", False) or threading.get_ident() != _judge_thread


class candidate_code:
    """``with candidate_code():`` around every call into the candidate: audited events are logged."""

    def __enter__(self) -> None:
        _armed.on = True

    def __exit__(self, *exc: Any) -> None:
        _armed.on = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in ("object.__setattr__", "object.__delattr__"):  # ``f.__defaults__ = None`` is a delete
        if len(args) > 1 and args[1] in _FUNCTION_SLOTS and isinstance(args[0], FunctionType):
            f = args[0]
            _LOG.append((event, id(f), f"{f.__module__}.{f.__qualname__}", args[1]))
        return
    if (event == "sys.addaudithook" or event in _AUDITED) and _candidate_running():
        _LOG.append((event, 0, "", ""))


def collect() -> None:
    """A full collection, so that freed harness tensors are not found by a later candidate's walk."""
    gc.collect()
