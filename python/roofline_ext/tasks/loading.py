"""Load a KernelBench-style task file as a module and check that it is one.

A task file defines ``class Model(nn.Module)``, ``get_inputs()`` (the forward arguments) and
``get_init_inputs()`` (the constructor arguments); it may also define ``ModelNew``, a candidate
implementation of the same computation.

**Loading a task file runs it.** It is user code and is executed as an ordinary Python module, with
the same rights as the person running ``roofline-ext``: only analyze task files you would run
yourself. Nothing here sandboxes it; what we do guard against is a task breaking *us*: every failure
(including ``sys.exit`` and other ``BaseException``\\ s, except ``KeyboardInterrupt``) becomes a
one-line :class:`TaskError` naming the file and, where known, the line in it.

Each file is loaded under a module name of its own (``_roofline_task_<n>_<stem>``) so that fifty
files all called ``Model`` in one batch never collide, and so that ``inspect``, ``dataclasses`` and
``pickle`` find the module in ``sys.modules`` while it is in use. :meth:`Task.unload` takes it (and
any sibling modules it imported from its own folder) out again; a batch calls it after each task.

A task file (and a helper module next to it) is always compiled from its source
(:func:`exec_source_module`): no bytecode is read or written for it, so a file rewritten with the
same size and modification time is never run from an old ``.pyc``, and no ``__pycache__`` appears
in the user's folders.

torch is not imported here at module level: ``import roofline_ext`` must stay cheap. It is imported
when a task is checked (the task file itself imports it anyway).
"""
from __future__ import annotations

import contextlib
import importlib.machinery
import itertools
import os
import re
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

from ..errors import UserError

__all__ = ["Task", "TaskError", "load_task", "exec_source_module", "find_task_files", "task_names"]

# Monotonic counter for unique module names: two loads of the same file are two modules.
_serial = itertools.count(1)


class TaskError(UserError):
    """A task file that cannot be loaded, built or run (one line: ``PATH[:LINE]: what went wrong``).

    ``kind`` says which step failed, for machine-readable batch results:
    ``missing``, ``unreadable``, ``syntax``, ``import``, ``exit``, ``no-model``, ``bad-model``,
    ``no-get-inputs``, ``get_init_inputs``, ``get_inputs``, ``init``, ``forward``, ``unsupported-op``.
    """

    def __init__(self, message: str, *, kind: str, path: str | os.PathLike | None = None):
        super().__init__(message)
        self.kind = kind
        self.path = None if path is None else str(path)


def _one_line(text: str, limit: int = 300) -> str:
    """Collapse an exception message to one line, so that batch summaries and CSV cells stay tidy."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Modules whose pip package has another name; for the rest the package is the module's name.
_PIP_NAMES = {"cv2": "opencv-python", "sklearn": "scikit-learn", "PIL": "pillow", "yaml": "pyyaml",
              "skimage": "scikit-image"}


def _missing_module(exc: BaseException) -> str | None:
    """"needs the Python module `m`, which is not installed: pip install m" for a missing import."""
    name = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
    if not name:
        return None
    top = name.split(".")[0]
    return f"needs the Python module `{top}`, which is not installed: pip install {_PIP_NAMES.get(top, top)}"


def describe_exception(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    missing = _missing_module(exc)
    if missing:
        return missing
    msg = _one_line(str(exc))
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def _line_in(path: Path, exc: BaseException) -> int | None:
    """The deepest line of ``path`` in the exception's traceback: where *the task's* code failed."""
    target = os.path.normcase(os.path.abspath(path))
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if os.path.normcase(os.path.abspath(frame.f_code.co_filename)) == target:
            line = lineno
    return line


def located(path: str | os.PathLike, exc: BaseException) -> str:
    """``PATH:LINE``, the deepest line of the task file in the exception's traceback (or ``PATH``)."""
    return _where(Path(path), exc)


def _where(path: Path, exc: BaseException | None = None, line: int | None = None) -> str:
    if line is None and exc is not None:
        line = _line_in(path, exc)
    return f"{path}:{line}" if line else str(path)


