"""Values known without data: triangular masks, the scores they mask, and the work that saves.

Fake tensors have shapes, not values, so a causal mask written by hand (``tril(ones)`` buffer, ``== 0``,
``masked_fill(-inf)``, softmax, ``@ v``) looks like any other tensor. This module follows, per storage,
a :class:`Pattern`: the value of a matrix inside and outside a triangle (``tril``/``triu`` with a
diagonal), either a known scalar or :data:`UNKNOWN`. Patterns start at factories (``ones``, ``full``)
and ``tril``/``triu``, and go through element-wise ops by evaluating the op on the two region values
with Python scalars, and through views by where the view lies in the storage. Real tensors (a task's
module-level constants, a model built for real) are read instead.

It also follows *score chains*: the output of a matmul and the element-wise ops applied to it. When
a mask sets part of a chain to a constant (``masked_fill``, ``where``, an additive ``-inf`` mask,
``tril``/``triu``), the matmul FLOPs and element-wise work spent on that part are taken back: a
correct kernel never computes them. Element-wise ops whose outputs are known there cost nothing
there, and a matmul whose operand is known to be zero there counts only the rest (P V over the kept
pairs). Only structure made by masking in the forward pass is used this way ("live"); a triangular
*input* stays a full operand: exploiting input values is a structural shortcut, not the floor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

from .formulas import kept_lower, kept_upper

__all__ = ["UNKNOWN", "Pattern", "MaskTracker"]


class _Unknown:
    """A finite value that cannot be known without running the task (a computed score)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()

# A mask's matrix of at most this many elements is read when the tensor is real.
_REAL_LIMIT = 1 << 22


@dataclass(frozen=True)
class Pattern:
    """A matrix's values: ``inside`` the triangle, ``outside`` it. ``kind``: "lower" (inside is
    j - i <= diag, what tril keeps), "upper" (j - i >= diag, what triu keeps) or "const"
    (``inside`` everywhere). ``live``: a known region made by masking in the forward pass."""

    kind: str
    diag: int
    inside: Any
    outside: Any
    live: bool = False

    def shifted(self, r0: int, c0: int) -> "Pattern":
        """The pattern of a window whose top-left corner is (r0, c0)."""
        return self if self.kind == "const" else replace(self, diag=self.diag + r0 - c0)

    def inside_count(self, rows: int, cols: int) -> int:
        if self.kind == "const":
            return rows * cols
        count = kept_lower if self.kind == "lower" else kept_upper
        return count(rows, cols, self.diag)

    @property
    def partial(self) -> bool:
        """One region known, the other not."""
        return self.kind != "const" and (self.inside is UNKNOWN) != (self.outside is UNKNOWN)


@dataclass(frozen=True)
class _Layout:
    """Where the matrices of a storage lie: row-major, ``matrix_stride`` apart."""

    offset: int
    row_stride: int
    rows: int
    cols: int
    matrix_stride: int


def _layout(t) -> _Layout | None:
    if t.dim() < 2:
        return None
    rows, cols = int(t.shape[-2]), int(t.shape[-1])
    if cols > 1 and t.stride(-1) != 1:
        return None
    row_stride = int(t.stride(-2)) if rows > 1 else cols
    if row_stride < cols:
        return None
    return _Layout(int(t.storage_offset()), row_stride, rows, cols, max(1, row_stride * rows))


def _window(t, lay: _Layout) -> tuple[int, int] | None:
    """(r0, c0) when ``t``'s last two dims are a window of the layout's matrices, else None."""
    if t.dim() < 2:
        return None
    rows, cols = int(t.shape[-2]), int(t.shape[-1])
    if (cols > 1 and t.stride(-1) != 1) or (rows > 1 and t.stride(-2) != lay.row_stride):
        return None
    for size, stride in zip(t.shape[:-2], t.stride()[:-2]):
        if size > 1 and stride != 0 and stride % lay.matrix_stride:
            return None
    rel = int(t.storage_offset()) - lay.offset
    if rel < 0:
        return None
    r0, c0 = divmod(rel % lay.matrix_stride, lay.row_stride)
    if r0 + rows > lay.rows or c0 + cols > lay.cols:
        return None
    return r0, c0


