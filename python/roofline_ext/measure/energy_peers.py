"""Library products as energy workloads (:class:`~.energy_workload.EnergyWorkload`): cuBLAS GEMMs
through ``torch.matmul`` and torch's ``copy_`` / ``sum`` / ``fill_``, each with an output check.

An energy floor must not be beaten by a kernel already seen, so the costs it is built on are, per
unit, the lowest that any measured kernel reached, the tool's own or a library's
(``model/energy.py``, ``lowest_costs``). The own kernels alone are not enough: on the H200
(2026-12-02) torch's elementwise kernels moved a byte for 110 pJ against the own copy kernel's 138,
and eight KernelBench L1 references came out below a floor built on the own kernels only. So both
calibration's energy phase and ``benchmarks/energy_roofline.py`` measure these peers beside the
own kernels, the same way (``measure/energy_workload.py``).

The work is what the operation must do: 2·n³ FLOPs for an n x n x n GEMM; 2x the buffer for copy,
1x for sum and for fill. Each peer is batched to about :data:`PEER_BATCH_S` between
synchronisations; its output is checked before its window and again after it, with the output
poisoned first, so an operation that did not run cannot pass: a GEMM's sampled 64 x 64 block
against float64 (largest error within 3% of the block's RMS), copy and fill exactly, sum against a
float64 sum (10^-4 relative). ``torch`` is passed in (this layer never imports it at module level).
"""
from __future__ import annotations

import time
from typing import Any, Callable

from .energy_workload import EnergyWorkload

__all__ = ["PEER_BATCH_S", "SEED", "GEMM_KEYS", "MEMORY_OPS", "peer_names", "gemm_error", "gemm_workload",
           "memory_workload", "peer_workload"]

#: Peers are batched between synchronisations to about this long: short against the counter's
#: 100 ms, long against a synchronisation.
PEER_BATCH_S = 0.02
SEED = 12345
#: The units a cuBLAS GEMM peer measures, and the torch operation of each HBM energy key.
GEMM_KEYS = ("tf32", "fp16", "bf16")
MEMORY_OPS = {"hbm_read": "sum", "hbm_write": "fill_", "hbm_copy": "copy_"}
#: A GEMM's sampled block: rows x columns checked against float64, and the tolerance on the largest
#: error relative to the block's RMS (BF16's output rounding is ~0.01 of it; a wrong product ~1).
_GEMM_SAMPLE = 64
_GEMM_TOL = 0.03
_SUM_TOL = 1e-4


def peer_names(key: str, *, gemm_n: int, nbytes: int) -> list[str]:
    """The library peers of an energy key, by name ([] where none is measured)."""
    if key in GEMM_KEYS:
        return [f"torch.matmul {key} {gemm_n}^3 (cuBLAS)"]
    if key in MEMORY_OPS:
        return [f"torch {MEMORY_OPS[key]} {nbytes / 2**30:g} GiB float32"]
    return []


def _batch_for(op: Callable[[], object], sync: Callable[[], object], clock: Callable[[], float]) -> tuple[int, float]:
    """Ops per synchronisation (about PEER_BATCH_S of them) and one op's time."""
    op()
    sync()
    t0 = clock()
    for _ in range(5):
        op()
    sync()
    op_s = max((clock() - t0) / 5, 1e-6)
    return max(1, round(PEER_BATCH_S / op_s)), op_s


def gemm_error(torch: Any, a: Any, b: Any, c: Any, gen: Any) -> str | None:
    """Why ``c`` is not ``a @ b`` on a sampled block against float64, or None."""
    n = c.shape[0]
    rows = torch.randperm(n, device=c.device, generator=gen)[:_GEMM_SAMPLE]
    cols = torch.randperm(c.shape[1], device=c.device, generator=gen)[:_GEMM_SAMPLE]
    ref = a[rows].double() @ b[:, cols].double()
    got = c[rows][:, cols].double()
    if not bool(torch.isfinite(got).all()):
        return "non-finite values in the sampled block"
    scale = float(ref.pow(2).mean().sqrt())
    err = float((got - ref).abs().max())
    return None if err <= _GEMM_TOL * scale else (f"sampled block off by {err:.4g} (RMS {scale:.4g}, "
                                                  f"tolerance {_GEMM_TOL:g} of it)")


