"""A fingerprint of the code every loaded module holds, to tell whether a task changed it.

A reused worker runs one task after another, so a task that patches ``torch.nn.Linear.forward``,
``torch.Tensor.__matmul__``, ``torch._C._nn.linear``, a counting helper of this package or
``json.dumps`` would change what every later task in the worker counts. A hand list of names to
watch always misses the next one, so the fingerprint covers the whole loaded module set instead:

* every **module** in ``sys.modules`` when it is taken (torch and its ``_C``, this package, the
  standard library, what torch imports): every name in its namespace;
* every mutable **class** those namespaces hold (and the classes nested in them): its
  ``__dict__``, so a method replaced, removed or *added* (``Linear.__call__`` would shadow
  ``Module.__call__``) shows; a class that cannot be changed (``Py_TPFLAGS_IMMUTABLETYPE``:
  ``int``, ``torch._C.TensorBase``) has nothing to compare;
* every **Python function** among them, with those inside ``staticmethod``, ``classmethod`` and
  ``property``: its ``__code__``, ``__defaults__``, ``__kwdefaults__`` and ``__dict__`` (the
  objects and their contents) and the callables in its closure cells (what a decorator wrapped);
* every **container** at module level (dicts, lists, sets: registries and hook lists such as
  ``torch.utils.flop_counter.flop_registry`` or ``nn.modules.module._global_forward_hooks``);
* every **torch config module** (``torch._dynamo.config``, ...): each option's value.

Values are compared by identity (``is``), never with ``==``: a task could make an object equal to
anything. The fingerprint keeps every object it saw referenced, so none can be freed and its
address reused. A comparison is one walk of the native core over all of it (``_core.
state_changed_chunks`` and ``state_same_functions``: the C API's dict iteration and function fields,
pointer comparisons only; without the native core, a few passes of ``map(operator.is_, ...)`` in C,
module by module); only a module whose pass differs is looked at name by name (:func:`_diff`).

A difference is a change (one line naming it) unless it is one of these, which a module does to
itself as it runs (:func:`_benign`):

* a name gained whose value is a module: torch imports its submodules lazily;
* outside this package: a value that was None (filled on first use, code too:
  ``torch._opaque_base._FakeScriptObject_cls``); data (no callable, class or descriptor) that is
  an int that grew (a counter: ``FakeTensorMode.cache_hits``), a state object made on first use
  or replaced by a fresh one of its type (``torch.fx.traceback.current_meta``) that held no code,
  or an entry of a module-level container (caches such as ``inspect.modulesbyfile``); any entry
  gained by a container that was not empty when taken (``torch._ops.cached_ops``; hook registries
  start empty, so a hook added counts). A flag (a bool, number or string) that changed counts;
* a config option set to plain data equal to what it was (inductor renews some lists);
* an attribute a function gains: torch marks the functions it meets (dynamo's
  ``__dynamo_disable`` on ``torch.manual_seed``); one replaced or removed counts;
* what the interpreter caches in a namespace (``__warningregistry__``, ``__slotnames__``), and
  what the worker's own reset rebinds after every job (:meth:`Fingerprint.settle`);
* anything in a module imported after the fingerprint was taken (not in it: a module imported once
  behaves the same for the next task).

Benign differences are taken into the fingerprint, so the next comparison is fast again. What it
cannot see is listed in docs/runner.md ("What the fingerprint proves").
"""
from __future__ import annotations

import gc
import sys
import types
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, is_
from typing import Any, Callable, Iterable

from ..device.native import core_or_none

_IMMUTABLE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: the type's dict cannot be written
_OWN = "roofline_ext"  # this package: every value of its modules counts
_FUNC = types.FunctionType
_MISSING = object()
_code, _defaults, _kwdefaults, _fdict = (attrgetter(a) for a in ("__code__", "__defaults__", "__kwdefaults__",
                                                                 "__dict__"))
_contents = attrgetter("cell_contents")


def _own(module_name: str) -> bool:
    return module_name == _OWN or module_name.startswith(_OWN + ".")


