"""The package's layers (docs/architecture.md): a lower layer never imports a higher one.

Every import in every module is found from the source (module level and inside functions alike,
since a function-level import is still an edge), resolved to the module it names, and checked
against the ranks below. Also: no import cycles between modules at module level, no ``except
ImportError`` around an import of a sibling that always ships, and no public function that shares
its name with a module (which once forced a class swap of the package object).
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


def _imports(module: str, path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import of ours in ``module``."""
    tree = ast.parse(path.read_text(), str(path))
    top = set(id(n) for n in tree.body)
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            targets = _resolve(module, is_pkg, node)
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for t in targets:
            if t == "roofline_ext" or t.startswith("roofline_ext."):
                out.append((t, node.lineno, id(node) in top))
    return out


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
