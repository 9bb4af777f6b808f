"""Issue 28's timing figures for ``analyze --time``, measured in one command on the GPU.

Every figure comes from the real command, ``python3 -m roofline_ext.cli analyze ...``, run as a
subprocess as a user runs it. Sections (run in the order ``--sections`` gives; by default tiny
first, as it is short and would be the one a tight budget cuts, then levels, repeat, trials100):

``levels``     run A: ``analyze DIR/level1 DIR/level2 DIR/level3 --time --json A.json --no-progress``,
               its wall around the whole subprocess (goal: <= 120 s for the 250 tasks).
``repeat``     run B, the same command right after A: per task |t_ref(B) / t_ref(A) - 1|, median
               (goal <= 0.5 %), p90 (<= 2 %) and max over the tasks timed in both; a task that failed
               in either run is listed apart and not counted as agreeing.
``trials100``  run C, the same command with ``--trials 100``: the fraction of tasks with
               |t_ref(C) / t_ref(A) - 1| <= 2 % (goal >= 95 %; a task failed in either run counts
               against it), and the ten worst.
``tiny``       ``analyze tiny.py --time`` on an ``x + 1`` task against a bare ``import torch`` + CUDA
               context start-up: the medians of N alternating runs of each, and their ratio (<= 1.3).

Python's bytecode cache: the GPU machine's torch ships none, and without one imports take 2-3 times
longer. ``PYTHONPYCACHEPREFIX`` points at a writable folder (``--pycache``), and the bare start-up
and the tiny analyze each run once before anything is measured, so every measured run finds the
cache warm. The JSON is rewritten after every section, so a run cut short keeps what it measured;
``--budget-s`` skips a section that would end past the budget, going by an estimate of its
duration (the previous section's, or for ``tiny`` its own warm-up runs), and says so.

    python3 benchmarks/levels_time.py OUT.json --kernelbench ../shared/kernelbench \\
        [--sections tiny,levels,repeat,trials100] [--budget-s 540] [--run-a A.json]

``--analyze-cmd`` and ``--bare-cmd`` replace the commands run (the CPU test runs a fake analyze).
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runner_speed import TINY  # noqa: E402  (the same x + 1 task its trivial section times)

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # a sibling benchmark's helper, below
from count_levels_wall import git_commit  # noqa: E402
# tiny first by default: it is short (about 40 s) and would be the one the budget cuts after three
# runs of 250 tasks; B and C still come right after A.
SECTIONS = ("tiny", "levels", "repeat", "trials100")
LEVELS = ("level1", "level2", "level3")
BARE = "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"
# The bare start-up plus what the report wants to know about the machine, run once as a warm-up.
PROBE = (BARE + "; import json, platform; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda,"
         " 'gpu': torch.cuda.get_device_name(0), 'python': platform.python_version()}))")
BOUNDS = {"levels_wall_s": 120.0, "repeat_median_abs": 0.005, "repeat_p90_abs": 0.02,
          "trials100_within": 0.02, "trials100_fraction": 0.95, "tiny_ratio": 1.3}


# --- statistics on batch JSON documents (pure; tests/test_bench_levels_time.py) -------------------------------

def t_refs(doc: Mapping[str, Any] | None) -> tuple[dict[str, float], dict[str, str]]:
    """A batch document's timed tasks, ``{task: t_ref_ms}``, and the others, ``{task: why}``.

    A task counts as timed only with status ``ok`` and a positive ``t_ref_ms``: a task that was
    counted but whose timing gave nothing cannot agree with anything.
    """
    ok: dict[str, float] = {}
    failed: dict[str, str] = {}
    for row in (doc or {}).get("tasks") or []:
        name = str(row.get("task") or row.get("path"))
        t = row.get("t_ref_ms")
        if row.get("status") != "ok":
            failed[name] = f"{row.get('status')}: {row.get('error_kind') or ''} {row.get('error') or ''}".strip()
        elif not isinstance(t, (int, float)) or not t > 0:
            failed[name] = f"ok but t_ref_ms={t!r}"
        else:
            ok[name] = float(t)
    return ok, failed


def quantile(xs: list[float], q: float) -> float | None:
    """Linear interpolation between order statistics (numpy's default), so p90 of 250 tasks is a
    figure between the 225th and 226th smallest, not a rounding of the rank."""
    if not xs:
        return None
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def compare(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per task relative difference of ``t_ref_ms``, ``b / a - 1`` (a is the reference run).

    Tasks timed in both runs are compared; a task failed or missing in either is listed in
    ``failed`` with what each run said, and counted in ``tasks`` (every task of either run).
    """
    a_ok, a_bad = t_refs(a)
    b_ok, b_bad = t_refs(b)
    names = sorted(set(a_ok) | set(a_bad) | set(b_ok) | set(b_bad))
    deltas: dict[str, float] = {}
    failed = []
    for n in names:
        if n in a_ok and n in b_ok:
            deltas[n] = b_ok[n] / a_ok[n] - 1
        else:
            failed.append({"task": n, "a": a_bad.get(n, "ok" if n in a_ok else "missing"),
                           "b": b_bad.get(n, "ok" if n in b_ok else "missing")})
    absd = [abs(d) for d in deltas.values()]
    worst = sorted(deltas.items(), key=lambda kv: -abs(kv[1]))[:10]
    return {"tasks": len(names), "compared": len(deltas), "failed_count": len(failed), "failed": failed,
            "median_abs": _round(statistics.median(absd) if absd else None),
            "p90_abs": _round(quantile(absd, 0.9)), "max_abs": _round(max(absd) if absd else None),
            "worst": [{"task": n, "rel": _round(d), "a_ms": a_ok[n], "b_ms": b_ok[n]} for n, d in worst],
            "deltas": {n: _round(d) for n, d in deltas.items()}}


def within_fraction(cmp: Mapping[str, Any], tol: float) -> dict[str, Any]:
    """The fraction of tasks within ``tol``: over every task of either run (a failed task is not
    within), and over the compared ones alone, for reading beside it."""
    within = sum(1 for d in cmp["deltas"].values() if abs(d) <= tol)
    return {"within": within, "of_tasks": cmp["tasks"], "of_compared": cmp["compared"],
            "fraction": _round(within / cmp["tasks"] if cmp["tasks"] else None),
            "fraction_of_compared": _round(within / cmp["compared"] if cmp["compared"] else None)}


def host_bound_tasks(doc: Mapping[str, Any] | None) -> list[str]:
    """The tasks whose reference series was host-bound in an adaptive run (``host_bound``, since
    session 18: the GPU waited for the host's launches, so the time is the host's;
    measure/timing.py)."""
    out = []
    for row in (doc or {}).get("tasks") or []:
        ref = (row.get("timing") or {}).get("reference") or {}
        if ref.get("host_bound") is True:
            out.append(str(row.get("task") or row.get("path")))
    return out


def card_bound_within(cmp: Mapping[str, Any], host_bound: Sequence[str], tol: float) -> dict[str, Any]:
    """:func:`within_fraction` over the compared tasks whose time is the card's (none of ``host_bound``):
    what a host that changes speed between runs cannot move. Reported beside the goal's figure, which
    stays over every task."""
    hb = set(host_bound)
    kept = {n: d for n, d in cmp["deltas"].items() if n not in hb}
    frac = within_fraction({"deltas": kept, "tasks": len(kept), "compared": len(kept)}, tol)
    return {"host_bound": len(hb & set(cmp["deltas"])), "compared": len(kept), "within": frac["within"],
            "fraction": frac["fraction"],
            "host_bound_tasks": sorted(hb & set(cmp["deltas"])),
            "host_bound_within": sum(1 for n, d in cmp["deltas"].items() if n in hb and abs(d) <= tol)}


def card_states(doc: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``{task: the card's state over its reference series}``: the median SM clock, the median
    temperature and the clock-event reasons seen (the ``telemetry`` each reference records since
    2026-12-06); a task whose run recorded none is left out."""
    out: dict[str, dict[str, Any]] = {}
    for row in (doc or {}).get("tasks") or []:
        ref = (row.get("timing") or {}).get("reference") or {}
        tel = ref.get("telemetry") or {}
        sm = (tel.get("sm_clock_mhz") or {}).get("median")
        if sm:
            out[str(row.get("task") or row.get("path"))] = {
                "sm_mhz": sm, "temp_c": (tel.get("temperature_c") or {}).get("median"),
                "slowdown": list(tel.get("slowdown") or []),
                "host_pace_us": (ref.get("host") or {}).get("pace_us"),  # since 2026-12-06 (session 16)
                "host_pace_after_us": (ref.get("host") or {}).get("pace_after_us")}  # since session 17
    return out


def misses_by_clock(cmp: Mapping[str, Any], a: Mapping[str, Any] | None, b: Mapping[str, Any] | None,
                    tol: float, clock_tol: float = 0.02, host_tol: float = 0.05) -> dict[str, Any]:
    """Each task outside ``tol`` between runs a and b, with the card's state in both, and how many of
    them the card explains: b slower while its SM clock's median was ``clock_tol`` or more below a's
    (or a faster the other way round). Those misses are the card's (its power cap at a higher
    temperature, a longer run), not the timing's; the rest are listed for what they are. Likewise
    ``slower_host``: misses where the host's pace (``host.pace_us``, averaged with
    ``host.pace_after_us`` where read: :func:`_host_pace`) moved ``host_tol`` or more the same way
    as the time, the launch-bound tasks' usual suspect."""
    sa, sb = card_states(a), card_states(b)
    rows, explained, slower_host = [], 0, 0
    for task, d in sorted(cmp["deltas"].items(), key=lambda kv: -abs(kv[1])):
        if abs(d) <= tol:
            continue
        ca, cb = sa.get(task), sb.get(task)
        clock = cb["sm_mhz"] / ca["sm_mhz"] - 1 if ca and cb else None
        by_card = clock is not None and ((d > 0 and clock <= -clock_tol) or (d < 0 and clock >= clock_tol))
        explained += by_card
        # The host's pace the same way (a larger pace_us is a slower host), where both runs have it.
        pa, pb = _host_pace(ca), _host_pace(cb)
        pace = pb / pa - 1 if pa and pb else None
        by_host = pace is not None and ((d > 0 and pace >= host_tol) or (d < 0 and pace <= -host_tol))
        slower_host += by_host
        rows.append({"task": task, "rel": d, "clock_rel": _round(clock), "by_clock": by_card,
                     "host_pace_rel": _round(pace), "by_host": by_host, "a": ca, "b": cb})
    return {"misses": len(rows), "with_card_state": sum(1 for r in rows if r["clock_rel"] is not None),
            "explained_by_clock": explained, "clock_tol": clock_tol,
            "with_host_pace": sum(1 for r in rows if r["host_pace_rel"] is not None),
            "slower_host": slower_host, "host_tol": host_tol, "rows": rows}


def _host_pace(state: Mapping[str, Any] | None) -> float | None:
    """The host's pace around a series: the mean of the pace before and after it where both were
    read (since session 17; a host can change speed during a series), else the pace before."""
    if not state or not state.get("host_pace_us"):
        return None
    after = state.get("host_pace_after_us")
    return (state["host_pace_us"] + after) / 2 if after else state["host_pace_us"]


def _round(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)


def verdict(checks: Mapping[str, tuple[float | None, str, float]]) -> dict[str, Any]:
    """``{name: (value, op, bound)}`` with op ``<=`` or ``>=``: pass only if every value is there
    and meets its bound (a missing figure fails: nothing measured is not a pass)."""
    rows = {}
    for name, (value, op, bound) in checks.items():
        ok = value is not None and (value <= bound if op == "<=" else value >= bound)
        rows[name] = {"value": value, "bound": f"{op} {bound:g}", "pass": ok}
    return {"pass": all(r["pass"] for r in rows.values()), "checks": rows}


def repeat_verdict(cmp: Mapping[str, Any]) -> dict[str, Any]:
    return verdict({"median_abs": (cmp["median_abs"], "<=", BOUNDS["repeat_median_abs"]),
                    "p90_abs": (cmp["p90_abs"], "<=", BOUNDS["repeat_p90_abs"])})


def trials100_verdict(frac: Mapping[str, Any]) -> dict[str, Any]:
    return verdict({"fraction_within_2pct": (frac["fraction"], ">=", BOUNDS["trials100_fraction"])})


def should_start(elapsed_s: float, estimate_s: float | None, budget_s: float) -> bool:
    """Start a section only if it is expected to end within the budget; with no estimate (the first
    section), only if the budget is not spent already."""
    return elapsed_s + (estimate_s or 0.0) <= budget_s


# --- running commands --------------------------------------------------------------------------------

def timed_run(cmd: list[str], env: Mapping[str, str], timeout_s: float | None = None,
              stderr_path: Path | None = None) -> dict[str, Any]:
    """Run ``cmd``; its wall around the whole subprocess, exit code and last stderr lines. Past
    ``timeout_s`` its whole process group is killed (the pool's workers with it), so that this
    script still writes its JSON before the device's own limit ends everything."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=dict(env), cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    wall = time.perf_counter() - t0
    if stderr_path is not None:  # all of it (--verbose's timeline), beside the run's JSON
        stderr_path.write_text(err or "")
    return {"cmd": shlex.join(cmd), "wall_s": round(wall, 3), "rc": proc.returncode, "timed_out": timed_out,
            "stdout_tail": (out or "").strip().splitlines()[-3:], "stderr_tail": (err or "").strip().splitlines()[-8:]}


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _nvidia_smi() -> str | None:
    q = "name,driver_version,pstate,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit,memory.used"
    try:
        res = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return res.stdout.strip() or None


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out)
        self.runs = Path(args.runs_dir or self.out.with_name(self.out.stem + ".runs"))
        self.runs.mkdir(parents=True, exist_ok=True)
        self.analyze = shlex.split(args.analyze_cmd) if args.analyze_cmd else [sys.executable, "-m", "roofline_ext.cli", "analyze"]
        self.bare = shlex.split(args.bare_cmd) if args.bare_cmd else [sys.executable, "-c", BARE]
        self.env = self._env()
        self.t0 = time.monotonic()
        self.doc_a: dict[str, Any] | None = None
        self.tiny = self.runs / "tiny.py"
        self.tiny.write_text(TINY)
        self.report: dict[str, Any] = {
            "benchmark": "levels_time", "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "commit": git_commit(), "nvidia_smi": _nvidia_smi(), "host": platform.node(),
            "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "kernelbench": str(Path(args.kernelbench).resolve()), "pycache": self.env.get("PYTHONPYCACHEPREFIX"),
            "bounds": BOUNDS, "budget_s": args.budget_s, "sections": {}, "skipped": {}}

    def _env(self) -> dict[str, str]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if importlib.util.find_spec("roofline_ext") is None:  # a bare checkout: run it from python/
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "python"), env.get("PYTHONPATH")) if p)
        if self.args.pycache != "none":
            cache = Path(self.args.pycache).resolve()
            cache.mkdir(parents=True, exist_ok=True)
            env["PYTHONPYCACHEPREFIX"] = str(cache)
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def remaining(self) -> float:
        """Seconds a run may still take before it is killed: up to --hard-limit-s, past the budget
        (a section started within it may overrun its estimate a little) but short of the device's
        limit, leaving time to write the JSON."""
        return max(1.0, self.args.hard_limit_s - self.elapsed())

    def save(self) -> None:
        self.report["elapsed_s"] = round(self.elapsed(), 1)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.out.with_name(self.out.name + ".tmp")
        tmp.write_text(json.dumps(self.report, indent=1) + "\n")
        tmp.replace(self.out)  # never a half-written file, even if the device's limit strikes mid-write

    def levels_cmd(self, out_json: Path, *extra: str) -> list[str]:
        dirs = [str(Path(self.args.kernelbench) / lv) for lv in LEVELS]
        return [*self.analyze, *dirs, "--time", *extra, "--json", str(out_json), "--no-progress"]

    def tiny_cmd(self) -> list[str]:
        return [*self.analyze, str(self.tiny), "--time", "--no-progress", "--json", str(self.runs / "tiny.json")]

    def warm_up(self) -> None:
        """Fill the bytecode cache (and the driver's caches) once, so no measured run pays for it;
        the probe is the bare start-up plus a line saying what it ran on."""
        probe = self.bare if self.args.bare_cmd else [sys.executable, "-c", PROBE]
        p = timed_run(probe, self.env, timeout_s=self.remaining())
        try:
            self.report["machine"] = json.loads(p["stdout_tail"][-1]) if p["stdout_tail"] else None
        except ValueError:
            self.report["machine"] = None
        t = timed_run(self.tiny_cmd(), self.env, timeout_s=self.remaining())
        self.report["warm_up"] = {"bare": p, "tiny": t}
        self.save()


# --- sections ------------------------------------------------------------------------------------------

def _batch(b: Bench, label: str, *extra: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One run of the three levels, JSON to ``runs/<label>.json``; what the run and its JSON say."""
    out_json = b.runs / f"{label}.json"
    out_json.unlink(missing_ok=True)  # a stale file from an earlier run must not pass for this one
    # --verbose: the pool's timeline (each job with its own seconds and the checks after it) goes
    # to runs/<label>.stderr, so a wall over its bound says where it went.
    res = timed_run(b.levels_cmd(out_json, *extra, "--verbose"), b.env, timeout_s=b.remaining(),
                    stderr_path=b.runs / f"{label}.stderr")
    doc = _read_json(out_json)
    ok, failed = t_refs(doc)
    res.update({"json": str(out_json), "complete": (doc or {}).get("complete"),
                "tasks": len(ok) + len(failed), "timed": len(ok),
                "failed": [{"task": n, "why": w} for n, w in sorted(failed.items())]})
    return res, doc


def section_levels(b: Bench) -> dict[str, Any]:
    res, b.doc_a = _batch(b, "A")
    # analyze exits 1 when any task failed: the batch finishing ("complete") is what the wall needs;
    # the failed tasks are listed in run_a and kept apart by the comparisons.
    v = verdict({"wall_s": (res["wall_s"], "<=", BOUNDS["levels_wall_s"]),
                 "tasks": (float(res["tasks"]), ">=", float(b.args.expect_tasks)),
                 "complete": (1.0 if res["complete"] is True and not res["timed_out"] else 0.0, ">=", 1.0)})
    return {"run_a": res, "failed_count": len(res["failed"]), "verdict": v}


def section_repeat(b: Bench) -> dict[str, Any]:
    res, doc_b = _batch(b, "B")
    cmp = compare(b.doc_a, doc_b)
    return {"run_b": res, "a_vs_b": cmp, "verdict": repeat_verdict(cmp),
            "card_bound_within_2pct": card_bound_within(cmp, host_bound_tasks(b.doc_a), BOUNDS["trials100_within"])}


def section_trials100(b: Bench) -> dict[str, Any]:
    res, doc_c = _batch(b, "C", "--trials", "100")
    cmp = compare(b.doc_a, doc_c)
    frac = within_fraction(cmp, BOUNDS["trials100_within"])
    return {"run_c": res, "a_vs_c": {k: v for k, v in cmp.items() if k != "worst"}, "within_2pct": frac,
            "worst10": cmp["worst"], "verdict": trials100_verdict(frac),
            "card_bound_within_2pct": card_bound_within(cmp, host_bound_tasks(b.doc_a), BOUNDS["trials100_within"]),
            "misses_by_clock": misses_by_clock(cmp, b.doc_a, doc_c, BOUNDS["trials100_within"])}


def section_tiny(b: Bench) -> dict[str, Any]:
    # One more untimed pair first: the levels runs just before filled the page cache with other files.
    timed_run(b.bare, b.env, timeout_s=b.remaining())
    timed_run(b.tiny_cmd(), b.env, timeout_s=b.remaining())
    (b.runs / "tiny.json").unlink(missing_ok=True)  # what it reports must come from a measured run
    bare, tiny = [], []
    for _ in range(b.args.tiny_runs):  # alternating, so a drift in the machine's state hits both alike
        bare.append(timed_run(b.bare, b.env, timeout_s=b.remaining()))
        tiny.append(timed_run(b.tiny_cmd(), b.env, timeout_s=b.remaining()))
    failed = [r for r in bare + tiny if r["rc"] != 0]
    # One more with --verbose, not among the measured: where a lone task's time goes (the pool's
    # timeline: the fork server, the timing worker's setup and snapshot, the count, the job).
    trace = b.runs / "tiny-verbose.stderr"
    timed_run([*b.tiny_cmd(), "--verbose"], b.env, timeout_s=b.remaining(), stderr_path=trace)
    timeline = timeline_lines(trace.read_text() if trace.exists() else "")
    mb = statistics.median(r["wall_s"] for r in bare)
    mt = statistics.median(r["wall_s"] for r in tiny)
    ratio = round(mt / mb, 3) if mb > 0 else None
    doc = _read_json(b.runs / "tiny.json") or {}
    row = (doc.get("tasks") or [doc])[0] if isinstance(doc, dict) else {}
    v = verdict({"ratio": (ratio, "<=", BOUNDS["tiny_ratio"]),
                 "all_runs_rc_zero": (0.0 if failed else 1.0, ">=", 1.0)})
    return {"runs": b.args.tiny_runs, "bare_cmd": shlex.join(b.bare), "tiny_cmd": shlex.join(b.tiny_cmd()),
            "bare_walls_s": [r["wall_s"] for r in bare], "tiny_walls_s": [r["wall_s"] for r in tiny],
            "bare_median_s": mb, "tiny_median_s": mt, "ratio": ratio,
            "tiny_t_ref_ms": row.get("t_ref_ms"), "tiny_status": row.get("status"),
            "failed_runs": failed, "verbose_timeline": timeline, "verdict": v}


def timeline_lines(stderr: str) -> list[str]:
    """``--verbose``'s timeline out of a run's stderr: the heading and the lines after it that
    start with a time, as printed."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if "where the time went" in line), None)
    if start is None:
        return []
    out = [lines[start]]
    for line in lines[start + 1:]:
        head = line.strip().split(" ", 1)[0]
        if not head.replace(".", "", 1).isdigit():
            break
        out.append(line.rstrip())
    return out


def estimate(b: Bench, name: str, durations: Mapping[str, float]) -> float | None:
    """How long ``name`` is expected to take: tiny from its warm-up pair (its runs are those, a few
    times over), the others from the section before (the same command, or near it)."""
    if name == "tiny":
        w = b.report.get("warm_up") or {}
        pair = sum((w.get(k) or {}).get("wall_s", 0.0) for k in ("bare", "tiny"))
        return pair * (b.args.tiny_runs + 1)
    return list(durations.values())[-1] if durations else None


def run_sections(b: Bench, wanted: list[str]) -> None:
    durations: dict[str, float] = {}
    runners: dict[str, Callable[[Bench], dict[str, Any]]] = {
        "levels": section_levels, "repeat": section_repeat, "trials100": section_trials100, "tiny": section_tiny}
    for name in wanted:
        if name in ("repeat", "trials100") and b.doc_a is None:
            b.report["skipped"][name] = "no run A to compare with (the levels section or --run-a)"
            continue
        est = estimate(b, name, durations)
        if not should_start(b.elapsed(), est, b.args.budget_s):
            b.report["skipped"][name] = (f"budget: {b.elapsed():.0f} s elapsed + ~{est or 0:.0f} s expected "
                                         f"> --budget-s {b.args.budget_s:g}")
            b.save()
            continue
        print(f"levels_time: {name} (at {b.elapsed():.0f} s) ...", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        sec = runners[name](b)
        durations[name] = time.monotonic() - t0
        b.report["sections"][name] = {**sec, "section_wall_s": round(durations[name], 1), "nvidia_smi_after": _nvidia_smi()}
        b.save()  # after every section: a run cut short keeps what it measured


def _verdicts(report: Mapping[str, Any]) -> dict[str, Any]:
    return {name: sec.get("verdict", {}).get("pass") for name, sec in report["sections"].items()}


def _default_kernelbench() -> Path:
    # The device machine may copy shared/ into the checkout rather than beside it.
    outside, inside = REPO.parent / "shared" / "kernelbench", REPO / "shared" / "kernelbench"
    return inside if inside.is_dir() and not outside.is_dir() else outside


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="where to write the JSON report")
    ap.add_argument("--kernelbench", default=str(_default_kernelbench()),
                    help="the folder holding level1, level2, level3 (default ../shared/kernelbench, or "
                    "shared/kernelbench inside the checkout where only that exists)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--budget-s", type=float, default=540.0,
                    help="start no section expected to end past this many seconds (default 540: the device's "
                    "600 s per command, less a margin)")
    ap.add_argument("--hard-limit-s", type=float, default=585.0,
                    help="kill a run still going this many seconds after the start (default 585), so the JSON "
                    "is written before the device's 600 s limit")
    ap.add_argument("--run-a", metavar="A.json", help="an earlier run A's batch JSON, for repeat/trials100 without levels")
    ap.add_argument("--runs-dir", help="where the runs' batch JSON and the tiny task go (default OUT.runs/ beside OUT)")
    ap.add_argument("--pycache", default=str(Path(tempfile.gettempdir()) / "roofline-levels-pycache"),
                    help="PYTHONPYCACHEPREFIX folder, kept between commands ('none': leave the environment's own)")
    ap.add_argument("--tiny-runs", type=int, default=5, help="measured runs of each, bare and tiny (default 5)")
    ap.add_argument("--expect-tasks", type=int, default=250, help="tasks run A must report (default 250)")
    ap.add_argument("--analyze-cmd", default=os.environ.get("LEVELS_TIME_ANALYZE_CMD"),
                    help="the analyze command, shell-split (default: this python -m roofline_ext.cli analyze; "
                    "env LEVELS_TIME_ANALYZE_CMD)")
    ap.add_argument("--bare-cmd", default=os.environ.get("LEVELS_TIME_BARE_CMD"),
                    help="the bare start-up command, shell-split (default: python -c import torch + CUDA context)")
    args = ap.parse_args(argv)
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(wanted) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    wanted = list(dict.fromkeys(wanted))  # in the order given: repeat and trials100 need levels before them
    missing = [lv for lv in LEVELS if not (Path(args.kernelbench) / lv).is_dir()]
    if missing and set(wanted) & {"levels", "repeat", "trials100"}:
        # Before any device time goes on the warm-up: a wrong path would only show as 0 tasks.
        ap.error(f"{args.kernelbench}: no {', '.join(missing)} folder (give --kernelbench)")
    b = Bench(args)
    b.doc_a = _read_json(Path(args.run_a)) if args.run_a else None
    b.report["run_a_from"] = args.run_a
    b.warm_up()
    run_sections(b, wanted)
    b.report["verdicts"] = _verdicts(b.report)
    b.save()
    print(json.dumps({"verdicts": b.report["verdicts"], "skipped": b.report["skipped"],
                      "elapsed_s": b.report["elapsed_s"]}, indent=1), file=sys.stderr)
    print(f"levels_time: written to {b.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
