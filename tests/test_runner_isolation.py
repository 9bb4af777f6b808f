"""No task changes another's numbers: a task that patches torch, its ``_C``, tensor or module
methods, this package's counting helpers or ``json.dumps`` leaves every later task's counts exact,
under the default isolation (one count per fresh worker) and in reused workers (the fingerprint
sees the patch and replaces the worker); tasks are always compiled from source; a task's own
KeyboardInterrupt or SystemExit, or a task that kills the worker server, fails that task only;
--jobs is capped and the control channel never deadlocks; SIGTERM says what was kept.

No GPU: counting runs for real in the workers, timing with the CPU stand-in of fakes/runner.py.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from roofline_ext.cli import main
from roofline_ext.runner import channel, fingerprint, jobs, pool as pool_mod, process_state
from roofline_ext.runner.pool import Job, Pool, capped_jobs
from roofline_ext.tasks.loading import exec_source_module, load_task
from fakes.runner import install_fake_backend, write

ROOT = Path(__file__).resolve().parent.parent
LINEAR_FLOPS = 2 * 256 * 256 * 256  # Linear(256, 256) on a (256, 256) input: 33,554,432

# A later task sensitive to every kind of poisoning below: nn.Linear (forward, F.linear, the
# _C._nn.linear kernel), Tensor.__matmul__ and Tensor.__add__.
LATER = """
import torch

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(256, 256)

    def forward(self, x):
        return self.l(x) @ x + x

def get_inputs():
    return [torch.randn(256, 256)]
"""

POISON = {  # kind -> what task 00 does when it is imported (the issue's list)
    "Linear.forward": "torch.nn.Linear.forward = lambda self, x: x",
    "Tensor.__matmul__": "torch.Tensor.__matmul__ = lambda a, b: a",
    "Tensor.__add__": "torch.Tensor.__add__ = lambda a, b: a",
    "_C._nn.linear": "torch._C._nn.linear = lambda x, w, b=None: x",
    "counting helpers": """
        import roofline_ext.tasks.counting as counting, roofline_ext.tasks.traffic as traffic
        counting.storage_bytes = traffic.storage_bytes = lambda *a, **k: 0
        counting.flop_formulas = lambda *a, **k: {}
    """,
    "json.dumps": """
        import json
        _dumps = json.dumps
        def dumps(obj, *a, **k):  # the issue's wrapper: every reply's FLOPs become 1
            if isinstance(obj, dict) and isinstance(obj.get("value"), dict) and "flops" in obj["value"]:
                obj = {**obj, "value": {**obj["value"], "flops": 1}}
            return _dumps(obj, *a, **k)
        json.dumps = dumps
    """,
}


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch):
    """Results must not depend on this machine's GPU or calibrations."""
    import roofline_ext.model.gpu as gpu_mod

    monkeypatch.setattr(gpu_mod, "local_device", lambda: None)


def _poison_task(body: str) -> str:
    return "import torch\n" + textwrap.dedent(body) + textwrap.dedent("""
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 2
        def get_inputs():
            return [torch.randn(8)]
    """)


def _folder(tmp_path: Path, kind: str | None) -> Path:
    folder = tmp_path / ("clean" if kind is None else kind.replace(".", "_"))
    if kind is not None:
        write(folder, "00.py", _poison_task(POISON[kind]))
    for i in range(1, 5):
        write(folder, f"{i:02d}.py", LATER)
    return folder


def _counts(capsys, folder: Path, *extra: str) -> dict[str, dict]:
    out = folder.parent / f"{folder.name}-{len(extra)}.json"
    rc = main(["analyze", str(folder), "--gpu", "H200", "--no-progress", "--json", str(out), *extra])
    capsys.readouterr()
    assert rc == 0
    return {t["task"]: t for t in json.loads(out.read_text())["tasks"]}


@pytest.fixture(scope="module")
def clean_counts(tmp_path_factory):
    """What the later tasks count with nothing before them."""
    folder = _folder(tmp_path_factory.mktemp("clean"), None)
    with Pool(2) as pool:
        outs = list(pool.run(Job(i, jobs.COUNT, {"path": str(p)}, 60) for i, p in enumerate(sorted(folder.glob("*.py")))))
    assert all(o.ok for o in outs)
    values = [o.value for o in outs]
    assert all((v["flops"], v["bytes"]) == (values[0]["flops"], values[0]["bytes"]) for v in values)
    return values[0]


