"""Bad input and faults, as a new user makes them: every case runs the CLI in a subprocess
(``python -m roofline_ext.cli``) in a workspace of its own, with a calibration cache of its own.

Each case checks what issue 15 asks of all of them:

- no traceback, on stdout or stderr;
- the exit code the README's table gives (0 ok, 1 a task in the batch failed, 2 bad input, 3 no
  usable GPU), and an error as one ``roofline-ext: error:`` line;
- nothing but the named outputs created or changed: the workspace and the cache are snapshotted
  (type, mode, inode, content, link target, device number) before and after, so a device node, a
  FIFO or a symlink replaced by a file, a mode lost or a temporary file left behind all fail.

Character devices, FIFOs, sockets and symlinks are made in the temporary workspace only, never at a
real system path. A character device needs root (``os.mknod``), and the permission cases need a
process that permission bits stop (not root); each skips, with its reason, where it cannot run.
Cases marked ``no_torch`` run with torch made unimportable: a cheap error (an empty folder, an
unknown GPU, a bad ``--plot`` name, an output that cannot be written) must come before torch loads.
"""
from __future__ import annotations

import hashlib
import json
import os
import queue
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE_CALIBRATION = ROOT / "tests" / "data" / "calibration-h200-example.json"


def _permission_bits_bind() -> bool:
    """Whether this process is stopped by a file's permission bits (root with CAP_DAC_OVERRIDE is
    not): tried, not guessed from the user id."""
    probe = Path(tempfile.mkdtemp(prefix="rx")) / "ro"
    try:
        probe.write_text("")
        probe.chmod(0o444)
        try:
            open(probe, "w").close()
        except PermissionError:
            return True
        return False
    finally:
        shutil.rmtree(probe.parent, ignore_errors=True)


PERMISSIONS_BIND = _permission_bits_bind()

# ---------------------------------------------------------------------------------------------------
# Task files
# ---------------------------------------------------------------------------------------------------

GOOD = """
import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(256, 256)]

def get_init_inputs():
    return []
"""


def _task(forward: str = "return x * 2", inputs: str = "[torch.randn(256, 256)]", head: str = "",
          init: str = "") -> str:
    return textwrap.dedent(f"""
        import torch
        {head}

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                {init or "pass"}

            def forward(self, *args):
                x = args[0] if args else None
                {forward}

        def get_inputs():
            return {inputs}

        def get_init_inputs():
            return []
        """)


BAD_TASKS = {
    "syntax": ("import torch\nclass Model(torch.nn.Module)\n    pass\n", "syntax error"),
    "import_error": ("import torch\nimport no_such_module_xyz\n", "needs the Python module `no_such_module_xyz`"),
    "sys_exit": ("import sys\nsys.exit(3)\n", "called sys.exit(3)"),
    "no_model": ("import torch\ndef get_inputs():\n    return []\n", "defines no `Model`"),
    "model_not_module": ("import torch\nModel = 3\ndef get_inputs():\n    return []\n",
                         "must be a torch.nn.Module subclass"),
    "no_get_inputs": ("import torch\nclass Model(torch.nn.Module):\n    pass\n", "defines no `get_inputs()`"),
    "get_inputs_raises": (_task(inputs="1 / 0"), "ZeroDivisionError"),
    "get_inputs_tensor": (_task(inputs="torch.randn(4)"), "must return a list or tuple, got a Tensor"),
    "get_inputs_none": (_task(inputs="None"), "must return a list or tuple, got NoneType"),
    "shape_error": (_task(forward="return x @ torch.randn(7, 3)"), "Model.forward() failed: RuntimeError"),
    "forward_raises": (_task(forward="raise ValueError('boom')"), "ValueError: boom"),
    "forward_returns_none": (_task(forward="y = x * 2"), "Model.forward() returned no tensor"),
    "forward_returns_string": (_task(forward="return 'done'"), "Model.forward() returned no tensor"),
    "string_inputs": (_task(forward="return x", inputs="['hello']"),
                      "returned no tensor; get_inputs() gave no tensor either"),
    "init_raises": (_task(init="raise RuntimeError('no init')"), "RuntimeError: no init"),
    "empty_file": ("", "defines no `Model`"),
    "binary_file": ("\x00\x01\x02\xff not python", "syntax error|loading failed"),
    "data_dependent": (_task(forward="return torch.nonzero(x)"), "unsupported-op|nonzero|data"),
}

NOISY = """
import os, subprocess, sys
import torch

os.write(1, b"FD1 AT LOAD\\n")
sys.__stdout__.write("DUNDER STDOUT\\n")
subprocess.run(["echo", "CHILD PROCESS"])
print("PRINT AT LOAD")

class Model(torch.nn.Module):
    def forward(self, x):
        os.write(1, b"FD1 IN FORWARD\\n")
        return x + 1

def get_inputs():
    return [torch.randn(8, 8)]
"""
EMPTY_TENSORS = _task(forward="return x * 2", inputs="[torch.randn(0, 16)]")


# ---------------------------------------------------------------------------------------------------
# Workspace setup steps: each takes the workspace folder (the CLI's working directory)
# ---------------------------------------------------------------------------------------------------

Step = Callable[[Path], None]