@dataclass
class Task:
    """A loaded, checked task file. Calling its functions goes through :meth:`call`, which turns any
    failure into a one-line :class:`TaskError`."""

    path: Path
    name: str
    module: ModuleType
    model_cls: type
    get_inputs_fn: Callable[[], Sequence[Any]]
    get_init_inputs_fn: Callable[[], Sequence[Any]] | None
    model_new_cls: type | None = None
    # Modules this load added to sys.modules that live next to the task file (its own helpers).
    _owned_modules: list[str] = field(default_factory=list, repr=False)

    @property
    def has_model_new(self) -> bool:
        return self.model_new_cls is not None

    def call(self, fn: Callable[..., Any], what: str, kind: str, *args: Any, **kwargs: Any) -> Any:
        """Run user code; map every failure but Ctrl-C to ``TaskError(kind)`` with the task's line."""
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            raise
        except TaskError:
            raise
        except BaseException as exc:  # SystemExit and friends too: a task must not end the batch
            raise TaskError(
                f"{_where(self.path, exc)}: {what} failed: {describe_exception(exc)}", kind=kind, path=self.path
            ) from exc

    def init_inputs(self) -> list[Any]:
        """``get_init_inputs()`` as a list; a task without that function takes no constructor arguments."""
        if self.get_init_inputs_fn is None:
            return []
        value = self.call(self.get_init_inputs_fn, "get_init_inputs()", "get_init_inputs")
        return _as_arg_list(value, self.path, "get_init_inputs()", "get_init_inputs")

    def inputs(self) -> list[Any]:
        value = self.call(self.get_inputs_fn, "get_inputs()", "get_inputs")
        return _as_arg_list(value, self.path, "get_inputs()", "get_inputs")

    def build(self, init_inputs: Sequence[Any], which: str = "Model") -> Any:
        """Construct ``Model`` (or ``ModelNew``) with ``init_inputs``, as KernelBench's harness does."""
        cls = self.model_cls if which == "Model" else self.model_new_cls
        if cls is None:
            raise TaskError(f"{self.path}: defines no {which}", kind="no-model", path=self.path)
        return self.call(cls, f"{which}(*get_init_inputs())", "init", *init_inputs)

    def unload(self) -> None:
        """Drop the task's module (and helper modules from its folder) from ``sys.modules``."""
        for name in [self.module.__name__, *self._owned_modules]:
            sys.modules.pop(name, None)


def _as_arg_list(value: Any, path: Path, what: str, kind: str) -> list[Any]:
    # KernelBench calls Model(*get_init_inputs()) and model(*get_inputs()). A bare tensor would be
    # unpacked along its first dimension there, which is never what the author meant: refuse it.
    if isinstance(value, (list, tuple)):
        return list(value)
    torch = sys.modules.get("torch")
    got = type(value).__name__
    if torch is not None and isinstance(value, torch.Tensor):
        got = "a Tensor (wrap it in a list: [x])"  # not "FakeTensor": that is our doing, not the task's
    raise TaskError(f"{path}: {what} must return a list or tuple, got {got}", kind=kind, path=path)


def _module_name(path: Path) -> str:
    stem = re.sub(r"\W", "_", path.stem) or "task"
    return f"_roofline_task_{next(_serial)}_{stem}"