# --- each kind of poisoning, under the default isolation ----------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("jobs_flag", [("--jobs", "1"), ()], ids=["jobs1", "default-jobs"])
def test_later_tasks_count_exactly_after_each_kind_of_poisoning_task(tmp_path, capsys, clean_counts, jobs_flag):
    """One batch: each kind of poisoning task, then two tasks it would spoil (a batch per kind
    would cost a fork server each and test nothing more: counts never share a worker)."""
    folder = tmp_path / "all"
    for k, kind in enumerate(POISON):
        write(folder, f"{k}_0_poison.py", _poison_task(POISON[kind]))
        write(folder, f"{k}_1_later.py", LATER)
        write(folder, f"{k}_2_later.py", LATER)
    t0 = time.monotonic()
    by = _counts(capsys, folder, *jobs_flag)
    assert time.monotonic() - t0 < 90
    for k, kind in enumerate(POISON):
        for name in (f"{k}_1_later", f"{k}_2_later"):
            assert by[name]["status"] == "ok", by[name]
            assert (by[name]["flops"], by[name]["bytes"]) == (clean_counts["flops"], clean_counts["bytes"]), kind
            assert not by[name].get("worker_replaced")


@pytest.mark.slow
def test_the_issues_example_linear_tasks_report_their_flops(tmp_path, capsys):
    folder = tmp_path / "d"
    write(folder, "00.py", _poison_task(POISON["Linear.forward"]))
    for i in range(1, 5):
        write(folder, f"{i:02d}.py", LATER.replace("self.l(x) @ x + x", "self.l(x)"))
    for flags in (("--jobs", "1"), ()):
        by = _counts(capsys, folder, *flags)
        assert [by[f"{i:02d}"]["flops"] for i in range(1, 5)] == [LINEAR_FLOPS] * 4


# --- reused workers: the fingerprint replaces the worker -------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("kind", list(POISON))
def test_a_reused_counting_worker_is_replaced_after_each_kind_of_poisoning(tmp_path, clean_counts, kind):
    folder = _folder(tmp_path, kind)
    paths = sorted(folder.glob("*.py"))
    with Pool(1, reuse_counting=True) as pool:
        outs = {o.job.key: o for o in pool.run(Job(p.stem, jobs.COUNT, {"path": str(p)}, 60) for p in paths)}
    assert outs["00"].replaced and outs["00"].replaced[0].startswith("patched: "), outs["00"].replaced
    assert [r["after"] for r in pool.replacements] == ["00"]  # no false alarm after a clean task
    for name in ("01", "02", "03", "04"):
        assert (outs[name].value["flops"], outs[name].value["bytes"]) == (clean_counts["flops"], clean_counts["bytes"])


@pytest.mark.slow
def test_a_reused_timing_worker_is_replaced_after_each_kind_of_poisoning(tmp_path, monkeypatch):
    install_fake_backend(tmp_path, monkeypatch, compile_warm_up=False)
    clean = tmp_path / "t"
    write(clean, "99_later.py", LATER)
    order = []
    for kind in POISON:
        order += [write(clean, f"{len(order):02d}_poison.py", _poison_task(POISON[kind])), clean / "99_later.py"]
    with Pool(1, backend="fake_gpu_backend") as pool:
        outs = list(pool.run(Job(i, "fake_gpu_backend:reference", {"path": str(p)}, 60, device=0)
                             for i, p in enumerate(order)))
    later = [o for o in outs if "later" in o.job.kwargs["path"]]
    poisons = [o for o in outs if "poison" in o.job.kwargs["path"]]
    assert all(o.ok for o in outs)
    assert all(o.replaced for o in poisons), [o.replaced for o in poisons]
    assert not any(o.replaced for o in later)
    assert len({o.value["checksum"] for o in later}) == 1  # every later run computed the same thing
    assert len({o.value["state"]["pid"] for o in later}) == len(later)  # each in a fresh worker