@dataclass(eq=False)
class _Space:
    """One namespace: a module's dict, a class's, a module-level container, a function's dict."""

    label: str
    live: Any  # the dict, mappingproxy, list or set itself
    kind: str  # "module", "class", "container", "function"
    own: bool  # of this package
    renewed: set = field(default_factory=set)  # keys the worker's own reset rebinds (Fingerprint.settle)
    size: int = 0  # entries when taken

    def view(self) -> Any:
        """What holds the values, live: a dict's values() view follows the dict."""
        live = self.live
        return live if isinstance(live, (list, set)) else live.values()

    def items(self) -> list[tuple[Any, Any]]:
        live = self.live
        if isinstance(live, list):
            return list(enumerate(live))
        if isinstance(live, set):
            return [(v, v) for v in live]
        return list(live.items())


@dataclass(eq=False)
class _Chunk:
    """The namespaces of one module, compared in one C pass: lengths, then values, then keys."""

    label: str
    spaces: list[_Space]
    views: list[Any] = field(default_factory=list)
    lens: list[int] = field(default_factory=list)
    values: tuple = ()
    keys: tuple = ()
    packed: tuple = ()  # (containers, views, lens, keys, values): what the native check walks

    def take(self) -> None:
        self.views = [s.view() for s in self.spaces]
        self.lens = list(map(len, self.views))
        for space, n in zip(self.spaces, self.lens):
            space.size = n
        self.values = tuple(chain.from_iterable(self.views))
        self.keys = tuple(chain.from_iterable(s.live for s in self.spaces))
        self.packed = ([_container(s.live) for s in self.spaces], self.views, self.lens, self.keys, self.values)

    def same(self) -> bool:
        try:
            return (list(map(len, self.views)) == self.lens
                    and all(map(is_, chain.from_iterable(self.views), self.values))
                    and all(map(is_, chain.from_iterable(s.live for s in self.spaces), self.keys)))
        except RuntimeError:  # changed while read (a thread of torch's): look closer
            return False

    def taken(self) -> Iterable[tuple[_Space, list[tuple[Any, Any]]]]:
        """Each space with its items as taken (lists: by position; sets: member -> member)."""
        at = 0
        for space, n in zip(self.spaces, self.lens):
            keys, values = self.keys[at:at + n], self.values[at:at + n]
            if isinstance(space.live, list):
                keys = tuple(range(n))
            at += n
            yield space, list(zip(keys, values))