def _covers(t) -> bool:
    """Whether ``t`` is the whole of its storage (so that what it holds is what the storage holds)."""
    try:
        return t.numel() * t.element_size() >= t.untyped_storage().nbytes() and t.storage_offset() == 0
    except Exception:
        return False


# --- values: the ops evaluated on region values ---------------------------------------------------

def _is_inf(v) -> bool:
    return isinstance(v, float) and math.isinf(v)


def _additive(f: Callable) -> Callable:
    # an unknown finite value plus or minus an infinity is that infinity
    def op(a, b, alpha=1):
        if a is UNKNOWN or b is UNKNOWN:
            known = b if a is UNKNOWN else a
            if known is UNKNOWN or not _is_inf(known):
                return UNKNOWN
            r = f(0.0 if a is UNKNOWN else a, 0.0 if b is UNKNOWN else b, alpha)
            return r if _is_inf(r) else UNKNOWN
        return f(a, b, alpha)
    return op


def _strict(f: Callable) -> Callable:
    def op(*vals, **kw):
        return UNKNOWN if any(v is UNKNOWN for v in vals) else f(*vals, **kw)
    return op


def _mul(a, b):
    if a is UNKNOWN or b is UNKNOWN:
        known = b if a is UNKNOWN else a
        return known if (known is not UNKNOWN and known == 0 and not isinstance(known, bool)) else UNKNOWN
    return a * b


def _select(cond, a, b):
    if cond is UNKNOWN:
        return UNKNOWN
    return a if cond else b


_ELEMENTWISE: dict[str, Callable] = {
    "add": _additive(lambda a, b, alpha: a + alpha * b),
    "sub": _additive(lambda a, b, alpha: a - alpha * b),
    "rsub": _additive(lambda a, b, alpha: b - alpha * a),
    "mul": _mul,
    "div": _strict(lambda a, b: a / b),
    "eq": _strict(lambda a, b: a == b), "ne": _strict(lambda a, b: a != b),
    "lt": _strict(lambda a, b: a < b), "le": _strict(lambda a, b: a <= b),
    "gt": _strict(lambda a, b: a > b), "ge": _strict(lambda a, b: a >= b),
    "logical_not": _strict(lambda a: not a), "bitwise_not": _strict(lambda a: (not a) if isinstance(a, bool) else ~a),
    "logical_and": _strict(lambda a, b: bool(a) and bool(b)), "logical_or": _strict(lambda a, b: bool(a) or bool(b)),
    "bitwise_and": _strict(lambda a, b: a & b), "bitwise_or": _strict(lambda a, b: a | b),
    "neg": _strict(lambda a: -a), "abs": _strict(abs), "exp": _strict(lambda a: math.exp(a) if a < 700 else math.inf),
    "relu": lambda a: 0.0 if (a is not UNKNOWN and a <= 0) else (a if a is not UNKNOWN else UNKNOWN),
    "masked_fill": lambda a, mask, value: _select(mask, value, a),
    "where": lambda cond, a, b: _select(cond, a, b),
    "clone": lambda a: a, "_to_copy": lambda a: a, "alias": lambda a: a, "lift_fresh_copy": lambda a: a,
    "copy": lambda a, src: src,
}

_SOFTMAX = frozenset({"_softmax", "softmax", "_safe_softmax"})
_DROPOUT = frozenset({"native_dropout", "dropout"})
_CONST_FACTORIES = {"ones": 1, "ones_like": 1, "new_ones": 1, "zeros": 0, "zeros_like": 0, "new_zeros": 0,
                    "zero": 0}
_FULL_FACTORIES = {"full": 1, "full_like": 1, "new_full": 2, "fill": 1, "scalar_tensor": 0}
# matmuls whose output entries are independent dot products: (left operand index, right operand index)
MATMULS = {"mm": (0, 1), "bmm": (0, 1), "addmm": (1, 2), "baddbmm": (1, 2)}


