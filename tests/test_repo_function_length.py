"""No function of the package is longer than 80 lines (issue 25): a longer one holds more than one
step of the flow, and a reader cannot see it at once."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "python" / "roofline_ext"
LIMIT = 80


def test_no_function_is_longer_than_80_lines():
    long = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LIMIT:
                    long.append(f"{path.relative_to(PKG)}:{node.lineno} {node.name}: {lines} lines")
    assert not long, "split these:\n" + "\n".join(long)
