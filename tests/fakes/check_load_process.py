"""A concurrent load for tests/test_check_load_gpu.py: another process using the GPU while `check` runs.

    python tests/fakes/check_load_process.py mixed|hbm|gemm [seconds]   # load until killed (or seconds)
    python tests/fakes/check_load_process.py copy-probe                  # torch copy_ of 2 GiB, TB/s as JSON

``mixed`` is issue 29's load (bf16 8192^3 products and an in-place pass over 4 GiB, ten of each per
synchronise), ``hbm`` only the 4 GiB pass (memory traffic), ``gemm`` only the products (tensor
cores). It prints ``ready`` once the first round has run, so the caller starts its check on a GPU
that is already loaded. ``copy-probe`` is an independent path for the check's HBM copy figure.
"""
from __future__ import annotations

import json
import sys
import time


def _load(kind: str, seconds: float) -> None:
    import torch

    gemm, hbm = kind in ("mixed", "gemm"), kind in ("mixed", "hbm")
    if not (gemm or hbm):
        raise SystemExit(f"unknown load kind {kind!r} (mixed, hbm, gemm)")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) if gemm else None
    b = torch.randn_like(a) if a is not None else None
    x = torch.empty(1 << 30, device="cuda").uniform_() if hbm else None
    t0, ready = time.time(), False
    while time.time() - t0 < seconds:
        for _ in range(10):
            if a is not None:
                _ = a @ b  # the product is the load; its value is not needed
            if x is not None:
                x.mul_(1.0)
        torch.cuda.synchronize()
        if not ready:
            print("ready", flush=True)
            ready = True


def _copy_probe() -> None:
    import torch

    n = (2 << 30) // 4
    src = torch.empty(n, device="cuda").uniform_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    median_ms = 0.5 * (times[4] + times[5])
    assert torch.equal(dst, src)
    print(json.dumps({"tbps": 2 * src.numel() * 4 / (median_ms * 1e-3) / 1e12, "median_ms": median_ms}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "copy-probe":
        _copy_probe()
    else:
        _load(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 600.0)