def _cast(v, dtype):
    if v is UNKNOWN:
        return UNKNOWN
    try:
        if dtype.is_complex:
            return UNKNOWN
        if dtype.is_floating_point:
            return float(v)
        if str(dtype) == "torch.bool":
            return bool(v)
        return int(v) if not _is_inf(v) else UNKNOWN
    except (TypeError, ValueError, OverflowError):
        return UNKNOWN


def _evaluate(f: Callable, vals: list, kw: dict):
    try:
        return f(*vals, **kw)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return UNKNOWN


def _base_name(name: str) -> str:
    # in-place variants (masked_fill_, add_) compute what their out-of-place op does
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def _row_kept(p: Pattern, inside: bool, i: int, cols: int) -> int:
    """Entries of row i in the inside (or outside) region."""
    if p.kind == "lower":
        n_in = min(max(i + p.diag + 1, 0), cols)
    else:
        n_in = cols - min(max(i + p.diag, 0), cols)
    return n_in if inside else cols - n_in


def _softmaxed(p: Pattern | None, rows: int, cols: int) -> Pattern | None:
    """Softmax over the last dim of a matrix that is -inf in one region: 0 there, if every row keeps
    an entry (a row of -inf alone is NaN)."""
    if p is None or not p.partial:
        return None
    known_inside = p.inside is not UNKNOWN
    if (p.inside if known_inside else p.outside) != -math.inf:
        return None
    kept_inside = not known_inside
    if min(_row_kept(p, kept_inside, 0, cols), _row_kept(p, kept_inside, rows - 1, cols)) < 1:
        return None
    return replace(p, inside=0.0 if known_inside else UNKNOWN, outside=UNKNOWN if known_inside else 0.0)