def _is_under(module: ModuleType, folder: str) -> bool:
    f = getattr(module, "__file__", None)
    if not f:
        return False
    try:
        return os.path.commonpath([os.path.abspath(f), folder]) == folder
    except ValueError:  # different drives on Windows
        return False


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles a module from its source every time: never reads a ``.pyc`` (one left by a file of
    the same size and mtime, as ``cp -p``, ``rsync -a`` or ``tar x`` make, would be taken for the
    new source) and never writes one (no ``__pycache__`` beside the user's files)."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return compile(self.get_data(path), path, "exec", dont_inherit=True)


class _FolderFinder:
    """Finds the modules of one folder (a task's helpers) with :class:`_SourceOnlyLoader`; first on
    ``sys.meta_path`` while the task imports."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._top = importlib.machinery.FileFinder(folder, (_SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES))

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if path is None:
            return self._top.find_spec(name, target)
        for entry in path:  # a submodule: only of a package inside the folder
            if _inside(entry, self.folder):
                finder = importlib.machinery.FileFinder(entry, (_SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES))
                spec = finder.find_spec(name, target)
                if spec is not None:
                    return spec
        return None


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([os.path.abspath(path), folder]) == folder
    except ValueError:  # different drives on Windows
        return False


def exec_source_module(path: str | os.PathLike, name: str) -> ModuleType:
    """Run the file at ``path`` as the module ``name``, compiled from its source, as ``python FILE``
    would: its folder first on ``sys.path`` while it runs, and helper modules of that folder
    compiled from source too. No bytecode is read or written, for it or for them.

    The module is in ``sys.modules[name]`` while it runs and after (``inspect``, ``dataclasses`` and
    ``pickle`` look for it there); whatever the file raises is raised, with the module taken out
    again. The caller words the failure (:func:`load_task` makes it a :class:`TaskError`).
    """
    p = Path(path)
    source = p.read_bytes()
    module = ModuleType(name)
    spec = importlib.machinery.ModuleSpec(name, None, origin=str(p))
    spec.has_location = True
    module.__spec__, module.__file__, module.__loader__ = spec, str(p), None
    folder = os.path.abspath(p.parent)
    finder = _FolderFinder(folder)
    saved_path = list(sys.path)
    sys.path.insert(0, folder)
    sys.meta_path.insert(0, finder)
    sys.modules[name] = module
    try:
        exec(compile(source, str(p), "exec", dont_inherit=True), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        sys.path[:] = saved_path
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
    return module


def load_task(path: str | os.PathLike, *, forget_helpers: bool = True) -> Task:
    """Import ``path`` as a module of its own and check that it is a task. **Runs the file's code.**

    Raises :class:`TaskError` (a ``UserError``) with a one-line message for: a missing or unreadable
    file, a syntax error (with its line), an exception or ``sys.exit`` while importing, no ``Model``
    class (or one that is not an ``nn.Module``), and no callable ``get_inputs``. A missing
    ``get_init_inputs`` means "no constructor arguments".

    ``forget_helpers=False``: the caller's process ends with this task (a counting worker that runs
    one job and exits), so :meth:`Task.unload` need not forget the helper modules the task imported
    from its folder, and ``sys.modules`` is not listed before and after the import to find them. In
    a fresh fork of the worker server that listing is most of the load: it writes to the reference
    count of every module name, ~1,400 pages copied on write, 7-10 ms of a 35 ms count.
    """
    p = Path(path)
    if not p.exists():
        raise TaskError(f"{p}: no such file", kind="missing", path=p)
    if p.is_dir():
        raise TaskError(f"{p}: is a directory, not a task file", kind="missing", path=p)
    if not os.access(p, os.R_OK):
        raise TaskError(f"{p}: cannot be read (permission denied)", kind="unreadable", path=p)
    if not p.is_file():
        raise TaskError(f"{p}: not a regular file (a FIFO or a device would block or never end)",
                        kind="unreadable", path=p)

    name = _module_name(p)
    folder = os.path.abspath(p.parent)
    before = set(sys.modules) if forget_helpers else None
    try:
        module = exec_source_module(p, name)
    except KeyboardInterrupt:
        raise
    except SyntaxError as exc:
        where = f"{exc.filename or p}:{exc.lineno}" if exc.lineno else str(exc.filename or p)
        raise TaskError(f"{where}: syntax error: {_one_line(exc.msg)}", kind="syntax", path=p) from exc
    except BaseException as exc:
        kind = "exit" if isinstance(exc, SystemExit) else "import"
        what = _missing_module(exc) or f"loading failed: {describe_exception(exc)}"
        raise TaskError(f"{_where(p, exc)}: {what}", kind=kind, path=p) from exc
    # Helper modules imported from the task's folder are the task's: forget them with it, so that a
    # batch over two folders that each have a `utils.py` does not hand the second task the first's.
    owned = [] if before is None else [
        m for m in set(sys.modules) - before - {name}
        if sys.modules.get(m) is not None and _is_under(sys.modules[m], folder)
    ]
    try:
        return _check(p, module, owned)
    except TaskError:
        for m in [name, *owned]:
            sys.modules.pop(m, None)
        raise


def _check(p: Path, module: ModuleType, owned: list[str]) -> Task:
    import torch  # the task imported it already; this only binds the name

    ns = vars(module)
    model_cls = ns.get("Model")
    if model_cls is None:
        raise TaskError(
            f"{p}: defines no `Model` (a task file defines class Model(nn.Module), get_inputs() and "
            f"get_init_inputs())", kind="no-model", path=p,
        )
    if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
        raise TaskError(
            f"{p}: `Model` must be a torch.nn.Module subclass, got {type(model_cls).__name__}",
            kind="bad-model", path=p,
        )
    get_inputs = ns.get("get_inputs")
    if not callable(get_inputs):
        raise TaskError(
            f"{p}: defines no `get_inputs()` function (it returns the forward arguments)",
            kind="no-get-inputs", path=p,
        )
    get_init_inputs = ns.get("get_init_inputs")
    if get_init_inputs is not None and not callable(get_init_inputs):
        raise TaskError(f"{p}: `get_init_inputs` is not a function", kind="no-get-inputs", path=p)
    model_new = ns.get("ModelNew")
    if model_new is not None and not (isinstance(model_new, type) and issubclass(model_new, torch.nn.Module)):
        raise TaskError(
            f"{p}: `ModelNew` must be a torch.nn.Module subclass, got {type(model_new).__name__}",
            kind="bad-model", path=p,
        )
    return Task(
        path=p,
        name=p.stem,
        module=module,
        model_cls=model_cls,
        get_inputs_fn=get_inputs,
        get_init_inputs_fn=get_init_inputs,
        model_new_cls=model_new,
        _owned_modules=owned,
    )


def _natural(path: Path) -> list:
    # the way a person sorts: 2_x.py before 10_x.py, folder by folder
    return [[int(s) if s.isdigit() else s.lower() for s in re.split(r"(\d+)", part)] for part in path.parts]


def _hidden(name: str) -> bool:
    return name.startswith((".", "_"))


def _task_folder(root: str, name: str) -> bool:
    # not .git, __pycache__ or _private, and not a virtual environment's or an installed package's
    return not _hidden(name) and name not in ("site-packages", "node_modules") and not (
        Path(root, name, "pyvenv.cfg").exists())


def find_task_files(folder: str | os.PathLike) -> list[Path]:
    """The task files of a folder (e.g. a KernelBench level), and of its sub-folders (KernelBench's
    ``KernelBench/`` with ``level1/`` … inside): every ``*.py``, sorted the way a person would
    (``2_x.py`` before ``10_x.py``), skipping ``__init__.py`` and hidden/underscore files and folders."""
    d = Path(folder)
    files = []
    for root, dirs, names in os.walk(d):
        dirs[:] = [x for x in dirs if _task_folder(root, x)]
        # Regular files only: a FIFO or device named x.py would block or never end when read.
        files += [Path(root) / n for n in names
                  if n.endswith(".py") and not _hidden(n) and (Path(root) / n).is_file()]
    return sorted(files, key=lambda f: _natural(f.relative_to(d)))


def task_names(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Names for the results of a batch: each file's path relative to the folder the batch shares,
    without ``.py`` (``level1/19_ReLU``); for files of one folder, their stems, as before."""
    if not paths:
        return []
    ps = [Path(p).absolute() for p in paths]
    root = Path(os.path.commonpath([str(p.parent) for p in ps]))
    return [p.relative_to(root).with_suffix("").as_posix() for p in ps]
