"""Helpers for the runner tests (no tests here): misbehaving task files, and a CPU stand-in for the
GPU timing backend that the real timing worker runs, so that reuse, state checks and replacement
are tested without a GPU.

The stand-in is written into a temporary folder that goes on ``sys.path``; the fork server takes
the runner's ``sys.path``, so the workers import it as they would the real backend.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

# A task whose result depends on the state a previous task could have left: torch.matmul, the
# working directory (it reads a file next to itself by a relative path only when cwd is its folder,
# which it never is: the path is absolute) and the default dtype.
GOOD = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(n, n))

    def forward(self, x):
        return torch.matmul(x, self.w).relu().sum(dim=0)

def get_inputs():
    return [torch.randn(64, {n})]

def get_init_inputs():
    return [{n}]
"""

MISBEHAVING = {
    "exit": """
        import os, torch
        class Model(torch.nn.Module):
            def forward(self, x):
                os._exit(0)
        def get_inputs():
            return [torch.randn(8)]
    """,
    "chdir": """
        import os, torch
        os.chdir("/")
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 2
        def get_inputs():
            return [torch.randn(8)]
    """,
    "sigint": """
        import signal, torch
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        class Model(torch.nn.Module):
            def forward(self, x):
                return x + 1
        def get_inputs():
            return [torch.randn(8)]
    """,
    "thread": """
        import threading, time, torch
        threading.Thread(target=lambda: [time.sleep(0.05) for _ in iter(int, 1)], name="forever").start()
        class Model(torch.nn.Module):
            def forward(self, x):
                return x - 1
        def get_inputs():
            return [torch.randn(8)]
    """,
    "patch": """
        import torch
        torch.matmul = lambda a, b: a + b
        class Model(torch.nn.Module):
            def forward(self, x):
                return torch.matmul(x, x)
        def get_inputs():
            return [torch.randn(8, 8)]
    """,
    "hang": """
        import os, time, torch
        from pathlib import Path
        class Model(torch.nn.Module):
            def forward(self, x):
                Path(__file__).with_suffix(".pid").write_text(str(os.getpid()))
                while True:
                    time.sleep(0.05)
        def get_inputs():
            return [torch.randn(8)]
    """,
    "fd1": """
        import os, torch
        os.write(1, b"\\x00\\xff{raw bytes on fd 1, not JSON\\n")
        print("and a print")
        class Model(torch.nn.Module):
            def forward(self, x):
                os.write(1, b"more raw bytes\\n")
                return x.sum()
        def get_inputs():
            return [torch.randn(8)]
    """,
}

