"""``roofline-ext fleet --scheduler ADDRESS``: the check on every GPU of every Dask worker.

The engine is Dask distributed, the layout dask-cuda's: one worker per GPU, its
``CUDA_VISIBLE_DEVICES`` pointing at that GPU, declared with a ``GPU`` resource
(``dask worker ADDRESS --resources GPU=1``). The fleet

1. asks every worker which GPUs it sees (NVML and CUDA listing, no CUDA context);
2. submits one task per GPU, pinned to its worker (``workers=[address]``, no stealing) and holding
   one ``GPU`` resource where the worker declares them, so no two checks share a GPU; workers that
   see the same physical GPU (same UUID) are chained so that they take turns;
3. each task runs ``python -m roofline_ext.cli check --device N --json`` in a fresh process, so the
   check's CUDA context ends with it and a crash is that task's result, not the worker's death;
4. gathers the JSON and summarizes it (check/fleet.py: per-SKU medians, spread, stragglers).

A worker that sees no GPU still runs one task: its check reports UNKNOWN and why.
"""
from __future__ import annotations

import datetime as _dt
import json
import socket
import subprocess
import sys
import time
from typing import Any, Mapping, Sequence

from ..check.fleet import DEFAULT_STRAGGLER_FRACTION, FleetReport, summarize_fleet
from ..errors import UserError

#: Seconds one check may take on a worker (start-up included) before its task gives up.
DEFAULT_TASK_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 20.0


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise UserError(f"the fleet needs Dask distributed, which is not installed ({exc}); "
                        "install roofline-ext[fleet] (or: pip install 'dask[distributed]')") from None
    return distributed