def gemm_workload(torch: Any, device: int, key: str, n: int,
                  clock: Callable[[], float] = time.perf_counter) -> EnergyWorkload:
    """``torch.matmul`` of two n x n matrices into a preallocated output: 2·n³ FLOPs per call.
    TF32 is float32 inputs with TF32 allowed (``set_float32_matmul_precision("high")``, what
    ``allow_tf32`` sets) until the workload is closed."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[key]
    dev = torch.device("cuda", device)
    gen = torch.Generator(device=dev)
    gen.manual_seed(SEED)
    before = torch.get_float32_matmul_precision()
    t: dict[str, Any] = {}

    def sync() -> None:
        torch.cuda.synchronize(dev)

    def op() -> None:
        torch.matmul(t["a"], t["b"], out=t["c"])

    def check() -> str | None:
        t["c"].fill_(float("nan"))  # a product that never ran must not pass on old output
        op()
        sync()
        return gemm_error(torch, t["a"], t["b"], t["c"], gen)

    def close() -> None:
        torch.set_float32_matmul_precision(before)
        t.clear()
        torch.cuda.empty_cache()

    flops = 2.0 * n ** 3

    def call() -> tuple[float, float | None]:
        op()
        return flops, None

    try:
        if key == "tf32":
            torch.set_float32_matmul_precision("high")
        t.update(a=torch.randn(n, n, device=dev, dtype=dtype, generator=gen),
                 b=torch.randn(n, n, device=dev, dtype=dtype, generator=gen),
                 c=torch.empty(n, n, device=dev, dtype=dtype))
        batch, op_s = _batch_for(op, sync, clock)
    except Exception:
        close()
        raise
    return EnergyWorkload(call=call, sync=sync, batch=batch, call_s=batch * op_s, check=check, close=close,
                          info={"m": n, "n": n, "k": n, "dtype": str(dtype), "op_ms": op_s * 1e3, "batch": batch,
                                "float32_matmul_precision": torch.get_float32_matmul_precision(),
                                # what one product (2 n³ FLOPs) must move: A and B read, C written
                                "hbm_bytes_per_call": 3.0 * n * n * t["a"].element_size()})


def memory_workload(torch: Any, device: int, op_name: str, nbytes: int,
                    clock: Callable[[], float] = time.perf_counter) -> EnergyWorkload:
    """torch ``copy_`` (2x the buffer moved), ``sum`` (1x read) or ``fill_`` (1x written) on float32
    buffers of ``nbytes``, each checked exactly (sum against a float64 sum)."""
    dev = torch.device("cuda", device)
    gen = torch.Generator(device=dev)
    gen.manual_seed(SEED)
    numel = nbytes // 4
    t: dict[str, Any] = {}

    def sync() -> None:
        torch.cuda.synchronize(dev)

    ops = {"copy_": lambda: t["dst"].copy_(t["src"]), "fill_": lambda: t["dst"].fill_(1.5),
           "sum": lambda: t.__setitem__("out", t["src"].sum())}
    moved = {"copy_": 2 * numel * 4, "sum": numel * 4, "fill_": numel * 4}[op_name]
    op = ops[op_name]

    def check() -> str | None:
        if "dst" in t:  # poisoned first, so an op that never ran cannot pass on old output
            t["dst"].fill_(-1.0)
        op()
        sync()
        if op_name == "copy_":
            return None if bool(torch.equal(t["dst"], t["src"])) else "destination differs from the source"
        if op_name == "fill_":
            return None if bool((t["dst"] == 1.5).all()) else "not every element holds the fill value"
        ref = float(torch.sum(t["src"], dtype=torch.float64))
        got = float(t["out"])
        return None if abs(got - ref) <= _SUM_TOL * abs(ref) else f"sum {got!r} against float64 {ref!r}"

    def close() -> None:
        t.clear()
        torch.cuda.empty_cache()

    def call() -> tuple[float, float | None]:
        op()
        return float(moved), None

    try:
        if op_name in ("copy_", "sum"):
            t["src"] = torch.rand(numel, device=dev, dtype=torch.float32, generator=gen)
        if op_name in ("copy_", "fill_"):
            t["dst"] = torch.empty(numel, device=dev, dtype=torch.float32)
        batch, op_s = _batch_for(op, sync, clock)
    except Exception:
        close()
        raise
    return EnergyWorkload(call=call, sync=sync, batch=batch, call_s=batch * op_s, check=check, close=close,
                          info={"op": op_name, "buffer_bytes": numel * 4, "bytes_per_call": moved,
                                "op_ms": op_s * 1e3, "batch": batch})


def peer_workload(torch: Any, device: int, key: str, *, gemm_n: int, nbytes: int,
                  clock: Callable[[], float] = time.perf_counter) -> EnergyWorkload:
    """The library peer of an energy key (one of :data:`GEMM_KEYS` or :data:`MEMORY_OPS`)."""
    if key in GEMM_KEYS:
        return gemm_workload(torch, device, key, gemm_n, clock)
    return memory_workload(torch, device, MEMORY_OPS[key], nbytes, clock)