FAKE_BACKEND = '''
"""CPU stand-in for roofline_ext.runner.gpu_backend and the two timing jobs."""
import json
import os
import signal
import time
from pathlib import Path

SETUPS = Path(__file__).with_suffix(".setups")


def setup(device):
    with open(SETUPS, "a") as f:  # one line per timing worker started
        f.write(f"{os.getpid()}\\n")
    slow = SETUPS.with_suffix(".setup_s")  # a set-up as slow as a CUDA context's, where a test asks
    if slow.exists():
        time.sleep(float(slow.read_text()))
    return {"device": "CPU stand-in", "index": device, "setup_s": 0.0}


def cleanup(device):
    return []


def _run(path, seed=42):
    """Run the task for real on the CPU, in this (reused) worker: a checksum of its output and
    the process state it ran in, so that a previous task's leftovers would show in the result."""
    import torch
    from roofline_ext.tasks.loading import load_task

    name = Path(path).stem
    if "ref_exit" in name:
        os._exit(0)
    if "ref_segv" in name:
        os.kill(os.getpid(), signal.SIGSEGV)
    task = load_task(path)
    try:
        if "ref_hang" in name:
            while True:
                time.sleep(0.05)
        torch.manual_seed(seed)
        init = task.init_inputs()
        torch.manual_seed(seed)
        model = task.build(init)
        torch.manual_seed(seed)
        with torch.no_grad():
            out = task.call(model, "Model.forward", "forward", *task.inputs())
        checksum = float(out.double().sum()) if isinstance(out, torch.Tensor) else 0.0
    finally:
        task.unload()
    state = {"cwd": os.getcwd(), "sigint": str(signal.getsignal(signal.SIGINT)),
             "matmul": getattr(torch.matmul, "__name__", "?"), "pid": os.getpid()}
    return 1.0 + abs(checksum) % 1.0, checksum, state


def _stats(t, trials):
    # ``trials`` comes as the job's rule (a dict, TrialRule.to_dict()); a series says how many it ran
    if isinstance(trials, dict):
        trials = trials.get("fixed") or trials.get("min_trials") or 10
    return {"median_ms": t, "mean_ms": t, "best_ms": t, "p10_ms": t, "p90_ms": t, "cv": 0.0,
            "trials": trials, "warmup": 0}


def _times():
    """Times the test asked for, by task or candidate file stem (``<this module>.json``)."""
    spec = Path(__file__).with_suffix(".json")
    return json.loads(spec.read_text()) if spec.exists() else {}


def reference(path, trials=100, **kw):
    t, checksum, state = _run(path)
    t = _times().get(Path(path).stem, t)
    return {"task": str(path), "device": "CPU stand-in", "dtype": "torch.float32", "seed": 42, "inputs": "cpu",
            "reference": _stats(t, trials), "t_ref_ms": t, "checksum": checksum, "state": state}


def candidate(path, new=None, trials=100, correct_trials=5, **kw):
    name = Path(new).stem if new else Path(path).stem + ".new"  # the task file's own ModelNew
    if "crash" in name:
        os.kill(os.getpid(), signal.SIGSEGV)
    t_ref, checksum, state = _run(path)
    ok = "wrong" not in name
    t = t_ref / 2 if "fast" in name else (t_ref * 0.999999 if "same" in name else t_ref * 2)
    if "impossible" in name:
        t = 1e-9
    t = _times().get(name, t)
    correctness = {"ok": ok, "tolerance": 1e-4, "max_abs_diff": 0.0 if ok else 1.0, "trials": correct_trials,
                   "passed": correct_trials if ok else 0, "reason": None if ok else "output 0 differs"}
    return {"task": str(path), "candidate": str(new) if new else "ModelNew in task", "device": "CPU stand-in",
            "dtype": "torch.float32", "seed": 42, "inputs": "cpu", "correctness": correctness,
            "t_new_ms": t if ok else None, "candidate_timing": _stats(t, trials) if ok else None}


def compile_warm_up(device):
    """The real warm-up, on the CPU (inductor's C++ backend): what the GPU warm-up does to the
    process, torch.compile's one-time changes, happens here before the worker's snapshot."""
    from roofline_ext.runner.compiling import warm_up

    return warm_up("cpu")


def no_warm_up(device):
    return {"compile_warm_up_s": 0.0}


def compiled(path, trials=100, **kw):
    """torch.compile(Model) for real on the CPU, in this (reused) worker, checked against eager."""
    import torch
    from roofline_ext.tasks.loading import load_task

    name = Path(path).stem
    if "compile_segv" in name:
        os.kill(os.getpid(), signal.SIGSEGV)
    task = load_task(path)
    try:
        torch.manual_seed(42)
        init = task.init_inputs()
        torch.manual_seed(42)
        model = task.build(init)
        torch.manual_seed(42)
        inputs = task.inputs()
        from torch._dynamo.utils import counters

        hits = counters["inductor"]["fxgraph_cache_hit"]
        with torch.no_grad():
            ref = model(*inputs)
            t0 = time.perf_counter()
            # <this module>.eager: the test reads the document, not the compiler (a real compile is
            # seconds of C++ on the CPU): the eager model stands in, checked the same way.
            out = (model if Path(__file__).with_suffix(".eager").exists() else torch.compile(model))(*inputs)
            compile_s = time.perf_counter() - t0
        cache_hit = counters["inductor"]["fxgraph_cache_hit"] > hits
        ok = bool(torch.allclose(ref, out, atol=1e-4, rtol=1e-4))
    finally:
        task.unload()
    t = _times().get(name + ".compiled", 0.5)
    return {"t_compile_ms": t, "compiled": _stats(t, trials), "compile_s": compile_s, "compile_cache_hit": cache_hit,
            "compiled_correctness": {"ok": ok, "tolerance": 1e-4, "pid": os.getpid()}}
'''