def write(name: str, text: str = "old content\n", mode: int | None = None) -> Step:
    def step(ws: Path) -> None:
        p = ws / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if mode is not None:
            p.chmod(mode)
    return step


def fifo(name: str) -> Step:
    return lambda ws: os.mkfifo(ws / name)


def chardev(name: str, minor: int = 3) -> Step:
    """A character device: /dev/null's numbers (1, 3), or /dev/full's (1, 7), in the workspace."""
    def step(ws: Path) -> None:
        try:
            os.mknod(ws / name, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        except PermissionError as exc:  # not root, or root without CAP_MKNOD (a container)
            pytest.skip(f"creating a character device (os.mknod) needs root: {exc}")
    return step


def sock(name: str) -> Step:
    def step(ws: Path) -> None:
        # Bound in a short temporary folder (AF_UNIX paths are limited to ~108 bytes), then moved.
        short = Path(tempfile.mkdtemp(prefix="rx"))
        s = socket.socket(socket.AF_UNIX)
        try:
            s.bind(str(short / "s"))
            os.rename(short / "s", ws / name)
        except OSError as exc:  # EXDEV: the temporary folder is on another filesystem
            pytest.skip(f"cannot make a socket in the workspace: {exc}")
        finally:
            s.close()
            shutil.rmtree(short, ignore_errors=True)
    return step


def folder(name: str) -> Step:
    return lambda ws: (ws / name).mkdir(parents=True, exist_ok=True)


def symlink(name: str, target: str) -> Step:
    return lambda ws: os.symlink(target, ws / name)


def hardlink(name: str, target: str) -> Step:
    return lambda ws: os.link(ws / target, ws / name)


def chmod(name: str, mode: int) -> Step:
    def step(ws: Path) -> None:
        if not PERMISSIONS_BIND:
            pytest.skip("permission bits do not stop this process (root)")
        (ws / name).chmod(mode)
    return step


def cached(name: str, edit: Callable[[dict], object] | None = None, text: str | None = None) -> Step:
    """A file in the calibration cache: the H200 fixture, edited, or raw text."""
    def step(ws: Path) -> None:
        cache = ws.parent / "cache"
        cache.mkdir(exist_ok=True)
        if text is not None:
            (cache / name).write_text(text)
            return
        cal = json.loads(FIXTURE_CALIBRATION.read_text())
        if edit is not None:
            edit(cal)
        (cache / name).write_text(json.dumps(cal, allow_nan=True))
    return step


def cache_step(step: Callable[[Path], None]) -> Step:
    return lambda ws: step(ws.parent / "cache")


def task(name: str, body: str) -> Step:
    return write(name, body)


def bad_batch(ws: Path) -> None:
    for key, (body, _) in BAD_TASKS.items():
        write(f"bad/{key}.py", body)(ws)
    write("bad/0_good.py", GOOD)(ws)


# ---------------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------------

@dataclass
class Case:
    id: str
    args: list[str]
    code: int
    setup: tuple[Step, ...] = ()
    err: str | None = None               # a substring of stderr ("a|b": any of them)
    changes: tuple[str, ...] = ()        # workspace paths that may be created or changed
    must_change: tuple[str, ...] = ()    # ... and those that must be
    check: Callable[[Path, subprocess.CompletedProcess], None] | None = None
    no_torch: bool = False               # must fail (or finish) without importing torch
    stdout_to: str | None = None         # a workspace file that becomes the process's stdout
    no_gpu: bool = False                 # the code assumes no usable GPU (3); skipped where there is one


def stays_link(name: str, target: str) -> Callable:
    def check(ws: Path, r) -> None:
        assert os.path.islink(ws / name) and os.readlink(ws / name) == target
    return check


def mode_is(name: str, mode: int) -> Callable:
    def check(ws: Path, r) -> None:
        assert stat.S_IMODE(os.stat(ws / name).st_mode) == mode, oct(os.stat(ws / name).st_mode)
    return check


def is_json(name: str | None = None) -> Callable:
    def check(ws: Path, r) -> None:
        text = r.stdout if name is None else (ws / name).read_text()
        json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON token {c}"))
    return check


def all_of(*checks: Callable) -> Callable:
    def check(ws: Path, r) -> None:
        for c in checks:
            c(ws, r)
    return check


OK = "ok.py"
BASE = (write(OK, GOOD), write("tasks/a.py", GOOD), write("tasks/b.py", GOOD))

CASES: list[Case] = []


def case(*args, **kwargs) -> None:
    CASES.append(Case(*args, **kwargs))


# --- output paths: every flag against every kind of path that is no regular file -----------------

for flag, ext in (("--json", "json"), ("--csv", "csv"), ("--plot", "png")):
    f = flag.lstrip("-")
    out = f"out.{ext}"
    case(f"{f}-char-device", ["analyze", OK, flag, f"null.{ext}"], 2, (chardev(f"null.{ext}"),),
         err="is a character device, not a regular file", no_torch=True)
    case(f"{f}-fifo", ["analyze", OK, flag, f"pipe.{ext}"], 2, (fifo(f"pipe.{ext}"),),
         err="is a FIFO, not a regular file", no_torch=True)
    case(f"{f}-socket", ["analyze", OK, flag, f"s.{ext}"], 2, (sock(f"s.{ext}"),),
         err="is a socket, not a regular file", no_torch=True)
    case(f"{f}-directory", ["analyze", OK, flag, f"d.{ext}"], 2, (folder(f"d.{ext}"),),
         err="is a directory, not a regular file", no_torch=True)
    case(f"{f}-missing-folder", ["analyze", OK, flag, f"nowhere/{out}"], 2,
         err="the folder nowhere does not exist", no_torch=True)
    case(f"{f}-parent-is-a-file", ["analyze", OK, flag, f"{OK}/{out}"], 2, err="Not a directory", no_torch=True)
    case(f"{f}-symlink-to-fifo", ["analyze", OK, flag, f"l.{ext}"], 2,
         (fifo("p"), symlink(f"l.{ext}", "p")), err="is a FIFO", no_torch=True)
    case(f"{f}-symlink-to-char-device", ["analyze", OK, flag, f"l.{ext}"], 2,
         (chardev("n"), symlink(f"l.{ext}", "n")), err="is a character device", no_torch=True)
    case(f"{f}-symlink-loop", ["analyze", OK, flag, f"loop.{ext}"], 2,
         (symlink(f"loop.{ext}", f"loop2.{ext}"), symlink(f"loop2.{ext}", f"loop.{ext}")),
         err="Too many levels of symbolic links", no_torch=True)
    case(f"{f}-dangling-symlink", ["analyze", OK, flag, f"l.{ext}"], 0,
         (folder("real"), symlink(f"l.{ext}", f"real/{out}")), changes=(f"real/{out}",),
         must_change=(f"real/{out}",), check=stays_link(f"l.{ext}", f"real/{out}"))
    case(f"{f}-symlink-to-file", ["analyze", OK, flag, f"l.{ext}"], 0,
         (write(out, mode=0o640), symlink(f"l.{ext}", out)), changes=(out,), must_change=(out,),
         check=all_of(stays_link(f"l.{ext}", out), mode_is(out, 0o640)))
    case(f"{f}-existing-file-keeps-mode", ["analyze", OK, flag, out], 0, (write(out, mode=0o604),),
         changes=(out,), must_change=(out,), check=mode_is(out, 0o604))
    case(f"{f}-new-file", ["analyze", OK, flag, out], 0, changes=(out,), must_change=(out,))
    case(f"{f}-read-only-file", ["analyze", OK, flag, out], 2, (write(out), chmod(out, 0o444)),
         err="permission denied", no_torch=True)
    case(f"{f}-read-only-folder", ["analyze", OK, flag, f"ro/{out}"], 2, (folder("ro"), chmod("ro", 0o555)),
         err="cannot create files in ro", no_torch=True)
    case(f"{f}-empty-name", ["analyze", OK, flag, ""], 2, err="an empty file name|cannot write a chart as ''",
         no_torch=True)

# Onto a file the run reads: the task, a task of the folder, the candidate, a cached calibration,
# through any of its names.
case("csv-onto-the-task-itself", ["analyze", OK, "--csv", OK], 2, err="is a file this run reads", no_torch=True)
case("plot-onto-the-task-itself", ["analyze", "t.png", "--plot", "t.png"], 2, (write("t.png", GOOD),),
     err="is a file this run reads", no_torch=True)
case("csv-onto-a-task-of-the-folder", ["analyze", "tasks", "--csv", "tasks/b.py"], 2,
     err="is a file this run reads", no_torch=True)
for flag in ("--json", "--csv"):
    f = flag.lstrip("-")
    case(f"{f}-onto-a-symlink-to-the-task", ["analyze", OK, flag, "alias.txt"], 2,
         (symlink("alias.txt", OK),), err="is a file this run reads", no_torch=True)
    case(f"{f}-onto-a-hard-link-of-the-task", ["analyze", OK, flag, "hard.txt"], 2,
         (hardlink("hard.txt", OK),), err="is a file this run reads", no_torch=True)
    case(f"{f}-onto-the-dotted-task", ["analyze", "tasks/a.py", flag, "tasks/../tasks/a.txt"], 2,
         (symlink("tasks/a.txt", "a.py"),), err="is a file this run reads", no_torch=True)
case("csv-onto-the-candidate", ["analyze", OK, "--new", "cand.py", "--csv", "cand.py"], 2,
     (write("cand.py", GOOD),), err="is a file this run reads", no_torch=True)
case("json-onto-a-cached-calibration", ["analyze", OK, "--json", "../cache/calibration-x.json"], 2,
     (cached("calibration-x.json"),), err="is a file this run reads", no_torch=True)
# `--json TASK.py` names a task, not an output: it is analyzed, JSON goes to stdout, the file stays.
case("json-names-the-task-itself", ["analyze", OK, "--json", OK], 0, check=is_json())
case("json-names-a-task-of-the-folder", ["analyze", "tasks", "--json", "tasks/b.py", "--no-progress"], 0,
     check=is_json())
case("json-names-the-candidate", ["analyze", OK, "--new", "cand.py", "--json", "cand.py"], 2,
     (write("cand.py", GOOD),), err="--new takes one task file", no_torch=True)

# The same file twice.
case("json-and-csv-same-file", ["analyze", "tasks", "--json", "x.out", "--csv", "x.out"], 2,
     err="--json and --csv both name x.out", no_torch=True)
case("json-and-csv-via-symlink", ["analyze", "tasks", "--json", "x.out", "--csv", "y.out"], 2,
     (write("x.out"), symlink("y.out", "x.out")), err="--json and --csv both name y.out", no_torch=True)
case("json-and-csv-via-hard-link", ["analyze", "tasks", "--json", "x.out", "--csv", "y.out"], 2,
     (write("x.out"), hardlink("y.out", "x.out")), err="--json and --csv both name y.out", no_torch=True)
case("json-and-csv-via-dotted-path", ["analyze", OK, "--json", "x.out", "--csv", "./sub/../x.out"], 2,
     (folder("sub"),), err="both name", no_torch=True)
case("json-and-plot-same-file", ["analyze", OK, "--json", "x.png", "--plot", "x.png"], 2,
     err="--json and --plot both name x.png", no_torch=True)

# Batches: every output checked before the first task runs, results as they come.
case("batch-json-and-csv", ["analyze", "tasks", "--json", "r.json", "--csv", "r.csv", "--no-progress"], 0,
     changes=("r.json", "r.csv"), must_change=("r.json", "r.csv"), check=is_json("r.json"))
case("batch-bad-output-before-work", ["analyze", "bad", "--json", "r.json", "--csv", "pipe.csv"], 2,
     (bad_batch, fifo("pipe.csv")), err="--csv pipe.csv is a FIFO", no_torch=True)
case("batch-with-failures", ["analyze", "bad", "--json", "r.json", "--csv", "r.csv", "--no-progress"], 1,
     (bad_batch,), changes=("r.json", "r.csv"), must_change=("r.json", "r.csv"), check=is_json("r.json"))
case("batch-with-failures-json-stdout", ["analyze", "bad", "--json", "--no-progress"], 1, (bad_batch,),
     check=is_json())

# --- targets -----------------------------------------------------------------------------------------

case("no-target", ["analyze"], 2, err="analyze needs a task file or a folder", no_torch=True)
case("missing-file", ["analyze", "nope.py"], 2, err="nope.py: no such file or folder", no_torch=True)
case("missing-among-several", ["analyze", OK, "nope.py"], 2, err="nope.py: no such file", no_torch=True)
case("empty-folder", ["analyze", "empty"], 2, (folder("empty"),), err="no task files", no_torch=True)
case("folder-of-underscores", ["analyze", "pkg"], 2, (write("pkg/__init__.py", ""), write("pkg/_h.py", "")),
     err="no task files", no_torch=True)
case("fifo-as-task", ["analyze", "t.py"], 2, (fifo("t.py"),), err="not a task file or a folder", no_torch=True)
case("char-device-as-task", ["analyze", "t.py"], 2, (chardev("t.py"),), err="not a task file", no_torch=True)
case("socket-as-task", ["analyze", "t.py"], 2, (sock("t.py"),), err="not a task file", no_torch=True)
case("folder-with-only-a-fifo", ["analyze", "f"], 2, (folder("f"), fifo("f/x.py")), err="no task files",
     no_torch=True)
case("folder-with-a-fifo-and-a-task", ["analyze", "f", "--no-progress"], 0, (folder("f"), fifo("f/x.py"),
                                                                          write("f/y.py", GOOD)))
case("dangling-symlink-as-task", ["analyze", "l.py"], 2, (symlink("l.py", "gone.py"),), err="no such file",
     no_torch=True)
case("symlink-to-a-task", ["analyze", "l.py", "--json"], 0, (symlink("l.py", OK),), check=is_json())
case("two-files", ["analyze", OK, "tasks/a.py", "--no-progress"], 0)
case("two-files-json", ["analyze", OK, "tasks/a.py", "--json", "--no-progress"], 0, check=is_json())
case("same-file-twice", ["analyze", OK, f"./{OK}", "--json", "--no-progress"], 0,
     check=lambda ws, r: json.loads(r.stdout)["task"] == "ok" or pytest.fail("analyzed twice"))
case("folder-and-a-file-in-it", ["analyze", "tasks", "tasks/a.py", "--json", "--no-progress"], 0,
     check=lambda ws, r: len(json.loads(r.stdout)["tasks"]) == 2 or pytest.fail("a task twice"))
case("glob-with-a-bad-task", ["analyze", OK, "bad/syntax.py", "--no-progress"], 1, (bad_batch,),
     err="FAILED bad/syntax")
case("json-before-two-tasks", ["analyze", "--json", "tasks/a.py", "tasks/b.py", "--no-progress"], 0,
     check=is_json())
case("unreadable-task", ["analyze", "secret.py"], 2, (write("secret.py", GOOD), chmod("secret.py", 0)),
     err="cannot be read")

# --- task files: one line, exit 2 alone, exit 1 in a batch ----------------------------------------

for key, (body, message) in BAD_TASKS.items():
    case(f"task-{key}", ["analyze", f"{key}.py"], 2, (task(f"{key}.py", body),), err=message)
case("task-in-batch-fails-batch", ["analyze", "bad", "--no-progress"], 1, (bad_batch,), err="FAILED shape_error")
case("task-shape-error-no-torch-log", ["analyze", "s.py"], 2, (task("s.py", BAD_TASKS["shape_error"][0]),),
     err="Model.forward() failed",
     check=lambda ws, r: ("fake_tensor" not in r.stderr and len(r.stderr.strip().splitlines()) <= 2)
     or pytest.fail(r.stderr))
case("task-shape-error-debug-shows-torch-log", ["analyze", "s.py", "--debug"], 2,
     (task("s.py", BAD_TASKS["shape_error"][0]),),
     check=lambda ws, r: "fake_tensor" in r.stderr or pytest.fail(r.stderr))
case("task-writes-fd1-json-stays-valid", ["analyze", "noisy.py", "--json"], 0, (task("noisy.py", NOISY),),
     check=lambda ws, r: (is_json()(ws, r), all(s in r.stderr for s in
                          ("FD1 AT LOAD", "DUNDER STDOUT", "CHILD PROCESS", "PRINT AT LOAD", "FD1 IN FORWARD")))[1]
     or pytest.fail(r.stderr))
case("task-writes-fd1-batch-json", ["analyze", "noisy.py", OK, "--json", "--no-progress"], 0,
     (task("noisy.py", NOISY),), check=is_json())
case("task-empty-tensors-no-bytes", ["analyze", "e.py", "--gpu", "H100"], 0, (task("e.py", EMPTY_TENSORS),),
     check=lambda ws, r: ("reads and writes 0 bytes" in r.stdout and "not in the datasheet table" not in r.stdout)
     or pytest.fail(r.stdout))

# --- arguments ----------------------------------------------------------------------------------------

case("unknown-gpu", ["analyze", OK, "--gpu", "Z9000"], 2, err="unknown GPU 'Z9000'", no_torch=True)
case("empty-gpu-name", ["analyze", OK, "--gpu", ""], 2, err="unknown GPU ''", no_torch=True)
case("gpu-rtx4090-glued", ["analyze", OK, "--gpu", "rtx4090", "--json"], 0,
     check=lambda ws, r: json.loads(r.stdout)["sku"] == "RTX 4090" or pytest.fail(r.stdout))
case("gpu-case-and-dashes", ["analyze", OK, "--gpu", "nvidia-h100-sxm"], 0)
case("dtype-upper-case", ["analyze", OK, "--dtype", "FP16", "--json"], 0,
     check=lambda ws, r: json.loads(r.stdout)["cast"] == "torch.float16" or pytest.fail(r.stdout))
case("dtype-torch-spelling", ["analyze", OK, "--dtype", "torch.bfloat16"], 0)
case("dtype-unsupported", ["analyze", OK, "--dtype", "fp64"], 2, err="choose one of fp32, fp16, bf16", no_torch=True)
case("dtype-nonsense", ["analyze", OK, "--dtype", "bananas"], 2, err="unknown dtype 'bananas'", no_torch=True)
case("regime-unknown", ["analyze", OK, "--regime", "forever"], 2, err="invalid choice", no_torch=True)
case("trials-zero", ["analyze", OK, "--trials", "0"], 2, err="--trials must be at least 1", no_torch=True)
case("trials-not-a-number", ["analyze", OK, "--trials", "many"], 2, err="invalid int value", no_torch=True)
case("plot-bad-extension", ["analyze", OK, "--plot", "chart.gif"], 2, err="use a file name ending in .png or .svg",
     no_torch=True)
case("plot-with-a-folder", ["analyze", "tasks", "--plot", "c.png"], 2, err="--plot takes one task file",
     no_torch=True)
case("plot-with-two-files", ["analyze", OK, "tasks/a.py", "--plot", "c.png"], 2, err="--plot takes one task file",
     no_torch=True)
case("new-with-a-folder", ["analyze", "tasks", "--new", OK], 2, err="--new takes one task file", no_torch=True)
case("new-missing", ["analyze", OK, "--new", "nope.py"], 2, err="no such candidate file", no_torch=True)
case("new-is-a-fifo", ["analyze", OK, "--new", "c.py"], 2, (fifo("c.py"),), err="c.py: not a regular file",
     no_torch=True)
case("time-without-gpu", ["analyze", OK, "--time"], 3, err="roofline-ext: error:", no_torch=True, no_gpu=True)
case("compile-without-gpu", ["analyze", OK, "--compile"], 3, err="roofline-ext: error:", no_torch=True, no_gpu=True)
case("timeout-with-bad-output", ["analyze", OK, "--time", "--json", "d"], 2, (folder("d"),),
     err="is a directory", no_torch=True)
case("debug-before-command", ["--debug", "analyze", OK], 0)
case("debug-after-command", ["analyze", OK, "--debug"], 0)
case("debug-with-bad-input-is-still-exit-2", ["analyze", "nope.py", "--debug"], 2, err="no such file or folder")
case("no-command", [], 2, err="usage:", no_torch=True)
case("unknown-command", ["frobnicate"], 2, err="invalid choice", no_torch=True)
case("unknown-flag", ["analyze", OK, "--frobnicate"], 2, err="unrecognized arguments", no_torch=True)

# --- peaks, info, calibrate ----------------------------------------------------------------------------

case("peaks-table", ["peaks"], 0, no_torch=True)
case("peaks-json-strict", ["peaks", "--json"], 0, check=is_json(), no_torch=True)
case("peaks-unknown", ["peaks", "Z9000"], 2, err="unknown GPU 'Z9000'", no_torch=True)
case("peaks-glued-name", ["peaks", "rtx4090"], 0, no_torch=True)
case("peaks-debug-after", ["peaks", "H100", "--debug"], 0, no_torch=True)
case("calibrate-without-gpu", ["calibrate", "--quick"], 3, err="roofline-ext: error:", no_torch=True, no_gpu=True)
case("calibrate-device-not-a-number", ["calibrate", "--device", "first"], 2,
     err="--device must be a CUDA index", no_torch=True)
case("calibrate-negative-sustained", ["calibrate", "--sustained", "-1"], 2, err="--sustained must be 0",
     no_torch=True)
case("calibrate-plot-bad-extension", ["calibrate", "--plot", "c.gif"], 2, err="use a file name ending in",
     no_torch=True)
case("calibrate-plot-fifo", ["calibrate", "--plot", "c.png"], 2, (fifo("c.png"),), err="is a FIFO",
     no_torch=True)
case("calibrate-plot-char-device", ["calibrate", "--plot", "c.png"], 2, (chardev("c.png"),),
     err="is a character device", no_torch=True)
case("calibrate-plot-directory", ["calibrate", "--plot", "c.png"], 2, (folder("c.png"),), err="is a directory",
     no_torch=True)
case("calibrate-plot-missing-folder", ["calibrate", "--plot", "no/c.png"], 2, err="does not exist", no_torch=True)
case("calibrate-plot-onto-cache", ["calibrate", "--show", "--plot", "../cache/calibration-x.json"], 2,
     (cached("calibration-x.json"),), err="is a file this run reads", no_torch=True)
case("calibrate-show-empty", ["calibrate", "--show"], 0, err="", no_torch=True)
case("calibrate-show-json-empty", ["calibrate", "--show", "--json"], 0, check=is_json(), no_torch=True)
case("calibrate-show-plot-without-cache", ["calibrate", "--show", "--plot", "c.png"], 2,
     err="no cached calibration to draw", no_torch=True)
case("calibrate-show-plot", ["calibrate", "--show", "--plot", "c.png"], 0,
     (cached("calibration-GPU-00000000-fixture-0000-000000000000.json"),), changes=("c.png",),
     must_change=("c.png",), no_torch=True)
case("info-without-gpu", ["info"], 3, err="no usable GPU", no_torch=True, no_gpu=True,
     check=lambda ws, r: "CUDA compiled in:" in r.stdout or pytest.fail(r.stdout))
case("info-json-without-gpu", ["info", "--json"], 3, check=is_json(), no_torch=True, no_gpu=True)

# --- the calibration cache: damaged files are ignored with one line, never a nonsense floor -----------


def _set(path: str, value) -> Callable[[dict], None]:
    def edit(cal: dict) -> None:
        d = cal
        keys = path.split(".")
        for k in keys[:-1]:
            d = d[k]
        d[keys[-1]] = value
    return edit


def _strip_entries(value) -> Callable[[dict], None]:
    def edit(cal: dict) -> None:
        cal["peaks"]["burst"]["bandwidth_tbps"] = value
        cal["burst"]["entries"] = {}
    return edit


H200_CACHE = "calibration-GPU-00000000-fixture-0000-000000000000.json"
for cid, step, why in (
    ("corrupt-json", cached(H200_CACHE, text="{not json"), "corrupt JSON"),
    ("infinity", cached(H200_CACHE, _set("peaks.burst.bandwidth_tbps", float("inf"))), "Infinity is not JSON"),
    ("nan", cached(H200_CACHE, _set("peaks.burst.fp32", float("nan"))), "NaN is not JSON"),
    ("absurd-bandwidth", cached(H200_CACHE, _set("peaks.burst.bandwidth_tbps", 1e300)),
     "above its clock-derived ceiling"),
    ("absurd-bandwidth-no-entries", cached(H200_CACHE, _strip_entries(1e300)), "above its clock-derived ceiling"),
    ("negative-peak", cached(H200_CACHE, _set("peaks.burst.fp16", -5)), "not a finite positive number"),
    ("string-peak", cached(H200_CACHE, _set("peaks.burst.fp16", "fast")), "not a finite positive number"),
    ("other-schema", cached(H200_CACHE, _set("schema_version", 99)), "schema version 99"),
    ("not-an-object", cached(H200_CACHE, text="[1, 2]"), "not a JSON object"),
):
    case(f"cache-{cid}-analyze", ["analyze", OK, "--gpu", "H200", "--json"], 0, (step,),
         err=f"roofline-ext: warning: ignoring calibration file|{why}",
         check=lambda ws, r, why=why: (is_json()(ws, r), json.loads(r.stdout)["roofs"]["measured"] is None
                                       and why in r.stderr
                                       and len([ln for ln in r.stderr.splitlines() if "warning" in ln]) == 1
                                       and "UserWarning" not in r.stderr)[1] or pytest.fail(r.stderr))
    case(f"cache-{cid}-show", ["calibrate", "--show", "--json"], 0, (step,), err=why, check=is_json(),
         no_torch=True)
case("cache-fifo-named-like-a-calibration", ["calibrate", "--show"], 0, (cache_step(
    lambda c: (c.mkdir(exist_ok=True), os.mkfifo(c / H200_CACHE))),), no_torch=True)
case("cache-good-gives-measured-roof", ["analyze", OK, "--gpu", "H200", "--json"], 0, (cached(H200_CACHE),),
     check=lambda ws, r: json.loads(r.stdout)["roofs"]["measured"] is not None or pytest.fail(r.stdout))
case("cache-dir-is-a-file", ["analyze", OK, "--json"], 0,
     (lambda ws: (ws.parent / "cache").write_text("not a folder"),), check=is_json())

# --- stdout itself ------------------------------------------------------------------------------------

case("stdout-is-a-full-device", ["peaks"], 2, (chardev("full", minor=7),), err="cannot write to stdout",
     stdout_to="full", no_torch=True)
case("stdout-is-a-full-device-json", ["analyze", OK, "--json"], 2, (chardev("full", minor=7),),
     err="cannot write to stdout", stdout_to="full")


# ---------------------------------------------------------------------------------------------------
# The harness
# ---------------------------------------------------------------------------------------------------

def _signature(p: Path, st: os.stat_result) -> tuple:
    kind = stat.S_IFMT(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.readlink(p))
    if stat.S_ISREG(st.st_mode):
        try:
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
        except PermissionError:
            digest = None
        return ("file", stat.S_IMODE(st.st_mode), st.st_ino, digest)
    if stat.S_ISDIR(st.st_mode):
        return ("dir", stat.S_IMODE(st.st_mode))
    return ("special", kind, stat.S_IMODE(st.st_mode), st.st_rdev)


def _snapshot(*roots: Path) -> dict[str, tuple]:
    """Everything under the roots, without following a link: what a run may not change."""
    out: dict[str, tuple] = {}
    for root in roots:
        if not root.exists():
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = Path(dirpath, name)
                out[os.path.relpath(p, roots[0])] = _signature(p, os.lstat(p))
    return out


_NO_TORCH = ("import runpy, sys; sys.modules['torch'] = None; sys.argv[0] = 'roofline-ext'; "
             "runpy.run_module('roofline_ext.cli', run_name='__main__')")
#: Every case in a fresh `python -m roofline_ext.cli` (slow: about 2 s of torch import each).
FRESH = os.environ.get("ROOFLINE_TEST_FRESH") == "1"


class Zygote:
    """tests/cli_zygote.py: forks a CLI process per case from an interpreter that imported torch."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("cli_zygote.py"))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=_env(Path(tempfile.gettempdir())))

    def run(self, args: list[str], cwd: Path, env: dict, stdout: Path, stderr: Path) -> int:
        req = {"args": args, "cwd": str(cwd), "env": env, "stdout": str(stdout), "stderr": str(stderr)}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["code"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


def _env(cache: Path) -> dict:
    # The CLI processes import the roofline_ext this test imported: a source tree on PYTHONPATH
    # here, the installed package in CI (whose source tree has no native core).
    import roofline_ext

    package_root = str(Path(roofline_ext.__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, ROOFLINE_EXT_CACHE_DIR=str(cache), PYTHONPATH=path, COLUMNS="120")


def _run(c: Case, ws: Path, cache: Path, zygotes: queue.Queue) -> subprocess.CompletedProcess:
    out = ws / c.stdout_to if c.stdout_to else ws.parent / "stdout.txt"
    err = ws.parent / "stderr.txt"
    if c.no_torch or FRESH:
        cmd = [sys.executable, "-c", _NO_TORCH] if c.no_torch else [sys.executable, "-m", "roofline_ext.cli"]
        with open(out, "w") as o, open(err, "w") as e:
            code = subprocess.run([*cmd, *c.args], cwd=ws, env=_env(cache), stdin=subprocess.DEVNULL,
                                  stdout=o, stderr=e, timeout=120).returncode
    else:
        z = zygotes.get()
        try:
            code = z.run(c.args, ws, _env(cache), out, err)
        finally:
            zygotes.put(z)
    stdout = "" if c.stdout_to else out.read_text()
    return subprocess.CompletedProcess(c.args, code, stdout, err.read_text())


def _gpu_here() -> bool:
    from roofline_ext.device.status import availability

    return availability().ok


@dataclass
class Outcome:
    result: subprocess.CompletedProcess | None = None
    ws: Path | None = None
    before: dict | None = None
    after: dict | None = None
    skip: str | None = None


def _play(c: Case, tmp: Path, zygotes: queue.Queue) -> Outcome:
    """Set a case up, snapshot, run the CLI, snapshot again."""
    if c.no_gpu and _gpu_here():
        return Outcome(skip="a GPU can be measured here: this case is about a machine without one")
    ws, cache = tmp / "ws", tmp / "cache"
    ws.mkdir()
    try:
        for step in (*BASE, *c.setup):
            step(ws)
    except pytest.skip.Exception as exc:
        return Outcome(skip=str(exc))
    before = _snapshot(ws, cache)
    r = _run(c, ws, cache, zygotes)
    after = _snapshot(ws, cache)
    if ws.joinpath("ro").exists():
        (ws / "ro").chmod(0o755)  # let pytest clean up
    return Outcome(r, ws, before, after)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, Outcome]:
    """Every case, run up front in parallel, each in a process and workspace of its own. Cases that
    need torch are forked from tests/cli_zygote.py (a fresh interpreter spends about 2 s importing
    torch, and there are over a hundred cases); ROOFLINE_TEST_FRESH=1 starts each one fresh."""
    tmps = [tmp_path_factory.mktemp(c.id[:40]) for c in CASES]
    workers = max(2, min(8, os.cpu_count() or 1))
    zygotes: queue.Queue = queue.Queue()
    for _ in range(0 if FRESH else workers):
        zygotes.put(Zygote())
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return dict(zip((c.id for c in CASES), pool.map(_play, CASES, tmps, [zygotes] * len(CASES))))
    finally:
        while not zygotes.empty():
            zygotes.get().close()


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input(c: Case, outcomes: dict[str, Outcome]) -> None:
    o = outcomes[c.id]
    if o.skip:
        pytest.skip(o.skip)
    r = o.result
    out, err = r.stdout or "", r.stderr
    if "--debug" not in c.args:  # --debug asks for tracebacks
        assert "Traceback" not in out + err, err
    assert r.returncode == c.code, f"exit {r.returncode}, expected {c.code}\nstdout: {out[-2000:]}\nstderr: {err}"
    if c.err:
        assert any(e in err for e in c.err.split("|")), err
    if c.code in (2, 3):
        errors = [ln for ln in err.splitlines() if "error:" in ln]
        assert len(errors) == 1, err  # one line, whatever went wrong
    changed = {k for k in o.before.keys() | o.after.keys() if o.before.get(k) != o.after.get(k)}
    assert changed <= set(c.changes), f"changed beyond the named outputs: {sorted(changed - set(c.changes))}"
    assert set(c.must_change) <= changed, f"not written: {sorted(set(c.must_change) - changed)}"
    if c.check is not None:
        c.check(o.ws, r)


def test_there_are_at_least_100_cases():
    assert len(CASES) >= 100, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"


# ---------------------------------------------------------------------------------------------------
# The writer and the cache validation, directly
# ---------------------------------------------------------------------------------------------------

def test_a_write_keeps_mode_and_link_and_leaves_no_temporary_file(tmp_path):
    from roofline_ext.report.outputs import write_text

    target = tmp_path / "t.json"
    target.write_text("old")
    target.chmod(0o640)
    os.symlink("t.json", tmp_path / "link.json")
    write_text(tmp_path / "link.json", "new")
    assert os.readlink(tmp_path / "link.json") == "t.json" and target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "t.json"]


def test_a_new_output_gets_the_umask_not_0600(tmp_path):
    from roofline_ext.report.outputs import write_text

    old = os.umask(0o022)
    try:
        write_text(tmp_path / "n.csv", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "n.csv").stat().st_mode) == 0o644


def test_a_hard_link_is_split_as_documented(tmp_path):
    # docs/architecture.md: the name written gets the new file, the other names keep the old content.
    from roofline_ext.report.outputs import write_text

    (tmp_path / "a").write_text("old")
    os.link(tmp_path / "a", tmp_path / "b")
    write_text(tmp_path / "a", "new")
    assert (tmp_path / "a").read_text() == "new" and (tmp_path / "b").read_text() == "old"


def test_a_path_that_became_a_fifo_after_the_check_is_still_refused(tmp_path):
    from roofline_ext.errors import UserError
    from roofline_ext.report.outputs import check_outputs, write_text

    check_outputs({"--json": tmp_path / "r.json"})
    os.mkfifo(tmp_path / "r.json")
    with pytest.raises(UserError, match="is a FIFO"):
        write_text(tmp_path / "r.json", "{}")
    assert stat.S_ISFIFO(os.lstat(tmp_path / "r.json").st_mode)


def test_a_failed_write_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    from roofline_ext.errors import UserError
    from roofline_ext.report import outputs

    (tmp_path / "r.json").write_text("old")

    def full(*a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs.os, "replace", full)
    with pytest.raises(UserError, match=r"cannot write .*r\.json: No space left on device"):
        outputs.write_text(tmp_path / "r.json", "new")
    assert (tmp_path / "r.json").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_strict_json_writes_no_nan_or_infinity():
    from roofline_ext.report.writers import dumps

    text = dumps({"a": float("nan"), "b": [float("inf"), 1.5], "c": -float("inf")})
    assert json.loads(text) == {"a": None, "b": [None, 1.5], "c": None}


@pytest.mark.parametrize("edit, ok", [
    (lambda cal: None, True),
    # no recorded entries: the ceiling comes from the file's GPU record (H200: 4.81 TB/s)
    (lambda cal: (cal["burst"].update(entries={}), cal["peaks"]["burst"].update(bandwidth_tbps=1e300)), False),
    (lambda cal: (cal["burst"].update(entries={}), cal["peaks"]["burst"].update(bandwidth_tbps=4.6)), True),
    # no entries and no GPU attributes: the datasheet figure of the named part bounds it
    (lambda cal: (cal["burst"].update(entries={}), cal.update(gpu={"uuid": "GPU-x", "name": "NVIDIA H200"}),
                  cal["peaks"]["burst"].update(fp16=5000.0)), False),
    (lambda cal: cal["peaks"]["burst"].update(fp32=0), False),
    (lambda cal: cal["peaks"]["sustained"].update(bf16=True), False),
])
def test_cache_validation_bounds_every_peak(edit, ok):
    from roofline_ext.peaks.cache import validate

    cal = json.loads(FIXTURE_CALIBRATION.read_text())
    edit(cal)
    assert (validate(cal) is None) is ok, validate(cal)
