#!/usr/bin/env python3
"""roofline_ext's measured arithmetic roofs against what a user would run instead, in one process.

Ours: ``measure_compute`` (SIMT FP32/FP64 FMA; mma.sync and, on Hopper, wgmma tensor-core loops for
TF32/FP16/BF16/FP8/INT8; every kernel verified before it is timed).
Peers, random data, CUDA events around each product, warm-up, repetitions, median/best/CV, NVML
sampled during each:
  ``torch.matmul`` (cuBLAS) for FP32 with TF32 off, TF32, FP16 and BF16;
  ``torch._scaled_mm`` (e4m3 x e4m3 -> bf16, unit scales; with and without fast accumulation) for FP8;
  ``torch._int_mm`` (int8 x int8 -> int32) for INT8;
at 8192^3 and 16384^3, plus the shapes where a sweep on an H200 found the library fastest
(M=4096: N=4096, K=12288 for TF32/FP16/BF16; N=K=12288 for FP8/INT8). The best product per
precision is the peer; the table's ratio is ours (best path, median) / that peer (median).

  python benchmarks/compute_vs_peers.py [--device 0] [--reps 10] [--quick]
  python benchmarks/compute_vs_peers.py --peers-only     # torch only (no roofline_ext build needed)
Writes JSON to benchmarks/results/compute-<gpu>-<date>.json (or --json PATH) and prints the table
last. Exit status: 0 done, 1 a target missed under --strict, 3 no GPU (one line says why).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import platform
import re
import statistics
import sys
import threading
from pathlib import Path
from typing import Any, Callable

RESULTS = Path(__file__).resolve().parent / "results"
try:  # the installed package; a source checkout's python/ only when none is installed
    import roofline_ext  # noqa: F401
except ImportError:
    sys.path.append(str(Path(__file__).resolve().parents[1] / "python"))

BIG = [(8192, 8192, 8192), (16384, 16384, 16384)]
SWEEP_BEST = {  # where a GEMM shape sweep on an H200 (2026-11-30) found cuBLAS fastest
    "tf32": (4096, 4096, 12288), "fp16": (4096, 4096, 12288), "bf16": (4096, 4096, 12288),
    "fp8": (4096, 12288, 12288), "int8": (4096, 12288, 12288),
}
# The targets: ours / best peer product of the same precision.
TARGET_RATIO = {"tf32": 1.10, "fp16": 1.15, "bf16": 1.15, "fp8": 1.10, "int8": 1.10}


# --- telemetry ------------------------------------------------------------------------------------

class _PynvmlSampler:
    """Fallback telemetry for --peers-only runs (no native core): pynvml, every 50 ms."""

    def __init__(self, device: int):
        import pynvml  # nvidia-ml-py

        self._nv = pynvml
        pynvml.nvmlInit()
        # NVML's index, which equals CUDA's only without CUDA_VISIBLE_DEVICES reordering; good enough
        # for a fallback (the package's sampler matches by PCI bus id).
        self._h = pynvml.nvmlDeviceGetHandleByIndex(device)
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        nv, h = self._nv, self._h
        while True:
            s: dict[str, Any] = {}
            with contextlib.suppress(Exception):
                s["sm_clock_mhz"] = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
            with contextlib.suppress(Exception):
                s["power_w"] = nv.nvmlDeviceGetPowerUsage(h) / 1000.0
            with contextlib.suppress(Exception):
                s["temperature_c"] = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
            with contextlib.suppress(Exception):
                s["reasons"] = nv.nvmlDeviceGetCurrentClocksEventReasons(h)
            self.samples.append(s)
            if self._stop.wait(0.05):
                break

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()

    def summary(self) -> dict[str, Any] | None:
        def st(key):
            v = [s[key] for s in self.samples if s.get(key) is not None]
            return {"min": min(v), "median": statistics.median(v), "max": max(v)} if v else None
        mask = 0
        for s in self.samples:
            mask |= int(s.get("reasons") or 0)
        return {"samples": len(self.samples), "sm_clock_mhz": st("sm_clock_mhz"), "power_w": st("power_w"),
                "temperature_c": st("temperature_c"), "throttle_reasons_mask": mask}


@contextlib.contextmanager
def _telemetry(device: int, native: bool):
    """Yields an object with .summary(): the package's sampler when built, else pynvml, else None."""
    if native:
        try:
            from roofline_ext.device.telemetry import sampling

            with sampling(device) as tel:
                yield tel
            return
        except ImportError:
            pass
    try:
        sampler = _PynvmlSampler(device)
    except Exception:
        yield None
        return
    with sampler:
        yield sampler