@dataclass(eq=False)
class Fingerprint:
    """What :func:`take` saw; :meth:`changes` names what differs now."""

    chunks: list[_Chunk] = field(default_factory=list)
    functions: list[tuple[str, Any]] = field(default_factory=list)  # (label, function)
    parts: list[list[Any]] = field(default_factory=list)  # code, defaults, kwdefaults, dict: one list each
    fns: list[Any] = field(default_factory=list)  # the functions alone, in the order of parts
    cells: list[tuple[str, Any, Any]] = field(default_factory=list)  # (label, cell, its callable)
    cell_objects: list[Any] = field(default_factory=list)
    cell_values: list[Any] = field(default_factory=list)
    configs: list[list[Any]] = field(default_factory=list)  # [module, [(option, entry)], values]
    seen: set[int] = field(default_factory=set)  # ids of every object catalogued
    modules: set[str] = field(default_factory=set)  # names of the modules catalogued

    def extend(self) -> None:
        """Catalogue the modules loaded since the last call (all of them the first time), then take
        every value as it is now. (Each worker takes its own fingerprint, :func:`take`; none is
        inherited from the fork server.)"""
        with _no_gc():
            # Shortest names first: an object is labelled where it is first seen, so a class shows
            # as torch.nn.Linear rather than torch.nn.modules.linear.Linear.
            new = sorted(((n, m) for n, m in list(sys.modules.items()) if n not in self.modules),
                         key=lambda item: (item[0].count("."), len(item[0]), item[0]))
            self.modules.update(n for n, _ in new)
            _catalogue(self, new)
            for chunk in self.chunks:
                chunk.take()
            self.parts = _parts(self.functions)
            self.fns = [f for _, f in self.functions]
            self.cell_objects = [c for _, c, _ in self.cells]
            self.cell_values = _cell_contents(self.cell_objects)
            for config in self.configs:
                config[2] = _config_values(config[1])

    def settle(self, renew: Callable[[], Any]) -> None:
        """Run ``renew``, what the worker itself does after every job (``torch._dynamo.reset()``),
        and leave out of every later comparison the names it rebinds: it puts fresh objects there
        each time (``GenerationTracker.dynamic_classes``, ``compiled_autograd.COMPILE_COUNTER``),
        so whatever a task left in them is gone by the time the next task runs."""
        renew()
        for chunk in self.chunks:
            if not chunk.same():
                for space, key, _, _ in _differences(chunk):
                    space.renewed.add(key)
                chunk.take()

    def changes(self) -> list[str]:
        """One line per changed name (``torch.nn.Linear.forward``), empty when there is none."""
        found: list[str] = []
        for chunk in self.changed_chunks():
            changed = _diff(chunk)
            if not changed:  # only benign differences: the new normal, so the next pass is fast
                chunk.take()
            found += changed
        if not self.same_functions():
            now = _parts(self.functions)
            found += [f"{label} (its code, defaults or attribute dict replaced)" for i, (label, _) in
                      enumerate(self.functions) if any(p[i] is not n[i] for p, n in zip(self.parts, now))]
        values = _cell_contents(self.cell_objects)
        if not all(map(is_, values, self.cell_values)):
            found += [f"{label} (a callable in its closure)"
                      for (label, _, _), a, b in zip(self.cells, values, self.cell_values) if a is not b]
        for label, entries, values in self.configs:
            now_values = _config_values(entries)
            found += [f"{label}.{name} (config set)" for (name, _), a, b in zip(entries, values, now_values)
                      if not _same_option(a, b)]
        return found

    def changed_chunks(self) -> list[_Chunk]:
        """The chunks whose containers no longer hold what was taken: by the native core's walk
        (``state_changed_chunks``, ten times faster), else by :meth:`_Chunk.same`."""
        native = _native("state_changed_chunks")
        if native is None:
            return [c for c in self.chunks if not c.same()]
        return [self.chunks[i] for i in native([c.packed for c in self.chunks])]

    def same_functions(self) -> bool:
        """Every function still runs with the code, defaults, keyword defaults and attribute dict
        taken (the native core's ``state_same_functions``, else :func:`_parts` compared)."""
        native = _native("state_same_functions")
        if native is None:
            return all(all(map(is_, a, b)) for a, b in zip(_parts(self.functions), self.parts))
        return bool(native(self.fns, *self.parts))


# Tests set this to False to run the pure-Python comparison the native one must agree with.
USE_NATIVE = True


def _native(name: str) -> Callable[..., Any] | None:
    """The native core's ``name``, or None (a checkout without its core built, or an older core:
    the Python comparison then)."""
    core = core_or_none() if USE_NATIVE else None
    return getattr(core, name, None) if core is not None else None


def _container(live: Any) -> Any:
    """What holds a space's entries, for the native walk: a class's own dict behind its read-only
    ``__dict__`` proxy (the proxy's one referent; a class's attributes are set in it), else the
    space itself. A proxy whose dict cannot be found stays a proxy, which the walk reads through the
    iteration protocol as the Python comparison does."""
    if type(live) is types.MappingProxyType:
        inner = gc.get_referents(live)
        if len(inner) == 1 and type(inner[0]) is dict:
            return inner[0]
    return live


def _parts(functions: list[tuple[str, Any]]) -> list[list[Any]]:
    """What each function runs with: its code, defaults, keyword defaults and attribute dict."""
    fns = [f for _, f in functions]
    return [list(map(_code, fns)), list(map(_defaults, fns)), list(map(_kwdefaults, fns)), list(map(_fdict, fns))]


def _cell_contents(cells: list[Any]) -> list[Any]:
    try:
        return list(map(_contents, cells))
    except ValueError:  # a cell a task emptied (del of a nonlocal): compare one by one
        out = []
        for c in cells:
            try:
                out.append(c.cell_contents)
            except ValueError:
                out.append(_MISSING)
        return out


def _same_option(a: Any, b: Any) -> bool:
    """A config option's value as before: the same object, or plain data equal to it (inductor
    sets some list options to a fresh list with the same items as it compiles)."""
    if a is b:
        return True
    plain = (list, tuple, dict, set, frozenset, *_SCALARS)
    return type(a) is type(b) and type(a) in plain and _plain(a) and _plain(b) and a == b