def worker_inventory() -> dict[str, Any]:
    """Runs on a worker: its host and the GPUs it sees (CUDA order), without a CUDA context."""
    import os

    from ..device.listing import devices
    from ..device.status import availability

    avail = availability()
    gpus = [{"index": d.index, "uuid": d.uuid, "name": d.name} for d in devices()
            if d.index is not None and d.can_measure]
    return {"host": socket.gethostname(), "gpus": gpus, "availability": avail.to_dict(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _synthetic_check(reason: str) -> dict[str, Any]:
    """A check document for a task whose check printed none (it crashed or timed out)."""
    from .._version import __version__
    from ..check.result import CHECK_KIND, CHECK_SCHEMA_VERSION

    return {"schema_version": CHECK_SCHEMA_VERSION, "kind": CHECK_KIND, "host": socket.gethostname(),
            "date": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
            "package_version": __version__, "verdict": "UNKNOWN", "reason": reason, "exit_code": 6,
            "devices": [], "availability": {}}


def check_task(device: int, tolerances: Sequence[str], timeout_s: float, after: Any = None) -> dict[str, Any]:
    """Runs on a worker: ``roofline-ext check --device N --json`` in a fresh process, timed.

    ``after`` is only there so that Dask runs this task after another (checks of one shared GPU).
    """
    cmd = [sys.executable, "-m", "roofline_ext.cli", "check", "--device", str(device), "--json"]
    for t in tolerances:
        cmd += ["--tolerance", t]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        doc, rc, err = _synthetic_check(f"the check did not finish within {timeout_s:g} s"), None, ""
    else:
        rc, err = proc.returncode, proc.stderr[-2000:]
        try:
            doc = json.loads(proc.stdout)
        except ValueError:
            doc = _synthetic_check(f"the check exited {rc} without a result: {err.strip().splitlines()[-1:] or ''}")
    return {"host": socket.gethostname(), "device": device, "wall_s": round(time.monotonic() - t0, 3),
            "returncode": rc, "stderr_tail": err, "check": doc}


def _workers(client: Any) -> dict[str, Mapping[str, Any]]:
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # distributed before n_workers existed listed every worker
        info = client.scheduler_info()
    return dict(info.get("workers") or {})


def _plan(workers: Mapping[str, Mapping[str, Any]], inventory: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One task per (worker, GPU); a worker without GPUs gets one (it will say UNKNOWN, and why)."""
    tasks = []
    for addr in sorted(workers):
        inv = inventory.get(addr)
        gpus = inv.get("gpus") if isinstance(inv, Mapping) else None
        has_resource = "GPU" in (workers[addr].get("resources") or {})
        for gpu in gpus or [{"index": 0, "uuid": None, "name": None}]:
            tasks.append({"worker": addr, "device": int(gpu["index"]), "uuid": gpu.get("uuid"),
                          "resources": {"GPU": 1} if has_resource else None})
    return tasks


def _submit(client: Any, tasks: Sequence[dict[str, Any]], tolerances: Sequence[str], timeout_s: float) -> list[Any]:
    last_on_gpu: dict[str, Any] = {}
    futures = []
    for i, t in enumerate(tasks):
        after = last_on_gpu.get(t["uuid"]) if t["uuid"] else None
        fut = client.submit(check_task, t["device"], list(tolerances), timeout_s, after, workers=[t["worker"]],
                            allow_other_workers=False, resources=t["resources"], pure=False,
                            key=f"roofline-ext-check-{i}-{time.time_ns()}")
        if t["uuid"]:
            last_on_gpu[t["uuid"]] = fut
        futures.append(fut)
    return futures


def _collect(distributed: Any, futures: Sequence[Any], tasks: Sequence[dict[str, Any]],
             task_timeout_s: float) -> list[dict[str, Any]]:
    """Each task's result; a task that errored or never ran (its worker left: pinned tasks are not
    moved elsewhere) becomes an UNKNOWN check saying so, instead of hanging the fleet."""
    chain: dict[Any, int] = {}
    for t in tasks:
        chain[t["uuid"] or id(t)] = chain.get(t["uuid"] or id(t), 0) + 1
    try:
        distributed.wait(futures, timeout=task_timeout_s * max(chain.values()) + 30)
    except TimeoutError:
        pass
    out = []
    for fut, t in zip(futures, tasks):
        if fut.status == "finished":
            r = dict(fut.result())
        else:
            why = f"the task on worker {t['worker']} did not finish ({fut.status})"
            if fut.status == "error":
                why += f": {fut.exception()}"
            fut.cancel()
            r = {"host": t["worker"], "device": t["device"], "wall_s": None, "returncode": None,
                 "check": _synthetic_check(why)}
        out.append(dict(r, worker=t["worker"], uuid=t["uuid"]))
    return out


def run_fleet(scheduler: str, *, tolerances: Sequence[str] = (), straggler_fraction: float = DEFAULT_STRAGGLER_FRACTION,
              task_timeout_s: float = DEFAULT_TASK_TIMEOUT_S, connect_timeout_s: float = CONNECT_TIMEOUT_S,
              client: Any = None) -> FleetReport:
    """Check every GPU of every worker of the Dask scheduler at ``scheduler`` and summarize."""
    distributed = _distributed()
    t0 = time.monotonic()
    own = client is None
    if own:
        try:
            client = distributed.Client(scheduler, timeout=connect_timeout_s)
        except (OSError, TimeoutError) as exc:
            raise UserError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
    try:
        workers = _workers(client)
        if not workers:
            raise UserError(f"the Dask scheduler at {scheduler} has no workers")
        inventory = client.run(worker_inventory, on_error="return")
        tasks = _plan(workers, inventory)
        futures = _submit(client, tasks, tolerances, task_timeout_s)
        got = _collect(distributed, futures, tasks, task_timeout_s)
    finally:
        if own:
            client.close()
    docs = [(r["check"], r.get("worker") or r["host"]) for r in got]
    summary = summarize_fleet(docs, straggler_fraction=straggler_fraction)
    return FleetReport(f"dask://{scheduler}", _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
                       summary, tuple(got), wall_s=round(time.monotonic() - t0, 3), workers=len(workers))


def fleet_from_dir(directory: str, *, straggler_fraction: float = DEFAULT_STRAGGLER_FRACTION) -> FleetReport:
    """Summarize check results produced any other way (a Slurm job array, files copied by hand)."""
    from ..check.fleet import load_dir

    docs, ignored = load_dir(directory)
    summary = summarize_fleet(docs, straggler_fraction=straggler_fraction, ignored=ignored)
    return FleetReport(str(directory), _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
                       summary, tuple({"worker": src, "check": doc} for doc, src in docs))