def _summary(tel) -> dict[str, Any] | None:
    return tel.summary() if tel is not None else None


# --- peers ----------------------------------------------------------------------------------------

def _time(torch, fn: Callable[[], Any], flop: float, reps: int, warmup: int) -> dict[str, Any]:
    from roofline_ext.measure.timing import event_times_ms

    ms = event_times_ms(fn, reps, warmup)
    med, best, mean = statistics.median(ms), min(ms), statistics.fmean(ms)
    return {"tflops_median": flop / (med * 1e-3) / 1e12, "tflops_best": flop / (best * 1e-3) / 1e12,
            "cv": statistics.stdev(ms) / mean if len(ms) > 1 else 0.0, "median_ms": med, "best_ms": best,
            "flop_per_launch": flop, "reps": len(ms)}


def _peer_runs(torch, precision: str, shapes: list[tuple[int, int, int]]):
    """(label, shape, make() -> zero-arg callable) per product to time; make() allocates lazily."""
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(1234)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, device=dev, dtype=dtype, generator=gen)

    for (m, n, k) in shapes:
        if precision in ("fp32", "tf32", "fp16", "bf16"):
            dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]

            def make(m=m, n=n, k=k, dtype=dtype):
                a, b = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)
                out = torch.empty(m, n, device=dev, dtype=dtype)
                return lambda: torch.matmul(a, b, out=out)
            yield "torch.matmul", (m, n, k), make
        elif precision == "fp8":
            for fast in (False, True):
                def make(m=m, n=n, k=k, fast=fast):
                    a = randn(m, k).to(torch.float8_e4m3fn)
                    b = randn(n, k).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
                    one = torch.tensor(1.0, device=dev)
                    return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                    use_fast_accum=fast)
                yield f"torch._scaled_mm{' (fast accum)' if fast else ''}", (m, n, k), make
        elif precision == "int8":
            def make(m=m, n=n, k=k):
                a = torch.randint(-127, 128, (m, k), device=dev, dtype=torch.int8, generator=gen)
                b = torch.randint(-127, 128, (n, k), device=dev, dtype=torch.int8, generator=gen).t()
                return lambda: torch._int_mm(a, b)
            yield "torch._int_mm", (m, n, k), make


@contextlib.contextmanager
def _tf32(torch, on: bool):
    old = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old[0]
        torch.set_float32_matmul_precision(old[1])


