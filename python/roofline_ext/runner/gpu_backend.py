"""The GPU side of a timing worker: made ready once, checked after every task.

A timing worker (:func:`roofline_ext.runner.worker.serve_persistent`) calls :func:`setup` when it
starts and :func:`cleanup` after each job. Tests hand the pool a stand-in module with the same two
functions, so the worker's life cycle is tested without a GPU.
"""
from __future__ import annotations

import gc
from typing import Any

from ..device import status
from ..measure.timing import L2Flush

# Memory a task may leave cached beyond what the worker held before it (allocator rounding).
_LEAK_SLACK_BYTES = 64 << 20
_baseline: dict[int, int] = {}


def setup(device: int) -> dict[str, Any]:
    """Create the CUDA context on ``device`` and run one tiny matmul and convolution, so that the
    first task's wall time holds no cuBLAS/cuDNN start-up. Raises ``GpuUnavailableError``."""
    import time

    t0 = time.perf_counter()
    status.availability(refresh=True)  # this process's own answer, never one cached before the fork
    status.require_measurement(device)
    import torch

    torch.cuda.set_device(device)
    dev = torch.device(f"cuda:{device}")
    x = torch.randn(64, 64, device=dev)
    (x @ x).sum().item()
    torch.nn.functional.linear(x, x, x[0]).sum().item()  # cuBLASLt: its workspace is kept for good
    torch.nn.functional.conv2d(x[None, None], x[None, None, :3, :3]).sum().item()
    L2Flush(device)()
    torch.cuda.synchronize(device)
    del x
    torch.cuda.empty_cache()
    _baseline[device] = torch.cuda.memory_allocated(device)
    # Everything the worker holds now (torch, its caches, the warm CUDA state) lives as long as the
    # worker: moved out of the collector's generations, so the full collection after every task
    # (cleanup) scans only what tasks made. With torch and dynamo imported, a full collection took
    # 1.1 s on a loaded 2-core VM (2026-12-02), paid once per task.
    gc.freeze()
    return {"device": torch.cuda.get_device_name(device), "index": device,
            "setup_s": time.perf_counter() - t0}


def cleanup(device: int) -> list[str]:
    """Free what the task left and say why the worker cannot go on, if it cannot.

    A CUDA error that poisoned the context raises here (synchronize reports it); memory still
    allocated after the task's objects are gone means something outside the task kept them.
    """
    import torch

    gc.collect()
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.empty(1, device=f"cuda:{device}").fill_(1.0)  # a sticky error shows on the next launch
    torch.cuda.synchronize(device)
    reasons = []
    left = torch.cuda.memory_allocated(device) - _baseline.get(device, 0)
    if left > _LEAK_SLACK_BYTES:
        reasons.append(f"the task left {left / 2**20:.0f} MiB allocated on the GPU after it finished")
    if torch.cuda.current_device() != device:
        reasons.append(f"the task made GPU {torch.cuda.current_device()} the current device")
    if torch.cuda.current_stream(device) != torch.cuda.default_stream(device):
        reasons.append("the task left another CUDA stream current")
    return reasons
