"""The package's layers (docs/architecture.md): a lower layer never imports a higher one.

Every import in every module is found from the source (module level and inside functions alike,
since a function-level import is still an edge), resolved to the module it names, and checked
against the ranks below. Also: no import cycles between modules at module level, no ``except
ImportError`` around an import of a sibling that always ships, and no public function that shares
its name with a module (which once forced a class swap of the package object). Issue 25, step 4/5:
an import of ours inside a function only where the module it names is heavy (``HEAVY_PACKAGES``,
or listed in ``LAZY_ALLOWED`` with its measured cost), and no private name imported from another
module (docs/architecture.md, "Where an import of ours goes").
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "python" / "roofline_ext"

#: Lowest first. Modules at the package root that are not listed belong to no layer (rank 0).
RANKS = {
    "errors": 0, "_version": 0, "_core": 0, "timestamps": 0,
    "peaks": 1, "device": 2, "measure": 3, "calibration": 4, "check": 4.5, "tasks": 5, "model": 6,
    "judge": 6.5, "report": 7, "runner": 8, "cli": 9,
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["roofline_ext", *parts])] = path
    return out


MODULES = _modules()


def _resolve(module: str, is_pkg: bool, node: ast.ImportFrom) -> list[str]:
    """Absolute names of what ``from ... import ...`` reaches (modules where they are modules)."""
    if node.level:
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    names = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        names.append(sub if sub in MODULES or sub == "roofline_ext._core" else target)
    return names


#: Third-party packages whose import costs hundreds of milliseconds or may be missing (optional
#: extras); with ``roofline_ext._core`` (the native module, which may not be built) they are the
#: heavy boundaries. A module whose import pulls one of them, directly or through its own
#: module-level imports, is heavy, and only a heavy module may be imported inside a function.
HEAVY_PACKAGES = frozenset({"torch", "matplotlib", "dask", "distributed", "rich", "numpy", "cupy"})
CORE = "roofline_ext._core"

#: Light modules that may still be imported lazily, each with its measured reason: (importing module,
#: imported module) -> why. Times are what importing the module adds to a process that already holds
#: what it imports at start-up (medians of 7, bytecode cached, 2026-12-06, a shared 2-core box).
#: Every ``roofline-ext`` run (``--help`` too) imports every command module to build its parser, so a
#: command's own subsystem stays lazy where hoisting it adds more than a few ms to every run.
LAZY_ALLOWED: dict[tuple[str, str], str] = {
    ("roofline_ext.cli.commands.calibrate", "roofline_ext.calibration.pipeline"):
        "+21 ms, 15 modules (calibration, measure) on every roofline-ext run",
    ("roofline_ext.cli.commands.check", "roofline_ext.check.run"):
        "+22 ms, 11 modules (check, measure) on every roofline-ext run",
    ("roofline_ext.cli.commands.fleet", "roofline_ext.runner.fleet"):
        "+12 ms, 4 modules on every roofline-ext run",
    ("roofline_ext.cli.commands.fleet", "roofline_ext.check.stragglers"):
        "+12 ms, 3 modules (check.result, check.outcome) on every roofline-ext run",
    ("roofline_ext.cli.commands.report", "roofline_ext.report.html"):
        "+18 ms, 8 modules (the page's sections) on every roofline-ext run",
    ("roofline_ext.runner.worker", "roofline_ext.runner.analyze"):
        "+62 ms, 32 modules (model.assess, the peaks) in every fork server, for the failure reply only",
}


def _import_nodes(path: Path) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement in the file and whether it runs when the module is imported (False:
    inside a function, where it runs at the first call)."""
    tree = ast.parse(path.read_text(), str(path))
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append((child, not in_function))
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            visit(child, inner)

    visit(tree, False)
    return out


