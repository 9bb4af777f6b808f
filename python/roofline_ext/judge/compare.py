"""Is a candidate's output the reference's? A strict judge by default, KernelBench's rule by name.

``strict`` (the default) refuses, output by output, in this order:

1. a different structure (number of outputs, a tensor where the reference has a number);
2. a type that is not exactly ``torch.Tensor`` (a subclass can redefine comparison, printing and
   arithmetic), a different dtype (an fp16 output for an fp32 task is a precision cheat, however
   close its values), device or shape;
3. NaN/Inf where the reference is finite (or finite where the reference is not);
4. a degenerate output: constant, or nearly so, where the reference varies (KernelBench issue
   #165: zeros passed a softmax because every reference value is under the absolute tolerance);
5. a relative L2 error above the tolerance (scale-aware: an absolute tolerance larger than every
   value accepts anything, a relative norm does not);
6. the elementwise rule ``|new - ref| <= atol + rtol * |ref|`` (KernelBench's ``allclose``).

Integer and boolean outputs must be equal. Values are compared independent of layout (a
transposed but equal output passes) and accumulated in float64, chunk by chunk so that a large
output does not need a float64 copy of itself.

``kernelbench``: KernelBench's own check only (shapes, then ``allclose(atol=rtol=tol)``), for
numbers comparable with theirs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..device.native import cuda_function

# Elements per float64 chunk: 32 Mi elements = 256 MB of float64 per operand at most.
_CHUNK = 1 << 25
# A reference "varies" when its spread is this many tolerances of its scale: below that the spread
# is rounding, and a constant output is as right as any.
_VARIES = 10.0
# A candidate whose spread is under this fraction of the reference's (where the reference varies)
# is degenerate: it does not carry the information the reference's output carries.
_FLAT = 0.01
# ...and one whose variation does not follow the reference's (correlation below this) is too;
# honest outputs sit above 0.99 whenever the reference varies by _VARIES tolerances.
_CORRELATED = 0.9


@dataclass(frozen=True)
class Comparison:
    """One comparison of a candidate's outputs with the reference's."""

    ok: bool
    tolerance: float
    reason: str | None = None
    kind: str | None = None  # structure, type, dtype, device, shape, nonfinite, degenerate, rel_l2, values
    max_abs_diff: float = 0.0
    rel_l2: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ok": self.ok, "tolerance": self.tolerance, "max_abs_diff": self.max_abs_diff,
                             "rel_l2": self.rel_l2}
        if not self.ok:
            d.update(reason=self.reason, kind=self.kind)
        return d


def flatten(out: Any) -> list[Any]:
    """The leaves of an output in order: tensors and numbers, through tuples, lists and dicts."""
    if isinstance(out, (list, tuple)):
        return [leaf for o in out for leaf in flatten(o)]
    if isinstance(out, dict):
        return [leaf for k in sorted(out, key=str) for leaf in flatten(out[k])]
    return [out]


def compare_outputs(ref: Any, new: Any, tol: float, mode: str = "strict") -> Comparison:
    """Compare ``new`` with ``ref`` (outputs of one forward) at tolerance ``tol``."""
    r, n = flatten(ref), flatten(new)
    if mode == "kernelbench":
        return _kernelbench(r, n, tol)
    if len(r) != len(n):
        return Comparison(False, tol, f"{len(n)} outputs, the reference has {len(r)}", "structure")
    worst, worst_rel = 0.0, 0.0
    for i, (a, b) in enumerate(zip(r, n)):
        c = _one(i, a, b, tol)
        if not c.ok:
            return Comparison(False, tol, c.reason, c.kind, max(worst, c.max_abs_diff), max(worst_rel, c.rel_l2))
        worst, worst_rel = max(worst, c.max_abs_diff), max(worst_rel, c.rel_l2)
    return Comparison(True, tol, max_abs_diff=worst, rel_l2=worst_rel)


def _one(i: int, a: Any, b: Any, tol: float) -> Comparison:
    if not isinstance(a, torch.Tensor):
        return _number(i, a, b, tol)
    if type(b) is not torch.Tensor:
        return Comparison(False, tol, f"output {i} is a {_type_name(b)}, not a torch.Tensor", "type")
    for what in ("dtype", "device"):
        if getattr(a, what) != getattr(b, what):
            return Comparison(False, tol, f"output {i} has {what} {getattr(b, what)}, the reference "
                                          f"{getattr(a, what)}", what)
    if a.shape != b.shape:
        return Comparison(False, tol, f"output {i} has shape {tuple(b.shape)}, the reference {tuple(a.shape)}",
                          "shape")
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if not a.is_floating_point():
        if not torch.equal(a, b):
            count = int((a != b).sum())
            return Comparison(False, tol, f"output {i}: {count} of {a.numel()} elements differ (a "
                                          f"{a.dtype} output must be exact)", "values")
        return Comparison(True, tol)
    return _floating(i, a.detach(), b.detach(), tol)


def _number(i: int, a: Any, b: Any, tol: float) -> Comparison:
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        if type(b) not in (int, float) or isinstance(b, bool):
            return Comparison(False, tol, f"output {i} is a {_type_name(b)}, the reference a number", "type")
        diff = abs(float(a) - float(b))
        if not (diff <= tol + tol * abs(float(a))) and not (math.isnan(a) and math.isnan(b)):
            return Comparison(False, tol, f"output {i} is {b!r}, the reference {a!r}", "values", diff)
        return Comparison(True, tol, max_abs_diff=diff)
    if a != b:
        return Comparison(False, tol, f"output {i} is {_type_name(b)} {b!r:.60}, the reference {a!r:.60}",
                          "structure")
    return Comparison(True, tol)


@dataclass
class _Sums:
    n: int = 0
    sa: float = 0.0     # sum of ref
    sb: float = 0.0     # sum of new
    saa: float = 0.0    # sum of ref^2
    sbb: float = 0.0    # sum of new^2
    sab: float = 0.0    # sum of ref*new
    sdd: float = 0.0    # sum of (new - ref)^2
    max_abs: float = 0.0
    bad: int = 0        # elements beyond atol + rtol*|ref|
    b_min: float = math.inf
    b_max: float = -math.inf
    nonfinite: str | None = None


def _floating(i: int, a: torch.Tensor, b: torch.Tensor, tol: float) -> Comparison:
    fa, fb = a.reshape(-1), b.reshape(-1)  # layout-independent: a view when contiguous, else a copy
    s = _native_sums(fa, fb, tol)
    if s is None:
        s = _Sums()
        for start in range(0, fa.numel(), _CHUNK):
            _accumulate(s, fa[start:start + _CHUNK].double(), fb[start:start + _CHUNK].double(), tol)
            if s.nonfinite:
                return Comparison(False, tol, f"output {i}: {s.nonfinite}", "nonfinite")
    rel = math.sqrt(s.sdd / s.saa) if s.saa > 0 else math.sqrt(s.sbb / max(s.n, 1))
    degenerate = _degenerate(s, tol)
    if degenerate:
        return Comparison(False, tol, f"output {i} is degenerate: {degenerate}", "degenerate", s.max_abs, rel)
    if rel > tol:
        return Comparison(False, tol, f"output {i}: relative L2 error {rel:.3g} above the tolerance {tol:g} "
                                      f"(max abs diff {s.max_abs:.3g})", "rel_l2", s.max_abs, rel)
    if s.bad:
        return Comparison(False, tol, f"output {i}: {s.bad} of {s.n} elements differ beyond atol=rtol={tol:g} "
                                      f"(max abs diff {s.max_abs:.3g})", "values", s.max_abs, rel)
    return Comparison(True, tol, max_abs_diff=s.max_abs, rel_l2=rel)


_NATIVE_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
                  torch.bfloat16: "bfloat16"}


def _native_sums(a: torch.Tensor, b: torch.Tensor, tol: float) -> _Sums | None:
    """The sums in one pass on the GPU (csrc/judge_stats.cu: each value read once, float64
    accumulators; 1.6 G fp32 elements in milliseconds where the chunked torch path took 56 ms on
    an H200), or None where it does not apply: a CPU tensor, a core built without CUDA, another
    dtype, or a NaN/Inf anywhere (the torch path then says where)."""
    stats_fn = cuda_function("judge_compare_stats")
    name = _NATIVE_DTYPES.get(a.dtype)
    if stats_fn is None or name is None or not a.is_cuda or a.numel() == 0:
        return None
    a, b = a.contiguous(), b.contiguous()
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    r = stats_fn(a.data_ptr(), b.data_ptr(), a.numel(), name, tol, torch.cuda.current_stream(dev).cuda_stream, dev)
    if r["nonfinite"]:
        return None
    return _Sums(n=r["n"], sa=r["sa"], sb=r["sb"], saa=r["saa"], sbb=r["sbb"], sab=r["sab"], sdd=r["sdd"],
                 max_abs=r["max_abs"], bad=r["bad"], b_min=r["b_min"], b_max=r["b_max"])


def _accumulate(s: _Sums, a: torch.Tensor, b: torch.Tensor, tol: float) -> None:
    """Add one chunk (float64) to the sums: every statistic in one host round trip when all is
    finite, else the exact path below (NaN/Inf placement, then the finite elements).

    Why: the comparison runs on every correctness set and every checked trial, and on a
    KernelBench output of 1.6 G elements the elementwise path (a boolean mask per test, a
    temporary per product, a host synchronise per statistic) cost tens of milliseconds per chunk.
    Here the products are dot products (no temporaries), minima and maxima come in pairs, the
    statistics are stacked into one tensor read once, and the elementwise tolerance test runs
    only when some difference exceeds ``tol`` (below that no element can fail
    ``|d| <= tol + tol * |ref|``). The sums are the same float64 sums; a NaN or Inf anywhere
    makes one of them non-finite, which sends the chunk to the exact path."""
    if a.numel() == 0:
        return
    d = b - a
    b_mm, d_mm = torch.aminmax(b), torch.aminmax(d)
    stats = torch.stack([a.sum(), b.sum(), torch.dot(a, a), torch.dot(b, b), torch.dot(a, b), torch.dot(d, d),
                         b_mm.min, b_mm.max, d_mm.min, d_mm.max]).tolist()
    if not all(math.isfinite(x) for x in stats):
        _accumulate_exact(s, a, b, tol)
        return
    sa, sb, saa, sbb, sab, sdd, b_min, b_max, d_min, d_max = stats
    s.n += a.numel()
    s.sa, s.sb, s.saa, s.sbb, s.sab, s.sdd = s.sa + sa, s.sb + sb, s.saa + saa, s.sbb + sbb, s.sab + sab, s.sdd + sdd
    max_abs = max(-d_min, d_max)
    s.max_abs = max(s.max_abs, max_abs)
    if max_abs > tol:
        s.bad += int((d.abs() > tol + tol * a.abs()).sum())
    s.b_min, s.b_max = min(s.b_min, b_min), max(s.b_max, b_max)


def _accumulate_exact(s: _Sums, a: torch.Tensor, b: torch.Tensor, tol: float) -> None:
    fin_a, fin_b = torch.isfinite(a), torch.isfinite(b)
    if not bool(torch.equal(fin_a, fin_b)):
        new_bad = int((fin_a & ~fin_b).sum())
        s.nonfinite = (f"{new_bad} NaN/Inf where the reference is finite" if new_bad
                       else "finite values where the reference has NaN/Inf")
        return
    if not bool(fin_a.all()):
        # Non-finite in both at the same places: they must be the same non-finite values.
        same = (a[~fin_a] == b[~fin_a]) | (torch.isnan(a[~fin_a]) & torch.isnan(b[~fin_a]))
        if not bool(same.all()):
            s.nonfinite = "NaN/Inf that differ from the reference's"
            return
        a, b = a[fin_a], b[fin_a]
    if a.numel() == 0:
        return
    d = b - a
    s.n += a.numel()
    s.sa += float(a.sum())
    s.sb += float(b.sum())
    s.saa += float((a * a).sum())
    s.sbb += float((b * b).sum())
    s.sab += float((a * b).sum())
    s.sdd += float((d * d).sum())
    ad = d.abs()
    s.max_abs = max(s.max_abs, float(ad.max()))
    s.bad += int((ad > tol + tol * a.abs()).sum())
    s.b_min = min(s.b_min, float(b.min()))
    s.b_max = max(s.b_max, float(b.max()))


def _degenerate(s: _Sums, tol: float) -> str | None:
    """Why the output is degenerate where the reference varies, or None."""
    if s.n < 2:
        return None
    mean_a, mean_b = s.sa / s.n, s.sb / s.n
    var_a = max(s.saa / s.n - mean_a * mean_a, 0.0)
    var_b = max(s.sbb / s.n - mean_b * mean_b, 0.0)
    rms_a = math.sqrt(s.saa / s.n)
    std_a, std_b = math.sqrt(var_a), math.sqrt(var_b)
    if std_a <= _VARIES * tol * rms_a or std_a == 0.0:
        return None  # the reference itself is (nearly) constant: nothing to refuse
    if s.b_min == s.b_max:
        return f"every element is {s.b_min:.6g} while the reference varies (std {std_a:.3g})"
    if std_b < _FLAT * std_a:
        return f"nearly constant (std {std_b:.3g}) while the reference's std is {std_a:.3g}"
    corr = (s.sab / s.n - mean_a * mean_b) / (std_a * std_b)
    if corr < _CORRELATED:
        return f"its variation does not follow the reference's (correlation {corr:.3f})"
    return None


def _kernelbench(r: list[Any], n: list[Any], tol: float) -> Comparison:
    """KernelBench's check: the same number of outputs, shapes, then ``allclose(atol=rtol=tol)``."""
    if len(r) != len(n):
        return Comparison(False, tol, f"{len(n)} outputs, the reference has {len(r)}", "structure")
    worst = 0.0
    for i, (a, b) in enumerate(zip(r, n)):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            c = _number(i, a, b, tol)
            if not c.ok:
                return c
            continue
        if a.shape != b.shape:
            return Comparison(False, tol, f"output {i} has shape {tuple(b.shape)}, the reference {tuple(a.shape)}",
                              "shape")
        a64, b64 = a.detach().double(), b.detach().as_subclass(torch.Tensor).double().to(a.device)
        if a.numel():
            worst = max(worst, float((a64 - b64).abs().max()))
        if not torch.allclose(a64, b64, atol=tol, rtol=tol):
            return Comparison(False, tol, f"output {i} differs beyond atol=rtol={tol:g} (max abs diff {worst:.3g})",
                              "values", worst)
    return Comparison(True, tol, max_abs_diff=worst)


def _type_name(x: Any) -> str:
    t = type(x)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