def _plain(value: Any) -> bool:
    """Built of plain data only, so that ``==`` runs no code of a task's."""
    if type(value) in (list, tuple, set, frozenset):
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return type(value) in (bool, int, float, complex, str, bytes, type(None))


def _config_values(entries: list[tuple[str, Any]]) -> tuple:
    """Each option's value in effect: what was set, or its default (unset is a bare object())."""
    out = []
    for _, entry in entries:
        try:
            value = entry.user_override.get()
            out.append(entry.default if type(value) is object else value)
        except Exception:  # an entry of another shape (a torch that changed it): not compared
            out.append(None)
    return tuple(out)


# --- what differs, name by name ------------------------------------------------------------------

def _differences(chunk: _Chunk) -> Iterable[tuple[_Space, Any, Any, Any]]:
    """(space, key, value taken, value now) for each difference; _MISSING for no value."""
    for space, before_items in chunk.taken():
        try:
            now = dict(space.items())
        except Exception:  # a container whose items cannot be read any more
            yield space, "(its items)", None, _MISSING
            continue
        before = dict(before_items)
        for key, old in before.items():
            new = now.get(key, _MISSING)
            if new is not old:
                yield space, key, old, new
        for key in now.keys() - before.keys():
            yield space, key, _MISSING, now[key]


def _diff(chunk: _Chunk) -> list[str]:
    found = []
    for space, key, old, new in _differences(chunk):
        if key in space.renewed or _benign(space, key, old, new):
            continue
        what = " (removed)" if new is _MISSING else " (added)" if old is _MISSING else ""
        found.append(_name(space, key) + what)
    return found


def _name(space: _Space, key: Any) -> str:
    if space.kind == "container":
        return f"{space.label}[{_short(key)}]"
    if space.kind == "function":
        return f"{space.label}.__dict__[{_short(key)}]"
    return f"{space.label}.{key}"


def _short(key: Any) -> str:
    try:
        text = repr(key)
    except Exception:
        text = f"<{type(key).__name__}>"
    return text if len(text) <= 80 else text[:79] + "…"


# What the interpreter itself caches in a namespace: the warnings a module gave once
# (``warnings``), the slot names of a class that was copied or pickled (``copyreg``), the empty
# annotations dict Python 3.11 stores in a class the first time someone asks for them.
_INTERPRETER_CACHES = frozenset({"__warningregistry__", "__slotnames__", "__annotations__"})
# Values whose every change is a change of behaviour (a flag, a limit, a name), unlike a cache or
# a state object that a module replaces with a fresh one of the same type as it runs.
_SCALARS = (bool, int, float, complex, str, bytes, type(None))


def _behaves(value: Any) -> bool:
    """A value that is code (a callable, a class, a descriptor) rather than data."""
    t = type(value)
    return value is not _MISSING and (callable(value) or hasattr(t, "__get__") or hasattr(t, "__set__"))


def _benign(space: _Space, key: Any, old: Any, new: Any) -> bool:
    """Whether a difference is one a module makes to itself as it runs (see the module's docs)."""
    if old is _MISSING and isinstance(new, types.ModuleType):
        return True  # a submodule imported lazily
    if old is _MISSING and key in _INTERPRETER_CACHES and space.kind in ("module", "class"):
        return True
    if space.kind == "function" and old is _MISSING:
        return True  # torch marks functions as it meets them (dynamo's __dynamo_disable, say)
    if space.own:
        return False
    if space.kind == "container" and old is _MISSING and space.size:
        # A table torch had filled already, growing (torch._ops.cached_ops). Hook registries
        # (nn.modules.module._global_forward_hooks) start empty: what they gain counts.
        return True
    if old is None:
        return True  # filled on first use (torch._opaque_base._FakeScriptObject_cls)
    if _behaves(old) or _behaves(new):
        return False
    if space.kind == "container":
        return True  # a cache entry: data, not code
    if type(old) is int and type(new) is int and new > old:
        return True  # a counter
    if old is _MISSING:
        return not isinstance(new, _SCALARS)  # state made on first use (sympy's singletons); a flag counts
    # A state object or cache replaced by a fresh one of its type (torch.fx.traceback.current_meta,
    # inductor's per-compile tables), unless it held code (a registry rebound).
    return type(new) is type(old) and not isinstance(old, _SCALARS) and not _holds_code(old)


