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
4. gathers the JSON and summarizes it (check/stragglers.py: per-SKU medians, spread, stragglers).

A worker that sees no GPU still runs one task: its check reports UNKNOWN and why.

Before Dask is handed the address, it is checked (:func:`check_address`: a scheme Dask speaks, a
host, a port in range) and, for ``tcp://``, probed (:func:`probe_scheduler`): connected within the
timeout, and the first bytes the peer sends must be the length prefix of a Dask handshake (a
scheduler speaks first). An HTTP server says nothing until asked, so it is refused after the
timeout instead of hanging Dask's connect; a server that speaks some other protocol is refused from
its first bytes instead of letting Dask read them as a message length (``HTTP/1.1`` is 3 EiB).
The probe costs the scheduler one INFO line ("closed before handshake completed").
"""
from __future__ import annotations

import json
import math
import socket
import struct
import subprocess
import sys
import time
import urllib.parse
from typing import Any, Mapping, Sequence

from .._version import __version__
from ..check.result import CHECK_KIND, CHECK_SCHEMA_VERSION
from ..check.stragglers import DEFAULT_STRAGGLER_FRACTION, FleetReport, load_dir, summarize_fleet
from ..device import listing, status
from ..errors import UserError
from ..timestamps import utc_now

#: Seconds one check may take on a worker (start-up included) before its task gives up.
DEFAULT_TASK_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 20.0
#: The schemes of Dask's comms; a bare HOST:PORT is tcp.
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx", "inproc")
DEFAULT_PORT = 8786
#: A handshake is a few hundred bytes; a "length" above this is another protocol's first bytes.
_MAX_HANDSHAKE_BYTES = 64 * 2**20


def check_address(address: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a Dask scheduler address, or a ``UserError`` saying what is wrong."""
    text = str(address).strip()
    shown = f"--scheduler {address!r}"
    if not text or any(c.isspace() for c in text):
        raise UserError(f"{shown}: not an address; give the scheduler's, e.g. tcp://head-node:{DEFAULT_PORT}")
    if "://" not in text:
        text = "tcp://" + text
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:  # a port that is no number, or out of range
        raise UserError(f"{shown}: {exc}; the port is a number from 1 to 65535") from None
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        raise UserError(f"{shown}: a web address; Dask schedulers listen on tcp://HOST:{DEFAULT_PORT} "
                        "(http://HOST:8787 is the dashboard)")
    if scheme not in SCHEMES:
        raise UserError(f"{shown}: Dask speaks {', '.join(s + '://' for s in SCHEMES)}, not {scheme}://")
    if scheme == "inproc":
        return scheme, parts.netloc, None
    if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise UserError(f"{shown}: not HOST:PORT after {scheme}://")
    if port == 0:
        raise UserError(f"{shown}: port 0; the port is a number from 1 to 65535")
    return scheme, parts.hostname, port if port is not None else DEFAULT_PORT


def probe_scheduler(address: str, timeout_s: float) -> None:
    """Connect to a ``tcp://`` scheduler and read the length prefix of its handshake, all within
    ``timeout_s``; a ``UserError`` saying why when the peer is unreachable or is no Dask scheduler.
    Other schemes are left to Dask (their first bytes are TLS or WebSocket framing)."""
    scheme, host, port = check_address(address)
    if scheme != "tcp" or port is None:
        return
    deadline = time.monotonic() + timeout_s
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except socket.timeout:
        raise UserError(f"cannot reach the Dask scheduler at {address}: no answer within {timeout_s:g} s "
                        "(--timeout)") from None
    except OSError as exc:
        raise UserError(f"cannot reach the Dask scheduler at {address}: {exc.strerror or exc}") from None
    with sock:
        got = b""
        try:
            while len(got) < 8:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(8 - len(got))
                if not chunk:
                    break
                got += chunk
        except socket.timeout:
            raise UserError(f"{address} accepted the connection but sent no Dask handshake within {timeout_s:g} s "
                            "(--timeout): is it a Dask scheduler?") from None
        except OSError as exc:
            raise UserError(f"cannot read from {address}: {exc.strerror or exc}") from None
    if len(got) < 8:
        raise UserError(f"{address} closed the connection without a Dask handshake: is it a Dask scheduler?")
    (length,) = struct.unpack("<Q", got)
    if not 0 < length <= _MAX_HANDSHAKE_BYTES:
        raise UserError(f"{address} is not a Dask scheduler: its first bytes {got!r} are not a Dask message")


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

    avail = status.availability()
    gpus = [{"index": d.index, "uuid": d.uuid, "name": d.name} for d in listing.devices()
            if d.index is not None and d.can_measure]
    return {"host": socket.gethostname(), "gpus": gpus, "availability": avail.to_dict(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def _synthetic_check(reason: str) -> dict[str, Any]:
    """A check document for a task whose check printed none (it crashed or timed out)."""
    return {"schema_version": CHECK_SCHEMA_VERSION, "kind": CHECK_KIND, "host": socket.gethostname(),
            "date": utc_now(),
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
    """Check every GPU of every worker of the Dask scheduler at ``scheduler`` and summarize.

    ``connect_timeout_s`` bounds the probe and Dask's connect (never above ``task_timeout_s``)."""
    for name, value in (("task_timeout_s", task_timeout_s), ("connect_timeout_s", connect_timeout_s)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise UserError(f"{name} must be a finite positive number of seconds, not {value!r}")
    own = client is None
    if own:
        check_address(scheduler)
    distributed = _distributed()
    t0 = time.monotonic()
    connect_timeout_s = min(connect_timeout_s, task_timeout_s)
    if own:
        probe_scheduler(scheduler, connect_timeout_s)
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
    return FleetReport(f"dask://{scheduler}", utc_now(),
                       summary, tuple(got), wall_s=round(time.monotonic() - t0, 3), workers=len(workers))


def fleet_from_dir(directory: str, *, straggler_fraction: float = DEFAULT_STRAGGLER_FRACTION) -> FleetReport:
    """Summarize check results produced any other way (a Slurm job array, files copied by hand)."""
    docs, ignored = load_dir(directory)
    summary = summarize_fleet(docs, straggler_fraction=straggler_fraction, ignored=ignored)
    return FleetReport(str(directory), utc_now(),
                       summary, tuple({"worker": src, "check": doc} for doc, src in docs))