def _dropped(p: Pattern | None) -> Pattern | None:
    """Dropout keeps zeros zero; every other value becomes unknown."""
    if p is None:
        return None
    keep = [v if (v is not UNKNOWN and v == 0 and not _is_inf(v)) else UNKNOWN for v in (p.inside, p.outside)]
    return None if keep == [UNKNOWN, UNKNOWN] else replace(p, inside=keep[0], outside=keep[1])


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def _real_pattern(t) -> Pattern | None:
    """The pattern of a real tensor, read from its values: constant, or two values split by a
    triangle (the same in every matrix). None for anything else or anything large."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    from torch.utils._python_dispatch import _disable_current_modes

    if t.numel() == 0 or t.numel() > _REAL_LIMIT or t.is_complex():
        return None
    with unset_fake_temporarily(), _disable_current_modes():
        x = t.detach()
        first = x.reshape(-1)[0].item()
        if bool((x == first).all()):
            return Pattern("const", 0, first, first)
        if x.dim() < 2:
            return None
        mats = x.reshape(-1, x.shape[-2], x.shape[-1])
        if not bool((mats == mats[0]).all()):
            return None
        return _triangle(mats[0])


def _triangle(m) -> Pattern | None:
    import torch

    values = torch.unique(m)
    if values.numel() != 2:
        return None
    d = torch.arange(m.shape[1])[None, :] - torch.arange(m.shape[0])[:, None]  # j - i
    for out_value, in_value in ((values[0], values[1]), (values[1], values[0])):
        region = m == out_value
        k = int(d[region].min()) - 1  # lower: outside is j - i > k
        if torch.equal(region, d > k):
            return Pattern("lower", k, in_value.item(), out_value.item())
        k = int(d[region].max()) + 1  # upper: outside is j - i < k
        if torch.equal(region, d < k):
            return Pattern("upper", k, in_value.item(), out_value.item())
    return None


def _is_tensor(a) -> bool:
    import torch

    return isinstance(a, torch.Tensor)


def _guarded(fallback: Callable) -> Callable:
    """Run a tracker method; should it fail, stop following values for the rest of the count (work
    is then counted in full, which a floor may do) and say so, rather than fail the task."""
    def wrap(method: Callable) -> Callable:
        def guarded(self, *args, **kwargs):
            if not self.enabled:
                return fallback(*args, **kwargs)
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:  # a bug here must not make a task uncountable
                self.enabled = False
                self.note(f"masks are not followed after an error in {method.__name__} "
                          f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]}): the rest counts all work")
                return fallback(*args, **kwargs)
        return guarded
    return wrap


_TRIANGLES = frozenset({"tril", "triu"})
_FOLLOWED = frozenset(_ELEMENTWISE) | _SOFTMAX | _DROPOUT | _TRIANGLES
_UNKNOWN_CONST = Pattern("const", 0, UNKNOWN, UNKNOWN)


class MaskTracker:
    """Patterns and score chains per storage, for one count. ``key`` maps a tensor to its storage's
    identity; ``adjust(bucket, op, delta, index)`` takes back work already counted ("flops" or
    "simt") from the op of that name (and per-op row ``index``, or None)."""

    def __init__(self, key: Callable[[Any], int], adjust: Callable[..., None]) -> None:
        self.key = key
        self.adjust = adjust
        # The op being counted (its per-op row, opcounts), so that work taken back later is taken
        # from the op that was charged with it; None without per-op counting.
        self.current: int | None = None
        self.counting = False  # True in the forward pass; setup (constructor, get_inputs) only follows values
        self.enabled = True
        self.patterns: dict[int, tuple[Pattern, _Layout | None]] = {}
        self.chains: dict[int, tuple[_Layout, list[tuple[str, str, int, int | None]]]] = {}
        self.notes: dict[str, None] = {}  # an ordered set
        # tensors whose storages have records: kept alive, so that no other storage takes the address
        self._alive: list = []
        self._real: dict[int, tuple] = {}  # id -> (real tensor, its version, its pattern)

    def note(self, text: str) -> None:
        self.notes[text] = None

    def pattern_of(self, t) -> Pattern | None:
        """What ``t`` holds, in the coordinates of its last two dims; None when unknown."""
        rec = self.patterns.get(self.key(t))
        if rec is not None:
            pattern, lay = rec
            if pattern.kind == "const":
                return pattern
            assert lay is not None  # _record stores a non-constant pattern only with its layout
            where = _window(t, lay)
            return pattern.shifted(*where) if where else None
        if _is_fake(t):
            return None
        cached = self._real.get(id(t))
        if cached is None or cached[0] is not t or cached[1] != t._version:  # _version: in-place writes
            cached = (t, t._version, _real_pattern(t))
            self._real[id(t)] = cached
        return cached[2]

    @_guarded(lambda *a, **k: None)
    def before(self, name: str, args: tuple) -> list | None:
        """The arguments' patterns, taken before an in-place op rewrites them (None: not followed)."""
        if _base_name(name) not in _FOLLOWED:
            return None
        return [(self.pattern_of(a) or _UNKNOWN_CONST) if _is_tensor(a) else a for a in args]

    @_guarded(lambda name, args, kwargs, out, pre, work=0, bucket=None: work)
    def after(self, name: str, args: tuple, kwargs: dict, out, pre: list | None, work: int = 0,
              bucket: str | None = None) -> int:
        """Record what ``out`` holds; return the part of ``work`` (this op's count) to keep."""
        pattern = self._output_pattern(name, args, kwargs, out, pre)
        self._record(out, pattern)
        if not self.counting:
            return work
        return self._chain_step(name, args, out, pattern, work, bucket)

    # --- what an op's output holds -----------------------------------------------------------------

    def _output_pattern(self, name: str, args: tuple, kwargs: dict, out, pre: list | None) -> Pattern | None:
        base = _base_name(name)
        if base in _CONST_FACTORIES:
            value = _cast(_CONST_FACTORIES[base], out.dtype)
            return Pattern("const", 0, value, value)
        if base in _FULL_FACTORIES:
            return self._filled(base, args, kwargs, out)
        if pre is None or (out.dim() < 2 and base not in _ELEMENTWISE):
            return None  # not followed, or a row-wise op on something that is not a matrix
        rows, cols = (int(out.shape[-2]), int(out.shape[-1])) if out.dim() >= 2 else (1, 1)
        if base in _TRIANGLES:
            return self._triangled(base, args, kwargs, out, pre[0])
        if base in _SOFTMAX:
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            return _softmaxed(pre[0], rows, cols) if dim in (-1, out.dim() - 1) else None
        if base in _DROPOUT:
            return _dropped(pre[0])
        return self._elementwise(base, args, kwargs, out, pre)

    def _filled(self, base: str, args: tuple, kwargs: dict, out) -> Pattern | None:
        index = _FULL_FACTORIES[base]
        value = args[index] if len(args) > index else kwargs.get("fill_value", kwargs.get("value"))
        if _is_tensor(value):
            p = self.pattern_of(value)
            value = p.inside if p is not None and p.kind == "const" else UNKNOWN
        value = _cast(value, out.dtype) if value is not None else UNKNOWN
        return None if value is UNKNOWN else Pattern("const", 0, value, value)

    def _triangled(self, base: str, args: tuple, kwargs: dict, out, src) -> Pattern | None:
        if src is None or src.kind != "const":
            return None  # a triangle of a triangle: not followed
        diag = int(args[1]) if len(args) > 1 else int(kwargs.get("diagonal", 0))
        value = _cast(src.inside, out.dtype)
        live = self.counting and value is UNKNOWN  # masking computed values in the forward pass
        return Pattern("lower" if base == "tril" else "upper", diag, value, _cast(0, out.dtype), live)

    def _elementwise(self, base: str, args: tuple, kwargs: dict, out, pre: list) -> Pattern | None:
        if any(_is_tensor(v) for v in kwargs.values()):
            return None
        triangle, pats, ins, outs = None, [], [], []
        for a, p in zip(args, pre):
            if isinstance(p, Pattern):
                if p.kind != "const":
                    if out.dim() < 2 or tuple(a.shape[-2:]) != tuple(out.shape[-2:]):
                        return None  # broadcast along the matrix: not followed
                    if triangle not in (None, (p.kind, p.diag)):
                        return None  # two different triangles: not followed
                    triangle = (p.kind, p.diag)
                pats.append(p)
                ins.append(p.inside)
                outs.append(p.outside)
            else:
                ins.append(a)
                outs.append(a)
        kw = {"alpha": kwargs["alpha"]} if "alpha" in kwargs and base in ("add", "sub", "rsub") else {}
        f = _ELEMENTWISE[base]
        inside = _cast(_evaluate(f, ins, kw), out.dtype)
        outside = _cast(_evaluate(f, outs, kw), out.dtype) if triangle else inside
        if inside is UNKNOWN and outside is UNKNOWN:
            return None
        if triangle is None or (inside is not UNKNOWN and inside == outside):
            return Pattern("const", 0, inside, inside)
        # structure of a task's inputs (a triangular input) is not the forward pass's own masking
        live = self.counting and not any(p.partial and not p.live for p in pats)
        return Pattern(triangle[0], triangle[1], inside, outside, live)

    def _record(self, out, pattern: Pattern | None) -> None:
        k = self.key(out)
        lay = None if pattern is None or pattern.kind == "const" else _layout(out)
        if pattern is None or not _covers(out) or (pattern.kind != "const" and lay is None):
            self.patterns.pop(k, None)
        else:
            self.patterns[k] = (pattern, lay)
            self._alive.append(out)

    # --- score chains: work on scores that a mask turns into constants ------------------------------

    def _chain_of(self, args: tuple, out) -> tuple[int | None, list | None]:
        """(storage, chain) of the argument that holds the scores ``out`` is computed from (the same
        matrices), or (None, None)."""
        for a in args:
            if _is_tensor(a) and self.key(a) in self.chains:
                lay, entries = self.chains[self.key(a)]
                if (_window(a, lay) == (0, 0) and tuple(a.shape[-2:]) == (lay.rows, lay.cols)
                        and a.numel() == out.numel()):
                    return self.key(a), entries
        return None, None

    def _chain_step(self, name: str, args: tuple, out, pattern: Pattern | None, work: int,
                    bucket: str | None) -> int:
        k = self.key(out)
        source, entries = self._chain_of(args, out)
        self.chains.pop(k, None)  # whatever out's storage held, this op rewrote it
        base = _base_name(name)
        if name in MATMULS and bucket == "flops":
            self._start_chain(k, out, [("flops", name, work, self.current)])
            return work
        if pattern is not None and pattern.partial and pattern.live:
            rows, cols = int(out.shape[-2]), int(out.shape[-1])
            known = rows * cols - self._unknown_count(pattern, rows, cols)
            if entries:
                assert source is not None  # _chain_of gives a chain only with its storage
                self._take_back(entries, known, rows * cols, pattern)
                self.chains.pop(source, None)  # taken back once, even if the scores are masked again
            return work - work * known // (rows * cols)  # outputs known without computing cost nothing
        if entries is not None and base in ("masked_fill", "where"):
            self.note("a mask applied to attention scores has values that cannot be known without running "
                      "the task: the full square of scores is counted")
        if entries is not None and base in _ELEMENTWISE:  # copies (clone, _to_copy) add no work
            self._start_chain(k, out, entries + ([("simt", name, work, self.current)] if bucket == "simt" and work else []))
        return work

    def _start_chain(self, k: int, out, entries: list) -> None:
        lay = _layout(out)
        if lay is not None and _covers(out):
            self.chains[k] = (lay, entries)
            self._alive.append(out)

    @staticmethod
    def _unknown_count(p: Pattern, rows: int, cols: int) -> int:
        n_in = p.inside_count(rows, cols)
        return n_in if p.inside is UNKNOWN else rows * cols - n_in

    def _take_back(self, entries: list, known: int, total: int, pattern: Pattern) -> None:
        for bucket, op, amount, index in entries:
            self.adjust(bucket, op, -(amount * known // total), index)
        shape = "lower" if (pattern.kind == "lower") == (pattern.inside is UNKNOWN) else "upper"
        self.note(f"a {shape}-triangular mask on attention scores keeps {total - known} of {total} per "
                  "matrix: only the kept scores' matmul FLOPs and element-wise work are counted")

    @_guarded(lambda *a, **k: None)
    def matmul_fraction(self, name: str, args: tuple) -> tuple[int, int] | None:
        """(entries that are not known zeros, all entries) of a matmul operand that masking in the forward
        pass zeroed in part (softmax of masked scores): the pairs that need no multiply-add."""
        for index in MATMULS.get(name, ()):
            a: Any = args[index] if index < len(args) else None  # a tensor (untyped torch) or not
            p = self.pattern_of(a) if _is_tensor(a) and a.dim() >= 2 else None
            if p is None or not (p.partial and p.live):
                continue
            known = p.inside if p.inside is not UNKNOWN else p.outside
            if known == 0 and not _is_inf(known):
                rows, cols = int(a.shape[-2]), int(a.shape[-1])
                return self._unknown_count(p, rows, cols), rows * cols
        return None

    @_guarded(lambda q, k, causal, mask: kept_lower(int(q.shape[-2]), int(k.shape[-2]),
                                                    0 if causal else int(k.shape[-2])))  # all pairs
    def attention_pairs(self, q, k, causal: bool, mask) -> int:
        """(query, key) pairs per (batch, head) that attention computes: all, the causal ones, or the
        ones a known mask keeps (False in a boolean mask, -inf in an additive one, are masked)."""
        lq, lk = int(q.shape[-2]), int(k.shape[-2])
        if causal:
            return kept_lower(lq, lk, 0)
        if mask is None:
            return lq * lk
        p = self.pattern_of(mask)
        if p is None:
            self.note("attn_mask has values that cannot be known without running the task: the full square "
                      "of (query, key) pairs is counted")
            return lq * lk
        if p.kind == "const" or tuple(mask.shape[-2:]) != (lq, lk):
            return lq * lk

        def masked(v) -> bool:
            return v is not UNKNOWN and (v is False if isinstance(v, bool) else v == -math.inf)

        if masked(p.inside) == masked(p.outside):
            return lq * lk
        n_in = p.inside_count(lq, lk)
        kept = lq * lk - n_in if masked(p.inside) else n_in
        self.note(f"attn_mask keeps {kept} of {lq * lk} (query, key) pairs: only those are counted")
        return kept