def _holds_code(value: Any) -> bool:
    if isinstance(value, dict):
        value = value.values()
    elif not isinstance(value, (list, tuple, set, frozenset)):
        return False
    try:
        return any(_behaves(v) for v in value)
    except Exception:  # changed while read: take it as a registry
        return True


# --- taking it ------------------------------------------------------------------------------------

def take() -> Fingerprint:
    """The fingerprint of every module loaded now."""
    fp = Fingerprint()
    fp.extend()
    return fp


class _no_gc:
    """Taking a fingerprint allocates some 300,000 small objects and no cycle; without this the
    collector would walk the whole heap several times meanwhile (half the time it takes)."""

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: Any) -> None:
        if self.was:
            gc.enable()


def _catalogue(fp: Fingerprint, modules: Iterable[tuple[str, Any]]) -> None:
    """Add what ``modules`` hold to the fingerprint (each object once, under its first name)."""
    seen = fp.seen
    first = len(fp.functions)
    for name, module in modules:
        d = _module_dict(module)
        if d is None or id(d) in seen:
            continue
        seen.add(id(d))
        own = _own(name)
        spaces = [_Space(name, d, "module", own)]
        classes: list[tuple[str, Any]] = []
        for key, value in list(d.items()):
            _collect(f"{name}.{key}", value, own, spaces, classes, fp)
        while classes:  # nested classes are found in their owners' dicts
            label, cls = classes.pop()
            spaces.append(_Space(label, cls.__dict__, "class", own))
            for key, value in list(cls.__dict__.items()):
                for fn in _unwrap(value):
                    if type(fn) is _FUNC and id(fn) not in seen:
                        seen.add(id(fn))
                        fp.functions.append((f"{label}.{key}", fn))
                if _mutable_class(value) and id(value) not in seen:
                    seen.add(id(value))
                    classes.append((f"{label}.{key}", value))
        fp.chunks.append(_Chunk(name, spaces))
        config = d.get("_config")
        if isinstance(config, dict) and type(module).__name__ == "ConfigModuleInstance":
            entries = sorted((k, e) for k, e in config.items() if hasattr(e, "user_override"))
            fp.configs.append([name, entries, ()])
    fn_spaces: list[_Space] = []
    for label, fn in fp.functions[first:]:
        if fn.__kwdefaults__:
            fn_spaces.append(_Space(f"{label}.__kwdefaults__", fn.__kwdefaults__, "container", False))
        fn_spaces.append(_Space(label, fn.__dict__, "function", False))  # made here if it had none
        for cell in fn.__closure__ or ():
            value = _cell_contents([cell])[0]
            if value is not _MISSING and callable(value):
                fp.cells.append((label, cell, value))
    fp.chunks.append(_Chunk("function attributes", fn_spaces))


def _module_dict(module: Any) -> dict | None:
    try:
        d = object.__getattribute__(module, "__dict__")  # never a module's own __getattr__
    except Exception:
        return None
    return d if type(d) is dict else None


def _mutable_class(value: Any) -> bool:
    return issubclass(type(value), type) and not value.__flags__ & _IMMUTABLE


def _unwrap(value: Any) -> tuple:
    t = type(value)
    if t is _FUNC:
        return (value,)
    if t is staticmethod or t is classmethod:
        return (value.__func__,)
    if t is property:
        return (value.fget, value.fset, value.fdel)
    return ()


def _collect(label: str, value: Any, own: bool, spaces: list[_Space], classes: list[tuple[str, Any]],
             fp: Fingerprint) -> None:
    """Sort one module-level value into what is compared: never ``isinstance`` (a lazy object's
    ``__class__`` could run code), only its real type."""
    seen = fp.seen
    if id(value) in seen:
        return
    t = type(value)
    if t is _FUNC:
        seen.add(id(value))
        fp.functions.append((label, value))
    elif issubclass(t, type):
        if not value.__flags__ & _IMMUTABLE:
            seen.add(id(value))
            classes.append((label, value))
    elif issubclass(t, (dict, list, set)):
        seen.add(id(value))
        spaces.append(_Space(label, value, "container", own))
