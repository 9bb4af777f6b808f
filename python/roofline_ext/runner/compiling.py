"""``--compile``: one warm ``torch.compile`` per timing worker, on caches the run owns.

What made a compile sweep slow was paying the compiler's start-up for every task: the timing
worker was replaced after each compiled task (``torch.compile`` changes the process the first time
it runs), so every task paid a CUDA start-up, the import of dynamo, inductor and Triton, and the
start of inductor's compile pool, a ``python -m torch._inductor.compile_worker`` sidecar that
imports torch again (tens of seconds where Python has no bytecode cache). Until that pool is ready
inductor compiles in the worker itself, one kernel after another, so a fresh worker never got to
use it at all.

Now the pool does the compiler's start-up once per timing worker, before the worker's state
snapshot (:func:`warm_up`, run as the worker's ``prepare`` step, while the tasks are still being
counted): a tiny model is compiled on the worker's device, the compile pool is waited for, and
inductor's compile threads are started. What ``torch.compile`` changes in a process the first time
(it wraps ``nn.Module.__init__`` and ``torch.manual_seed``, sets environment variables, adds to
``sys.path``, registers operators, starts its threads) is then part of the snapshot, so a task
that compiles changes nothing the snapshot compares, and the worker is reused; a task that changes
anything else still gets its worker replaced.

Between jobs the worker calls :func:`reset` (``torch._dynamo.reset()``), so no task sees what the
previous one compiled. That is safe because it drops exactly the per-model state: every compiled
frame's cache entries and guards, the recompile counters (which are global: without a reset, 250
tasks would run into dynamo's accumulated recompile limit and fall back to eager silently), and
dynamo's and AOTAutograd's in-memory state; torch's own test suite calls it between tests. It
keeps the process-wide set-up above, and the on-disk caches, whose entries are keyed by content
(the graph, its input shapes and strides, the device, the torch version and the compiler's
configuration): a hit is the code a cold compile of that graph would have produced.

Caches: :class:`RunCaches` gives the run a temporary folder of its own for inductor's and Triton's
on-disk caches, shared by every worker of the run and removed when the run ends, so that the run
never reads or writes the user's caches (``/tmp/torchinductor_<user>``, ``~/.triton``). A cache
variable the user set is left as it is.

Compile threads: inductor's default is one compile process per core (at most 32). The timing
worker compiles while nothing else runs (timing starts when counting is done), so it may use the
cores, but a model has only so many kernels to compile at once: :func:`compile_threads` caps the
pool at :data:`MAX_COMPILE_THREADS`.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any, Mapping

CACHE_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
THREADS_ENV = "TORCHINDUCTOR_COMPILE_THREADS"
MAX_COMPILE_THREADS = 16
_POOL_READY_TIMEOUT_S = 240.0


def compile_threads(cores: int | None = None) -> int:
    """Inductor compile processes for a timing worker: the cores this process may use, at most
    :data:`MAX_COMPILE_THREADS` (1 means compiling in the worker itself, with no pool)."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_COMPILE_THREADS, cores))


class RunCaches:
    """A temporary folder for one run's compile caches; :meth:`env` names it for the workers and
    :meth:`close` removes it (call it when the run's processes are gone)."""

    def __init__(self) -> None:
        self.root: str | None = None

    def env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The variables to add to ``environ`` for the run's workers; none the user set is replaced."""
        add: dict[str, str] = {}
        if any(name not in environ for name in CACHE_ENV):
            if self.root is None:
                self.root = tempfile.mkdtemp(prefix="roofline-ext-compile-")
            for name, sub in zip(CACHE_ENV, ("inductor", "triton")):
                if name not in environ:
                    add[name] = os.path.join(self.root, sub)
        if THREADS_ENV not in environ:
            add[THREADS_ENV] = str(compile_threads())
        return add

    def close(self) -> None:
        if self.root is not None:
            # A compile process of a worker that was just killed may still write a file or two.
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None


def warm_up(device: Any) -> dict[str, Any]:
    """Compile a tiny model on ``device`` (a CUDA index, or a torch device such as ``"cpu"``),
    wait for inductor's compile pool, start its threads, and forget the compiled model: the
    one-time changes ``torch.compile`` makes to a process happen here, before the worker's
    snapshot. Returns what it did and how long it took."""
    import torch

    t0 = time.perf_counter()
    dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
    model = _WarmUp().to(dev).eval()
    x = torch.randn(2, 4, 8, 8, device=dev)
    with torch.no_grad():
        torch.compile(model)(x).sum().item()
    threads = _start_pool()
    reset()
    return {"compile_warm_up_s": time.perf_counter() - t0, "compile_threads": threads,
            "cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}


def _WarmUp() -> Any:
    """A model with the op families tasks use: a convolution, a matmul (extern kernels), a fused
    element-wise chain, a normalisation and a reduction (generated kernels)."""
    import torch

    class WarmUp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
            self.norm = torch.nn.LayerNorm(8)
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x):
            y = torch.relu(self.conv(x)) * 0.5 + 1.0
            y = self.lin(self.norm(y))
            return torch.softmax(y, dim=-1).sum(dim=(2, 3))

    return WarmUp()


def _start_pool() -> int:
    """Wait until inductor's subprocess pool is ready (until then inductor compiles in-process,
    serially) and start every thread of the thread pool it submits through (threads it would
    otherwise start during a task, which the snapshot would see as left running)."""
    from torch._inductor.async_compile import AsyncCompile, get_compile_threads

    n = get_compile_threads()
    if n <= 1:
        return n
    AsyncCompile.wait_pool_ready(timeout=_POOL_READY_TIMEOUT_S)
    barrier = threading.Barrier(n)

    def meet() -> None:
        try:
            barrier.wait(timeout=30)
        except threading.BrokenBarrierError:
            pass

    for f in [AsyncCompile.pool().submit(meet) for _ in range(n)]:
        f.result()
    return n


def reset() -> None:
    """Forget everything compiled so far (see the module's note on why that is safe); a no-op in
    a process that never imported dynamo."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()