def _imports(module: str, path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import of ours in ``module``; "module
    level" is anything that runs when the module is imported, i.e. outside every function."""
    is_pkg = path.name == "__init__.py"
    out = []
    for node, top in _import_nodes(path):
        targets = _resolve(module, is_pkg, node) if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        for t in targets:
            if t == "roofline_ext" or t.startswith("roofline_ext."):
                out.append((t, node.lineno, top))
    return out


def _third_party_at_module_level(path: Path) -> set[str]:
    """Top-level names of the packages outside ours that the module imports when it is imported."""
    out = set()
    for node, top in _import_nodes(path):
        if not top or (isinstance(node, ast.ImportFrom) and node.level):
            continue
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        out.update(n.split(".")[0] for n in names)
    return out


def _parents(module: str) -> list[str]:
    """The packages Python imports before ``module`` itself (``a.b.c``: ``a``, ``a.b``)."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _heaviness(modules: dict[str, Path]) -> dict[str, str]:
    """Heavy module -> why (the chain of module-level imports that reaches a heavy boundary).

    Importing a module runs its parent packages' ``__init__`` and its module-level imports, so
    heaviness spreads along those edges; an import inside a function runs later and spreads
    nothing."""
    why: dict[str, str] = {CORE: "the native core"}
    deps = {}
    for module, path in modules.items():
        heavy = sorted(_third_party_at_module_level(path) & HEAVY_PACKAGES)
        if heavy:
            why[module] = heavy[0]
        deps[module] = [p for p in _parents(module) if p in modules] + sorted(
            {t for t, _, top in _imports(module, path) if top and t != module and (t in modules or t == CORE)})
    changed = True
    while changed:
        changed = False
        for module, targets in deps.items():
            if module in why:
                continue
            for t in targets:
                if t in why:
                    why[module] = f"{t} -> {why[t]}"
                    changed = True
                    break
    return why


def _light_lazy_imports(modules: dict[str, Path], allowed: dict[tuple[str, str], str]) -> list[str]:
    heavy = _heaviness(modules)
    bad = []
    for module, path in modules.items():
        for target, line, top in _imports(module, path):
            if top or target in heavy or (module, target) in allowed:
                continue
            if target in modules:
                bad.append(f"{_where(path)}:{line} imports {target} lazily but {target} is light")
    return bad


def _where(path: Path) -> str:
    return str(path.relative_to(PKG)) if PKG in path.parents else str(path)


def _rank(module: str) -> int:
    parts = module.split(".")
    return RANKS.get(parts[1], 0) if len(parts) > 1 else 0


def test_every_subpackage_has_a_rank():
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(RANKS), f"give these a rank: {sorted(packages - set(RANKS))}"


def test_no_lower_layer_imports_a_higher_one():
    bad = []
    for module, path in MODULES.items():
        if module == "roofline_ext":  # the facade re-exports lazily from every layer
            continue
        for target, line, _ in _imports(module, path):
            if target == "roofline_ext":
                bad.append(f"{_where(path)}:{line} imports the package itself (use _version)")
            elif _rank(target) > _rank(module):
                bad.append(f"{_where(path)}:{line}: {module} (rank {_rank(module)}) imports "
                           f"{target} (rank {_rank(target)})")
    assert not bad, "\n".join(bad)


def test_no_import_cycles_at_module_level():
    graph = {m: {t for t, _, top in _imports(m, p) if top and t in MODULES and t != m}
             for m, p in MODULES.items()}

    def cycle_from(start: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    return trail + [start]
                if nxt not in seen and not start.startswith(nxt + "."):  # a package's own __init__
                    seen.add(nxt)
                    stack.append((nxt, trail + [nxt]))
        return None

    cycles = [c for m in graph if (c := cycle_from(m)) and not any(
        a.startswith(b + ".") or b.startswith(a + ".") for a, b in zip(c, c[1:]))]
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_no_import_error_guard_around_a_sibling():
    bad = []
    for path in MODULES.values():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Try):
                continue
            catches = {getattr(h.type, "id", None) for h in node.handlers}
            if not catches & {"ImportError", "ModuleNotFoundError"}:
                continue
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and (stmt.level or (stmt.module or "").startswith("roofline_ext")):
                    # The one allowed: the compiled core, which may not be built.
                    if [a.name for a in stmt.names] != ["_core"]:
                        bad.append(f"{_where(path)}:{stmt.lineno}")
    assert not bad, "ImportError guards around modules that always ship: " + ", ".join(bad)


def test_no_public_name_is_also_a_module_name():
    import roofline_ext

    for name in roofline_ext.__all__:
        assert f"roofline_ext.{name}" not in MODULES, f"roofline_ext.{name} is both a function and a module"
    # And the package object is an ordinary module (no class swap to cope with collisions).
    assert type(roofline_ext).__name__ == "module"


@pytest.mark.parametrize("name", sorted(__import__("roofline_ext").__all__))
def test_every_public_name_resolves(name):
    import roofline_ext

    assert getattr(roofline_ext, name) is not None


def test_the_layer_test_catches_a_back_edge(tmp_path, monkeypatch):
    """The check itself can fail: a fake low-layer module importing the CLI is reported."""
    fake = tmp_path / "fake.py"
    fake.write_text("from ..cli import app\n")
    monkeypatch.setitem(MODULES, "roofline_ext.peaks.fake", fake)
    with pytest.raises(AssertionError, match="rank 1.*rank 9"):
        test_no_lower_layer_imports_a_higher_one()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle's shortest witness, one per module on a cycle (a package and its own
    modules are not a cycle: ``pkg/__init__`` importing ``pkg.mod`` is how packages are built)."""
    out = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop(0)
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    out.append(trail + [start])
                    stack = []
                    break
                if nxt not in seen and not start.startswith(nxt + ".") and not nxt.startswith(start + "."):
                    seen.add(nxt)
                    stack.append((nxt, trail + [nxt]))
    return [c for c in out if not any(a.startswith(b + ".") or b.startswith(a + ".") for a, b in zip(c, c[1:]))]


def test_no_import_cycles_at_any_level():
    """Imports inside functions are edges too: a cycle that only a function-level import closes is
    still two modules that cannot be understood apart (check/run <-> check/native was one)."""
    graph = {m: {t for t, _, _ in _imports(m, p) if t in MODULES and t != m} for m, p in MODULES.items()}
    cycles = _cycles(graph)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_can_fail():
    assert _cycles({"roofline_ext.check.run": {"roofline_ext.check.native_backend"},
                    "roofline_ext.check.native_backend": {"roofline_ext.check.run"}})
    assert not _cycles({"roofline_ext.check": {"roofline_ext.check.run"}, "roofline_ext.check.run": {"roofline_ext.check"}})


def test_no_two_modules_share_a_file_name():
    """docs/architecture.md, "File names": outside cli/commands/ (a file per command), a module's
    file name is unique in the package, so an import never leaves a reader asking which one."""
    from collections import defaultdict

    seen: dict[str, list[str]] = defaultdict(list)
    for path in PKG.rglob("*.py"):
        if path.name in ("__init__.py", "__main__.py") or "commands" in path.relative_to(PKG).parts:
            continue
        seen[path.name].append(str(path.relative_to(PKG)))
    allowed = {"energy.py"}  # measure/ (the counter loop) and model/ (the floor), while issue 27 is open
    clashes = {name: where for name, where in seen.items() if len(where) > 1 and name not in allowed}
    assert not clashes, clashes


def test_lazy_internal_imports_only_at_heavy_boundaries():
    """Issue 25, step 4/5: an import of our own inside a function is allowed only where the module
    it names is heavy (see HEAVY_PACKAGES); everything else is imported at module level, where a
    reader sees a module's dependencies at the top and a missing one fails at import, not at the
    first call. Lazy imports of heavy modules keep ``--help``, ``import roofline_ext`` and the fork
    server's start free of torch and the native core."""
    bad = _light_lazy_imports(MODULES, LAZY_ALLOWED)
    assert not bad, f"{len(bad)} lazy imports of light modules (hoist them):\n" + "\n".join(bad)


def test_every_lazy_allowance_is_still_needed():
    heavy = _heaviness(MODULES)
    lazy = {(m, t) for m, p in MODULES.items() for t, _, top in _imports(m, p) if not top}
    stale = [pair for pair in LAZY_ALLOWED if pair not in lazy or pair[1] in heavy]
    assert not stale, f"allowances no longer needed: {stale}"


def test_the_heaviness_check_can_fail(tmp_path, monkeypatch):
    """A light module imported inside a function is reported; a heavy one (torch at module level,
    or reached through a module-level import of ours) is not; torch inside a function does not
    make a module heavy."""
    files = {
        "roofline_ext.peaks.light": "import json\n\ndef f():\n    import torch\n",
        "roofline_ext.peaks.torchy": "import torch.nn\n",
        "roofline_ext.peaks.through": "from . import torchy\n",
        "roofline_ext.peaks.user": ("def f():\n    from . import light\n    from . import through\n"
                                   "    from .. import _core\n"),
    }
    modules = {}
    for name, text in files.items():
        modules[name] = tmp_path / f"{name.rsplit('.', 1)[1]}.py"
        modules[name].write_text(text)
        monkeypatch.setitem(MODULES, name, modules[name])  # so that ``from . import light`` resolves
    heavy = _heaviness(modules)
    assert set(heavy) == {CORE, "roofline_ext.peaks.torchy", "roofline_ext.peaks.through"}
    assert heavy["roofline_ext.peaks.through"] == "roofline_ext.peaks.torchy -> torch"
    bad = _light_lazy_imports(modules, {})
    assert len(bad) == 1 and "imports roofline_ext.peaks.light lazily but" in bad[0], bad
    assert not _light_lazy_imports(modules, {("roofline_ext.peaks.user", "roofline_ext.peaks.light"): "why"})


def _private_imports(modules: dict[str, Path]) -> list[str]:
    """``from X import _name`` where ``_name`` is not one of the two private modules every layer may
    name (``_core``, the native module; ``_version``)."""
    bad = []
    for path in modules.values():
        for node, _ in _import_nodes(path):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = node.module or ""
            if not node.level and not (source == "roofline_ext" or source.startswith("roofline_ext.")):
                continue  # another package's private names are its business (and torch's are used)
            for alias in node.names:
                name = alias.name
                if name.startswith("_") and not name.endswith("__") and name not in ("_core", "_version"):
                    bad.append(f"{_where(path)}:{node.lineno} imports the private name {name} "
                               f"from {'.' * node.level}{source}")
    return bad


def test_no_private_name_imported_from_another_module():
    """Issue 25, step 5: a name another module needs is public (or lives where it is used); a
    leading underscore means "nothing outside this file uses it", which a reader can rely on."""
    bad = _private_imports(MODULES)
    assert not bad, f"{len(bad)} private names imported across modules:\n" + "\n".join(bad)


def test_the_private_name_check_can_fail(tmp_path):
    fake = tmp_path / "fake.py"
    fake.write_text("from ._version import __version__\nfrom .. import _core\nfrom torch.utils import _pytree\n"
                    "def f():\n    from .cache import _path\n")
    bad = _private_imports({"roofline_ext.peaks.fake": fake})
    assert len(bad) == 1 and "private name _path from .cache" in bad[0], bad


# --- the tests themselves ---------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent


def _test_module_imports(paths: list[Path]) -> list[str]:
    """Imports of one test module by another (``from test_x import ...``, at any depth of the file).
    Stand-ins shared by several test files live in ``tests/fakes/`` (docs/testing.md): a test module
    that imports another collects that module's tests' setup too, and the fake is hidden where a
    reader looking for fakes does not look."""
    bad = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            bad += [f"{path.name}:{node.lineno} imports {n}" for n in names if n.split(".")[0].startswith("test_")]
    return bad


def test_no_test_module_imports_another():
    bad = _test_module_imports(sorted(TESTS.glob("test_*.py")))
    assert not bad, "fakes belong in tests/fakes/:\n" + "\n".join(bad)


def test_the_test_module_import_check_can_fail(tmp_path):
    fake = tmp_path / "test_fake.py"
    fake.write_text("import os\nfrom fakes.check import h200_device\nsrc = 'from test_probe import x'\n"
                    "def f():\n    from test_calibration_pipeline import fake_device\n")
    bad = _test_module_imports([fake])
    assert bad == ["test_fake.py:5 imports test_calibration_pipeline"], bad