@pytest.mark.slow
def test_a_job_that_asks_for_it_retires_its_worker(tmp_path, monkeypatch):
    install_fake_backend(tmp_path, monkeypatch, compile_warm_up=False)
    (tmp_path / "fake_backend" / "retiring.py").write_text(
        "import os\n"
        "def job(retire=None):\n"
        "    out = {'pid': os.getpid()}\n"
        "    if retire:\n"
        "        out['_retire'] = retire\n"
        "    return out\n")
    calls = [None, "the candidate was rejected", None, None]
    with Pool(1, backend="fake_gpu_backend") as pool:
        outs = list(pool.run(Job(i, "retiring:job", {"retire": r}, 30, device=0) for i, r in enumerate(calls)))
    pids = [o.value["pid"] for o in outs]
    assert pids[0] == pids[1] != pids[2] == pids[3]
    assert "_retire" not in outs[1].value and outs[1].replaced == ["the candidate was rejected"]
    assert pool.replacements == [{"worker": "timing worker for GPU 0", "after": "1",
                                  "reasons": ["the candidate was rejected"]}]


# --- the fingerprint itself -----------------------------------------------------------------------

def ours(changes: list[str]) -> list[str]:
    """The fingerprint tests below run in the pytest process, where other tests change modules under
    them (test_report_charts takes matplotlib out of sys.modules and puts it back; logging handlers of earlier
    tests are collected): only the namespaces these tests patch count."""
    return [c for c in changes if c.startswith(("torch", "json", "roofline_ext"))]


@pytest.fixture(params=["native", "python"])
def comparison(request, monkeypatch):
    """Each fingerprint test twice: with the native core's walk (the default) and with the Python
    comparison it must agree with (a checkout without its core built takes that one)."""
    if request.param == "native" and not hasattr(_core_or_none(), "state_changed_chunks"):
        pytest.skip("this build of the native core has no state_changed_chunks")
    monkeypatch.setattr(fingerprint, "USE_NATIVE", request.param == "native")
    return request.param


def _core_or_none():
    from roofline_ext.device.native import core_or_none

    return core_or_none()


def test_the_native_walk_and_the_python_comparison_agree_on_every_kind_of_container(monkeypatch):
    import types

    if not hasattr(_core_or_none(), "state_changed_chunks"):
        pytest.skip("this build of the native core has no state_changed_chunks")
    ns = types.ModuleType("fp_containers_for_test")
    ns.table = {"a": 1, "b": object()}
    ns.hooks = [len, abs]
    ns.members = {1, 2, 3}

    class Owner:
        def method(self, x=1, *, y=2):
            return x + y

    ns.Owner = Owner
    sys.modules[ns.__name__] = ns

    def seen(fp, native: bool) -> list[str]:
        monkeypatch.setattr(fingerprint, "USE_NATIVE", native)
        return [c for c in fp.changes() if "fp_containers" in c or "Owner" in c]

    try:
        by_native, by_python = fingerprint.take(), fingerprint.take()
        # (edit, whether it is a change: a benign one, a counter that grew or a cache entry, is not)
        edits = [(lambda: ns.table.__setitem__("a", 2), False), (lambda: ns.members.add(4), False),
                 (lambda: ns.hooks.__setitem__(1, min), True),
                 (lambda: setattr(Owner, "extra", lambda self: 0), True),  # behind the class's proxy
                 (lambda: setattr(Owner.method, "__kwdefaults__", {"y": 3}), True),
                 (lambda: setattr(Owner.method, "__defaults__", (5,)), True),
                 (lambda: ns.table.__setitem__("c", len), True)]
        for edit, counts in edits:
            edit()
            native, python = seen(by_native, True), seen(by_python, False)
            assert native == python and bool(native) == counts, (native, python)
    finally:
        sys.modules.pop(ns.__name__, None)


def test_a_class_proxy_is_walked_through_its_own_dict():
    class Owner:
        pass

    inner = fingerprint._container(Owner.__dict__)
    assert type(inner) is dict and "__module__" in inner
    Owner.added = 1
    assert inner["added"] == 1  # the dict setattr writes to