def write(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text(textwrap.dedent(body))
    return p


def good_tasks(folder: Path, names=("1_small", "9_large"), sizes=(32, 48)) -> list[Path]:
    return [write(folder, f"{name}.py", GOOD.replace("{n}", str(n))) for name, n in zip(names, sizes)]


def misbehaving_tasks(folder: Path, which=tuple(MISBEHAVING)) -> list[Path]:
    return [write(folder, f"5_{name}.py", MISBEHAVING[name]) for name in which]


def install_fake_backend(tmp_path: Path, monkeypatch, name: str = "fake_gpu_backend",
                         times: dict | None = None, compile_warm_up: bool = True, real_compile: bool = True,
                         setup_s: float = 0.0) -> Path:
    """Write the stand-in, put it on sys.path and make the batch runner's timing jobs use it.
    ``times``: stem of a task or candidate file (``<stem>.compiled`` for its compiled time) -> the
    time in ms it should report. ``compile_warm_up``: the real compiler warm-up on the CPU (about
    10 s on 2 cores), or none. ``real_compile`` False: the ``--compile`` job runs the eager model in
    place of ``torch.compile(model)`` (for tests of what the document says, not of the compiler).
    ``setup_s``: how long each timing worker's set-up takes (a CUDA context takes about 0.5 s)."""
    import roofline_ext.runner.batch as batch

    folder = tmp_path / "fake_backend"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.py").write_text(FAKE_BACKEND)
    if times:
        (folder / f"{name}.json").write_text(json.dumps(times))
    if not real_compile:
        (folder / f"{name}.eager").write_text("")
    if setup_s:
        (folder / f"{name}.setup_s").write_text(str(setup_s))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(batch, "TIMING_BACKEND", name)
    monkeypatch.setattr(batch, "TIME_REFERENCE_FN", f"{name}:reference")
    monkeypatch.setattr(batch, "TIME_CANDIDATE_FN", f"{name}:candidate")
    monkeypatch.setattr(batch, "TIME_COMPILED_FN", f"{name}:compiled")
    monkeypatch.setattr(batch, "COMPILE_WARM_UP_FN", f"{name}:{'compile_warm_up' if compile_warm_up else 'no_warm_up'}")
    import roofline_ext.device.status as status

    monkeypatch.setattr(status, "require_measurement", lambda device=0: None)  # this process's GPU check
    return folder / f"{name}.setups"


def comparable(result: dict) -> dict:
    """A result without what legitimately differs between two runs of it from two folders: paths,
    wall and count times, pids, which worker ran it."""
    drop = {"path", "count_seconds", "wall_s", "wall_parts_s", "worker_replaced", "notes"}
    out = {k: v for k, v in result.items() if k not in drop}
    if "timing" in out:
        out["timing"] = {k: v for k, v in out["timing"].items() if k not in ("state", "task")}
        out["timing"]["state"] = {k: v for k, v in result["timing"].get("state", {}).items() if k != "pid"}
    if out.get("candidates"):
        out["candidates"] = [{k: v for k, v in c.items() if k not in ("wall_s", "worker_replaced")}
                             for c in out["candidates"]]
    return json.loads(json.dumps(out, default=str))