def measure_peers(device: int, precisions: list[str], reps: int, warmup: int, quick: bool, native: bool,
                  log: Callable[[str], None]) -> dict[str, Any]:
    import torch

    torch.cuda.set_device(device)
    out: dict[str, Any] = {}
    for prec in precisions:
        if prec == "fp64":
            continue  # cuBLAS DGEMM runs on the FP64 tensor cores (DMMA), not the SIMT FMA we measure
        shapes = BIG[:1] if quick else list(BIG)
        if prec in SWEEP_BEST and SWEEP_BEST[prec] not in shapes:
            shapes.append(SWEEP_BEST[prec])
        runs = []
        with _tf32(torch, prec == "tf32"):
            for label, shape, make in _peer_runs(torch, prec, shapes):
                m, n, k = shape
                flop = 2.0 * m * n * k
                n_reps = max(3, reps // 2) if (prec == "fp32" and m >= 16384) else reps
                entry: dict[str, Any] = {"op": label, "shape": list(shape)}
                fn = None
                try:
                    fn = make()
                    with _telemetry(device, native) as tel:
                        entry.update(_time(torch, fn, flop, n_reps, warmup))
                    entry["telemetry"] = _summary(tel)
                    entry["status"] = "ok"
                except Exception as exc:  # an op this torch/GPU lacks is recorded, not fatal
                    entry.update(status="error", reason=f"{type(exc).__name__}: {exc}".splitlines()[0])
                runs.append(entry)
                log(f"  peer {prec:5s} {label:32s} {m}x{n}x{k}: " + (
                    f"{entry['tflops_median']:.1f} TFLOP/s median" if entry["status"] == "ok" else entry["reason"]))
                del fn
                torch.cuda.empty_cache()
        ok = [r for r in runs if r["status"] == "ok"]
        best = max(ok, key=lambda r: r["tflops_median"]) if ok else None
        out[prec] = {"runs": runs, "best": best}
    return out


# --- ours -----------------------------------------------------------------------------------------

def measure_ours(device: int, precisions: list[str], reps: int, warmup: int, log) -> dict[str, Any]:
    from roofline_ext.measure.compute import measure_compute

    res = measure_compute(device, precisions=tuple(precisions), reps=reps, warmup=warmup,
                          progress=lambda msg: log(f"  ours {msg}"))
    return res.to_dict()


# --- report ---------------------------------------------------------------------------------------

def _identity(device: int) -> dict[str, Any]:
    import torch

    p = torch.cuda.get_device_properties(device)
    ident: dict[str, Any] = {"gpu": p.name, "cc": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count,
                             "torch": torch.__version__, "cuda": torch.version.cuda,
                             "python": platform.python_version(), "host": platform.node()}
    with contextlib.suppress(Exception):
        ident["uuid"] = str(p.uuid) if str(p.uuid).startswith("GPU-") else f"GPU-{p.uuid}"
    with contextlib.suppress(Exception):
        import pynvml

        pynvml.nvmlInit()
        ident["driver"] = pynvml.nvmlSystemGetDriverVersion()
    with contextlib.suppress(Exception):
        from roofline_ext.device.listing import device as get_device

        d = get_device(device)
        ident.update(gpu=d.name, uuid=d.uuid, driver=getattr(d, "driver_version", ident.get("driver")))
    return ident


def _table(ours: dict[str, Any] | None, peers: dict[str, Any]) -> tuple[str, list[str]]:
    rows = [f"{'prec':5s} {'ours path':9s} {'ours med':>9s} {'ours best':>9s} {'%clk':>6s} {'%kclk':>6s} "
            f"{'peer':30s} {'shape':>17s} {'peer med':>9s} {'ratio':>6s} {'target':>6s}"]
    missed: list[str] = []
    precs = list(dict.fromkeys(list((ours or {}).get("precisions", {})) + list(peers)))
    for prec in precs:
        o = ((ours or {}).get("precisions") or {}).get(prec) or {}
        pb = (peers.get(prec) or {}).get("best")
        if o.get("status") == "ok":
            # of the clock-derived peak at NVML's clock, and at the clock the kernel counted
            fr = [o.get("fraction_of_clock_derived"), o.get("fraction_of_clock_derived_at_kernel_clock")]
            ours_txt = (f"{o.get('path', ''):9s} {o['tflops_median']:9.1f} {o['tflops_best']:9.1f} "
                        + " ".join(f"{(f'{100 * x:5.1f}%' if x else '   n/a'):>6s}" for x in fr))
        elif o:
            ours_txt = f"{o.get('status', '?'):9s} {'-':>9s} {'-':>9s} {'':>6s} {'':>6s}"
        else:
            ours_txt = f"{'-':9s} {'-':>9s} {'-':>9s} {'':>6s} {'':>6s}"
        if pb:
            shape = "x".join(str(v) for v in pb["shape"])
            peer_txt = f"{pb['op']:30s} {shape:>17s} {pb['tflops_median']:9.1f}"
        else:
            peer_txt = f"{'-':30s} {'':>17s} {'-':>9s}"
        ratio = o["tflops_median"] / pb["tflops_median"] if (pb and o.get("status") == "ok") else None
        target = TARGET_RATIO.get(prec)
        if ratio is not None and target is not None and ratio < target:
            missed.append(f"{prec}: {ratio:.2f}x < {target:.2f}x")
        rows.append(f"{prec:5s} {ours_txt} {peer_txt} {(f'{ratio:5.2f}x' if ratio else '    -'):>6s} "
                    f"{(f'{target:.2f}x' if target else ''):>6s}")
    return "\n".join(rows), missed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--reps", type=int, default=10, help="timed repetitions per peer product (default 10)")
    ap.add_argument("--ours-reps", type=int, default=20, help="timed repetitions per kernel of ours (default 20)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--precisions", default="fp32,fp64,tf32,fp16,bf16,fp8,int8")
    ap.add_argument("--quick", action="store_true", help="peers at 8192^3 and the sweep's best shape only")
    ap.add_argument("--peers-only", action="store_true", help="torch only; no roofline_ext build needed")
    ap.add_argument("--json", type=Path, default=None, help="output path (default benchmarks/results/...)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a ratio target is missed")
    args = ap.parse_args(argv)
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]

    def log(msg: str) -> None:
        print(msg, flush=True)

    try:
        import torch
    except ImportError:
        print("compute_vs_peers: torch is not installed; the peers need it", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        reason = "torch sees no CUDA device"
        with contextlib.suppress(Exception):
            from roofline_ext.device.status import availability

            reason = availability().message
        print(f"compute_vs_peers: no GPU: {reason}", file=sys.stderr)
        return 3

    started = dt.datetime.now(dt.timezone.utc)
    ident = _identity(args.device)
    ours = None
    if not args.peers_only:
        log("ours:")
        # Ours first, on a cool card; the peers (minutes of cuBLAS at the power cap) after.
        ours = measure_ours(args.device, precisions, args.ours_reps, args.warmup, log)
    log("peers:")
    peers = measure_peers(args.device, precisions, args.reps, args.warmup, args.quick, not args.peers_only, log)

    table, missed = _table(ours, peers)
    result = {
        "benchmark": "compute_vs_peers",
        "date": started.isoformat(timespec="seconds"),
        "duration_s": round((dt.datetime.now(dt.timezone.utc) - started).total_seconds(), 1),
        "identity": ident,
        "settings": {"peer_reps": args.reps, "ours_reps": args.ours_reps, "warmup": args.warmup,
                     "quick": args.quick, "peers_only": args.peers_only},
        "ours": ours,
        "peers": peers,
        "ratios": {p: (ours["precisions"][p]["tflops_median"] / peers[p]["best"]["tflops_median"])
                   for p in peers if ours and peers[p].get("best")
                   and (ours.get("precisions", {}).get(p) or {}).get("status") == "ok"},
        "targets": TARGET_RATIO,
        "missed": missed,
    }
    path = args.json
    if path is None:
        gpu = re.sub(r"[^a-z0-9]+", "-", ident["gpu"].lower()).strip("-")
        path = RESULTS / f"compute-{gpu}-{started.date().isoformat()}{'-peers' if args.peers_only else ''}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(f"\nwrote {path}")
    print(f"\n{ident['gpu']} ({ident.get('uuid', '?')}), driver {ident.get('driver', '?')}, CUDA {ident.get('cuda')}, "
          f"{started:%Y-%m-%d %H:%M} UTC; TFLOP/s (INT8: TOP/s), ratio = ours median / best peer median; "
          "%clk / %kclk: of the clock-derived peak at NVML's SM clock / at the clock the kernel counted")
    print(table)
    if missed:
        print("targets missed: " + "; ".join(missed))
    return 1 if (missed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