def test_fingerprint_names_each_patch_and_forgets_it_once_undone(comparison):
    import json as json_mod

    import roofline_ext.tasks.traffic as traffic

    fp = fingerprint.take()
    assert ours(fp.changes()) == []
    patches = [(torch.nn.Linear, "forward"), (torch.Tensor, "__matmul__"), (torch.Tensor, "__add__"),
               (torch._C._nn, "linear"), (traffic, "storage_bytes"), (json_mod, "dumps")]
    missing = object()  # inherited, not in the owner's own namespace: deleted again afterwards
    saved = [(owner, name, vars(owner).get(name, missing)) for owner, name in patches]
    code = torch.nn.Module.zero_grad.__code__
    try:
        for owner, name in patches:
            setattr(owner, name, lambda *a, **k: None)
        torch.nn.Module.zero_grad.__code__ = (lambda self, set_to_none=True: None).__code__
        torch.nn.Module.__call__ = torch.nn.Module.__call__  # the same object again: no change
        found = " | ".join(fp.changes())
    finally:
        for owner, name, value in saved:
            if value is missing:
                delattr(owner, name)
            else:
                setattr(owner, name, value)
        torch.nn.Module.zero_grad.__code__ = code
    for needle in ("Linear.forward", "Tensor.__matmul__", "Tensor.__add__", "torch._C._nn.linear",
                   "traffic.storage_bytes", "json.dumps", "Module.zero_grad (its code"):
        assert needle in found, (needle, found)
    assert "__call__" not in found
    assert ours(fp.changes()) == []


def test_fingerprint_sees_a_method_added_to_a_class_and_a_registry_entry(comparison):
    from torch.utils import flop_counter

    fp = fingerprint.take()
    key = torch.ops.aten.mm
    old = flop_counter.flop_registry[key]
    try:
        torch.nn.Linear.__call__ = lambda self, x: x  # shadows Module.__call__
        flop_counter.flop_registry[key] = lambda *a, **k: 0
        found = " | ".join(fp.changes())
    finally:
        del torch.nn.Linear.__call__
        flop_counter.flop_registry[key] = old
    assert "Linear.__call__ (added)" in found and "flop_registry[" in found
    assert ours(fp.changes()) == []


