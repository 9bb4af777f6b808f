"""The shape of a JSON document, checked before any reader opens it by key chains.

A reader of result files (``report``, ``fleet --from``, the calibration cache) does
``doc.get("devices") or []`` and iterates: a ``"devices": 3`` or a ``"metrics": []`` would end it
in a ``TypeError`` far from the file. A spec says what every key the readers use must hold, so a
wrong one is refused with its JSON pointer instead. The language, small on purpose:

- a type or a tuple of types (``str``, ``NUMBER``): the value is one of them;
- ``{"key": spec}``: an object; each listed key, when present, matches its spec (other keys are
  free: documents gain keys over versions). ``{"*": spec}``: every value matches spec;
- ``[spec]``: a list whose every item matches spec;
- :class:`OneOf`: one of the given values (a verdict).

``None`` (JSON ``null``) is accepted for a named key (the writers use it for "not measured") and
for an item of a list or a map whose spec is a scalar; an item whose spec is an object or a list must
be one (a reader iterates a map of objects and opens each). Numbers exclude booleans (``True`` is no
bandwidth).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import UserError
from .inputs import pointer

__all__ = ["NUMBER", "OneOf", "problem", "check"]

NUMBER = (int, float)


@dataclass(frozen=True)
class OneOf:
    values: tuple[Any, ...]

    def __init__(self, *values: Any) -> None:
        object.__setattr__(self, "values", values)


def _name(spec: Any) -> str:
    if isinstance(spec, dict):
        return "an object"
    if isinstance(spec, list):
        return "a list"
    if isinstance(spec, OneOf):
        return "one of " + ", ".join(map(str, spec.values))
    types = spec if isinstance(spec, tuple) else (spec,)
    if set(types) == set(NUMBER):
        return "a number"
    return " or ".join({str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(t, t.__name__)
                       for t in types)


def _matches(value: Any, spec: Any) -> bool:
    if isinstance(spec, dict):
        return isinstance(value, dict)
    if isinstance(spec, list):
        return isinstance(value, list)
    if isinstance(spec, OneOf):
        return any(value == v and type(value) is type(v) for v in spec.values)
    types = spec if isinstance(spec, tuple) else (spec,)
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else ("an object" if isinstance(value, dict) else "a list")
    return text if len(text) <= 60 else text[:57] + "..."


def problem(doc: Any, spec: Any) -> str | None:
    """Where and how ``doc`` departs from ``spec`` ("/devices/0/verdict is 'GREEN', not one of
    PASS, ..."), or None. Iterative: the depth of a document is bounded where it is read."""
    stack: list[tuple[tuple, Any, Any, bool]] = [((), doc, spec, False)]
    while stack:
        parts, value, sp, nullable = stack.pop()
        if value is None and nullable:
            continue
        if not _matches(value, sp):
            return f"{pointer(parts)} is {_short(value)}, not {_name(sp)}"
        if isinstance(sp, dict):
            every = sp.get("*")
            for k, v in value.items():
                sub = sp.get(k)
                if sub is not None:
                    stack.append((parts + (k,), v, sub, True))
                elif every is not None:
                    stack.append((parts + (k,), v, every, _scalar(every)))
        elif isinstance(sp, list):
            stack.extend((parts + (i,), v, sp[0], _scalar(sp[0])) for i, v in enumerate(value))
    return None


def _scalar(spec: Any) -> bool:
    return not isinstance(spec, (dict, list))


def check(doc: Any, spec: Any, source: str) -> None:
    """:func:`problem` as a ``UserError`` naming ``source``."""
    why = problem(doc, spec)
    if why is not None:
        raise UserError(f"{source}: {why}")