def test_fingerprint_takes_counters_and_lazy_submodules_as_they_run(tmp_path, comparison):
    fp = fingerprint.take()
    write(tmp_path, "lazy_sub_for_test.py", "X = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import lazy_sub_for_test  # noqa: F401  (a module loaded after the fingerprint: not in it)

        torch._subclasses.fake_tensor.FakeTensorMode.cache_hits += 1  # a counter torch keeps
        assert ours(fp.changes()) == []
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("lazy_sub_for_test", None)


@pytest.mark.slow
def test_fingerprint_comparison_is_fast_enough_for_every_task():
    """The figure docs/runner.md gives: a comparison after a task, CPU time, torch loaded."""
    fp = fingerprint.take()
    best = min(_cpu_time(fp.changes) for _ in range(5))
    t_take = _cpu_time(fingerprint.take)
    print(f"fingerprint: take {t_take * 1e3:.0f} ms, compare {best * 1e3:.0f} ms over "
          f"{len(fp.chunks)} modules, {len(fp.functions)} functions")
    assert best < 0.25  # typically 20-40 ms; the bound only catches a slow path taken every time


def _cpu_time(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def test_snapshot_of_a_worker_ignores_what_its_own_reset_rebinds():
    from roofline_ext.runner import compiling

    before = process_state.snapshot(renew=compiling.reset)
    compiling.reset()  # as after every job
    assert process_state.changes(before) == []


def test_reply_encoder_is_json_dumps_and_survives_its_replacement(monkeypatch):
    reply = {"ok": True, "value": {"flops": 7, "x": [1.5, float("nan"), None, "é\"", Path("/p")]}, "seconds": 0.5}
    expected = json.dumps(reply, default=str).encode()
    assert channel.encode_reply(reply) == expected
    monkeypatch.setattr(json, "dumps", lambda *a, **k: '{"ok": true, "value": {"flops": 1}}')
    monkeypatch.setattr(json.JSONEncoder, "iterencode", lambda *a, **k: iter(["1"]))
    assert channel.encode_reply(reply) == expected


# --- no bytecode ----------------------------------------------------------------------------------

ADD = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x + x   # {pad}
def get_inputs():
    return [torch.randn(256, 256)]
"""
MATMUL = ADD.replace("x + x", "x @ x")


@pytest.mark.slow
def test_a_task_rewritten_with_the_same_size_and_mtime_is_counted_from_its_new_source(tmp_path, capsys):
    """As ``cp -p``, ``rsync -a`` or ``tar x`` leave a file: a matmul rewritten as an add must count as
    the add (the issue: the old .pyc made it report the matmul's FLOPs)."""
    folder = tmp_path / "t"
    task = write(folder, "1_task.py", MATMUL)
    write(folder, "2_helper_user.py", "from _helper_mod import get_inputs\n" + ADD.split("def get_inputs")[0])
    write(folder, "_helper_mod.py", "import torch\ndef get_inputs():\n    return [torch.randn(4, 4)]\n")
    write(folder, "3_add.py", ADD)
    stat = task.stat()
    first = _counts(capsys, folder)
    assert first["1_task"]["flops"] == LINEAR_FLOPS and first["2_helper_user"]["status"] == "ok"
    task.write_text(textwrap.dedent(ADD))
    assert task.stat().st_size == stat.st_size
    os.utime(task, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = _counts(capsys, folder)
    assert (second["1_task"]["flops"], second["1_task"]["bytes"]) == (first["3_add"]["flops"], first["3_add"]["bytes"])
    loaded = load_task(task)  # in this process too
    try:
        assert "x + x" in Path(loaded.module.__file__).read_text()
    finally:
        loaded.unload()
    assert not list(tmp_path.rglob("__pycache__")) and not list(tmp_path.rglob("*.pyc"))


def test_exec_source_module_runs_a_file_as_a_module_of_that_name(tmp_path):
    write(tmp_path, "side.py", "VALUE = 41\n")
    path = write(tmp_path, "cand.py", "import dataclasses, side\n@dataclasses.dataclass\nclass C:\n    x: int = side.VALUE + 1\n")
    mod = exec_source_module(path, "_test_candidate_module")
    try:
        assert mod.C().x == 42 and sys.modules["_test_candidate_module"] is mod and mod.__file__ == str(path)
    finally:
        sys.modules.pop("_test_candidate_module", None)
        sys.modules.pop("side", None)
    bad = write(tmp_path, "bad.py", "raise ValueError('no')\n")
    with pytest.raises(ValueError):
        exec_source_module(bad, "_test_bad_module")
    assert "_test_bad_module" not in sys.modules
    assert not list(tmp_path.rglob("__pycache__"))


# --- a task that ends more than itself ----------------------------------------------------------

# Kills the fork server (the worker's parent), then waits to die with it (PR_SET_PDEATHSIG).
KILLS_SERVER = ADD.replace("return x + x", "import os, signal, time; os.kill(os.getppid(), signal.SIGKILL); time.sleep(30)")

OWN_EXITS = {
    "interrupt_at_import": "raise KeyboardInterrupt",
    "exit_at_import": "import sys; sys.exit(3)",
    "interrupt_in_forward": None,
    "kills_server": None,
}


def _misbehaving(folder: Path) -> None:
    for name in ("interrupt_at_import", "exit_at_import"):
        write(folder, f"5_{name}.py", _poison_task(OWN_EXITS[name]))
    write(folder, "5_interrupt_in_forward.py", ADD.replace("return x + x", "raise KeyboardInterrupt"))
    write(folder, "5_kills_server.py", KILLS_SERVER)
    for i in (1, 2, 8, 9):
        write(folder, f"{i}_good.py", MATMUL)


@pytest.mark.slow
@pytest.mark.parametrize("jobs_flag", [("--jobs", "1"), ("--jobs", "2")], ids=["jobs1", "jobs2"])
def test_own_interrupts_exits_and_a_killed_server_fail_that_task_only(tmp_path, capsys, jobs_flag):
    folder = tmp_path / "t"
    _misbehaving(folder)
    out = tmp_path / "out.json"
    t0 = time.monotonic()
    rc = main(["analyze", str(folder), "--gpu", "H200", "--no-progress", "--json", str(out), *jobs_flag])
    err = capsys.readouterr().err
    assert time.monotonic() - t0 < 90
    doc = json.loads(out.read_text())
    by = {t["task"]: t for t in doc["tasks"]}
    assert rc == 1 and doc["complete"] is True, err
    for i in (1, 2, 8, 9):
        assert by[f"{i}_good"]["status"] == "ok" and by[f"{i}_good"]["flops"] == LINEAR_FLOPS
    assert by["5_interrupt_at_import"]["error_kind"] == "interrupt"
    assert "raised KeyboardInterrupt" in by["5_interrupt_at_import"]["error"]
    assert by["5_interrupt_in_forward"]["error_kind"] == "interrupt"
    assert by["5_exit_at_import"]["error_kind"] == "exit"
    assert by["5_kills_server"]["error_kind"] == "crash"
    assert "stopped the worker server" in by["5_kills_server"]["error"]


@pytest.mark.slow
def test_every_task_that_kills_the_server_fails_alone_and_the_others_count(tmp_path):
    folder = tmp_path / "t"
    paths = []
    for i in range(2):
        paths += [write(folder, f"{i}_kill.py", KILLS_SERVER), write(folder, f"{i}_good.py", MATMUL)]
    t0 = time.monotonic()
    with Pool(2) as pool:
        outs = {o.job.key: o for o in pool.run(Job(p.stem, jobs.COUNT, {"path": str(p)}, 60) for p in paths)}
    assert time.monotonic() - t0 < 120
    for i in range(2):
        assert outs[f"{i}_kill"].kind == "crash" and "stopped the worker server" in outs[f"{i}_kill"].error
        assert outs[f"{i}_good"].ok and outs[f"{i}_good"].value["flops"] == LINEAR_FLOPS
    assert all(r["worker"] == "worker server" for r in pool.replacements)


# --- --jobs and the control channel -------------------------------------------------------------

def test_jobs_are_capped_at_the_tasks_and_at_memory():
    assert capped_jobs(1000, 2, available=64 << 30) == (2, "--jobs 1000 capped at 2, the number of tasks (2)")
    n, note = capped_jobs(400, 1000, available=4 * pool_mod.WORKER_BYTES)
    assert n == 4 and note is not None and "what memory allows" in note
    assert capped_jobs(None, 1, available=64 << 30) == (1, None)  # the default: nothing to say
    assert capped_jobs(3, 10, available=64 << 30) == (3, None)


@pytest.mark.slow
def test_jobs_1000_on_2_tasks_finishes_with_a_note(tmp_path, capsys):
    folder = tmp_path / "t"
    write(folder, "1_a.py", ADD)
    write(folder, "2_b.py", MATMUL)
    t0 = time.monotonic()
    rc = main(["analyze", str(folder), "--gpu", "H200", "--no-progress", "--jobs", "1000", "--json",
               str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert rc == 0 and time.monotonic() - t0 < 60
    assert "--jobs 1000 capped at 2, the number of tasks (2)" in err


@pytest.mark.slow
@pytest.mark.parametrize("reuse,n", [(False, 300), (True, 100)], ids=["fresh", "reused"])
def test_hundreds_of_workers_at_once_never_deadlock_the_control_channel(reuse, n):
    """Every fork request at once, every reply at once: with blocking sends on both sides this
    deadlocked (the issue: --jobs 1000). Reused workers also take their snapshot (a fingerprint
    each), hence fewer."""
    t0 = time.monotonic()
    with Pool(n, reuse_counting=reuse, warm_up=False) as pool:
        outs = list(pool.run(Job(i, "os:getpid", {}, 60) for i in range(n)))
    assert len(outs) == n and all(o.ok for o in outs)
    assert time.monotonic() - t0 < 120


@pytest.mark.slow
def test_reused_lanes_start_no_more_workers_than_jobs_wait():
    with Pool(50, reuse_counting=True, warm_up=False) as pool:
        pids = {o.value for o in pool.run(Job(i, "os:getpid", {}, 60) for i in range(2))}
        assert len(pool._workers) <= 2  # noqa: SLF001  (what the pool started is the point)
    assert len(pids) <= 2


# --- SIGTERM and SIGHUP ---------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_say_what_was_kept(tmp_path, sig):
    folder = tmp_path / "t"
    for i in (1, 2):
        write(folder, f"{i}_good.py", ADD)
    write(folder, "5_hang.py", ADD.replace("return x + x", "import time\n        while True: time.sleep(0.05)"))
    out = tmp_path / "out.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "python"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "roofline_ext.cli", "analyze", str(folder), "--gpu", "H200",
                             "--no-progress", "--json", str(out), "--jobs", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out.exists() and len(json.loads(out.read_text())["tasks"]) >= 2):
        time.sleep(0.1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 130, err
    name = signal.Signals(sig).name
    assert f"roofline-ext: stopped by {name}: 2 of 3 task(s) finished" in err, err
    assert "Traceback" not in err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and {t["task"] for t in doc["tasks"]} == {"1_good", "2_good"}
