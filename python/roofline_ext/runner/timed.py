"""``analyze --time``: GPU times of the reference and the candidates, put on every roof and scored.

Both runner paths end here. The pool (:mod:`roofline_ext.runner.batch`) times the reference and
each candidate as jobs of their own and calls :func:`merge_timing`; ``--isolation process``
(:func:`analyze_and_time`) times a task in a subprocess of its own (:mod:`roofline_ext.runner.isolation`),
counts it in this process as the first versions did, and ends in the same :func:`merge_timing`,
so the two paths give results of one shape.

An incorrect candidate gets no fraction and no score; a candidate below a floor is flagged on that
roof and not scored (:mod:`roofline_ext.model.scoring`).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .analyze import GpuChoice, analyze_task
from ..errors import RooflineError
from ..model.verdict import Verdict, clip_score
from ..model.scoring import candidate_roofs, reference_flags

DEFAULT_TIMEOUT_S = 600.0


class TimingError(RooflineError):
    """Timing a task failed (its one-line reason and ``kind``: crash, timeout, error, ...)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def _fraction(t_min: float | None, t: float | None) -> float | None:
    return t_min / t if t_min and t else None


# --- one result from a reference timing and its candidates -----------------------------------------

def candidate_record(candidate: str, sample: int | None, value: Mapping[str, Any] | None = None, *,
                     kind: str | None = None, error: str | None = None, wall_s: float | None = None) -> dict[str, Any]:
    """A candidate's record before scoring: ``value`` is what ``time_candidate`` (or
    ``judge_candidate``) returned, or ``kind``/``error`` say why it could not be judged or timed.

    ``verdict`` is the one vocabulary (:mod:`roofline_ext.model.verdict`): ``correct``,
    ``incorrect``, ``invalid`` or ``error`` here; :func:`score_candidate` turns a correct one that
    beats a floor into ``below_floor``."""
    rec: dict[str, Any] = {"candidate": candidate, "sample": sample, "wall_s": wall_s}
    if value is None:
        return {**rec, "status": "error", "error_kind": kind, "error": error, "correct": None, "t_new_ms": None,
                "verdict": Verdict.ERROR.value, "reason": error, "defence": None}
    judgement = value.get("judgement")
    if judgement is None:  # the first versions' path (--isolation process): correctness only
        ok = bool((value.get("correctness") or {}).get("ok"))
        judgement = {"verdict": (Verdict.CORRECT if ok else Verdict.INCORRECT).value,
                     "reason": None if ok else (value.get("correctness") or {}).get("reason")}
    correct = judgement["verdict"] == Verdict.CORRECT.value
    timing = dict(value.get("candidate_timing") or {}) if correct else None
    energy = timing.pop("energy", None) if timing else None  # --energy: beside the timing, as the task's
    return {**rec, "status": "ok", "correct": correct, "correctness": value.get("correctness"),
            "verdict": judgement["verdict"], "reason": judgement.get("reason"), "defence": judgement.get("defence"),
            "judgement": judgement, "t_new_ms": value.get("t_new_ms") if correct else None,
            "timing": timing or None, "energy": energy,
            "job_s": value.get("job_s"), "timed_loop_s": value.get("timed_loop_s"),
            "judge_s": value.get("judge_s"), "phases_s": value.get("phases_s")}


def score_candidate(rec: dict[str, Any], roofs: Mapping[str, Any] | None, t_ref: float | None) -> dict[str, Any]:
    """Add ``speedup``, per-roof ``fraction``/``score``/``below_floor`` and the ``below_floor`` roofs.

    A correct candidate faster than any roof's floor becomes ``below_floor``: never scored, on any
    roof (the count or a peak is wrong for the task, and a score would hide it)."""
    t_new = rec.get("t_new_ms") if rec.get("correct") else None
    rec["speedup"] = t_ref / t_new if t_ref and t_new else None
    rec["roofs"] = candidate_roofs(roofs, t_ref, t_new) if t_new else {name: None for name in (roofs or {})}
    rec["below_floor"] = [name for name, r in rec["roofs"].items() if r and r["below_floor"]]
    if rec["below_floor"] and rec.get("verdict") == Verdict.CORRECT.value:
        rec["verdict"] = Verdict.BELOW_FLOOR.value
        rec["reason"] = f"faster than the {', '.join(rec['below_floor'])} floor"
    for r in rec["roofs"].values():
        if r:
            r["score"] = None if rec["below_floor"] else clip_score(r["score"])
    return rec


def merge_timing(analyze: Callable[[float | None, float | None], dict[str, Any]], reference: Mapping[str, Any],
                 candidates: Sequence[dict[str, Any]], *, l2_tbps: float | None = None) -> dict[str, Any]:
    """The task's result with its times: ``analyze(t_ref_ms, t_new_ms)`` is :func:`analyze_task`
    bound to the task; ``reference`` is ``time_reference``'s dict; ``candidates`` are
    :func:`candidate_record`\\ s. With exactly one candidate the top-level ``t_new_ms``,
    ``roofline_frac``, ``correct``, ``speedup`` and each roof's ``new_fraction``/``score`` are its own.
    A reference profiled kernel by kernel (``kernel_profile``, with ``--ops``) puts its kernels on
    the result's ops, held to their floors with the L2 figure ``l2_tbps`` (:mod:`.kernel_profile`)."""
    single = candidates[0] if len(candidates) == 1 else None
    t_ref = reference["t_ref_ms"]
    result = analyze(t_ref, single["t_new_ms"] if single and single.get("correct") else None)
    roofs = result.get("roofs") or {}
    for rec in candidates:
        score_candidate(rec, roofs, t_ref)
    result["timing"] = dict(reference)
    if "energy" in result["timing"]:  # --energy: the reference's energy per call, beside its time
        result["energy"] = {"reference": result["timing"].pop("energy")}
    if reference.get("kernel_profile") is not None:
        from .kernel_profile import attach_profile

        result["timing"].pop("kernel_profile")
        attach_profile(result, reference["kernel_profile"], l2_tbps=l2_tbps)
    result["candidates"] = list(candidates)
    result["correct"] = single.get("correct") if single else None
    result["verdict"] = single.get("verdict") if single else None
    result["speedup"] = single.get("speedup") if single else None
    result["t_compile_ms"] = reference.get("t_compile_ms")
    if "compiled_correctness" in reference or "compile_error" in reference:  # --compile
        result["compiled_correct"] = (reference.get("compiled_correctness") or {}).get("ok")
        result["compile_error"] = reference.get("compile_error")
    if single is not None:
        _single_candidate(result, single)
    for roof in roofs.values():
        if roof and reference.get("t_compile_ms"):
            roof["compile_fraction"] = _fraction(roof.get("t_min_ms"), reference["t_compile_ms"])
    _notes(result, candidates, roofs, t_ref)
    return result


def attach_energy_floor(result: dict[str, Any], costs: Any) -> None:
    """``--energy`` with measured costs (``--energy-costs``): the task's energy floor per call
    (``energy.floor``, :func:`~roofline_ext.model.energy.energy_floor_for` from the same counts and
    roof as the time floor) and each measured variant against it (``fraction_of_floor``,
    ``below_floor``: a call below its energy floor is flagged as a time below its time floor is).
    A cost the task needs that was not measured is ``energy.floor_error``, one line."""
    energy, typed = result.get("energy"), result.get("_result")
    if not energy or typed is None or costs is None:
        return
    from ..errors import UserError
    from ..measure.energy import EnergyMeasurement
    from ..model.energy import energy_floor_for, task_energy

    try:
        floor = energy_floor_for(typed, costs, read_bytes=result.get("input_bytes", 0) + result.get("param_bytes", 0),
                                 write_bytes=result.get("output_bytes"))
    except UserError as exc:
        energy["floor_error"] = str(exc)
        return
    energy["floor"] = floor.to_dict()
    variants = [("reference", energy.get("reference"))]
    variants += [(str(c.get("sample") or c["candidate"]), c.get("energy")) for c in result.get("candidates") or ()]
    for label, e in variants:
        if e and not e.get("error"):
            te = task_energy(floor, EnergyMeasurement.from_dict(e), label=label)
            e.update(fraction_of_floor=te.fraction, fraction_of_floor_total=te.fraction_total,
                     below_floor=te.below_floor, below_floor_beyond_uncertainty=te.below_floor_beyond_uncertainty)


def merge_judged(result: dict[str, Any], candidates: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A counted task's result with its candidates' verdicts, judged without timing (no scores)."""
    if result.get("status") != "ok":
        return result
    result["candidates"] = list(candidates)
    single = candidates[0] if len(candidates) == 1 else None
    result["correct"] = single.get("correct") if single else None
    result["verdict"] = single.get("verdict") if single else None
    _notes(result, candidates, {}, None, timed=False)
    return result


def _single_candidate(result: dict[str, Any], rec: Mapping[str, Any]) -> None:
    # What the one-candidate text report and the first JSON layout read.
    result["timing"].update(candidate=rec["candidate"], correctness=rec.get("correctness"),
                            candidate_timing=rec.get("timing"), t_new_ms=rec.get("t_new_ms"),
                            speedup=rec.get("speedup"))
    for name, roof in (result.get("roofs") or {}).items():
        mine = (rec.get("roofs") or {}).get(name)
        if roof:
            roof["score"] = mine["score"] if mine else None
            roof["new_below_floor"] = bool(mine and mine["below_floor"])
    primary = (rec.get("roofs") or {}).get(result.get("primary_roof") or "")
    result["score"] = primary["score"] if primary else None


def _notes(result: dict[str, Any], candidates: Sequence[Mapping[str, Any]], roofs, t_ref, timed: bool = True) -> None:
    notes = result.setdefault("notes", [])
    for rec in candidates:
        who = "the candidate" if len(candidates) == 1 else f"candidate {rec['candidate']}"
        if rec["status"] != "ok":
            notes.append(f"{who} failed ({rec['error_kind']}): {rec['error']}")
        elif rec.get("verdict") == Verdict.INVALID.value:
            notes.append(f"{who} is INVALID ({rec.get('defence')}: {rec.get('reason')}): no time, no score")
        elif rec["correct"] is False:
            notes.append(f"{who} is INCORRECT ({(rec.get('correctness') or {}).get('reason') or rec.get('reason')}): "
                         "no fraction, no score")
        elif rec.get("below_floor"):
            notes.append(f"{who} is below the {', '.join(rec['below_floor'])} floor: not scored on any roof; "
                         "the FLOP/byte count or the peaks are wrong for this task")
    if not timed:
        return
    beaten = reference_flags(roofs, t_ref)
    if beaten:
        notes.append(f"the reference is at or below the {', '.join(beaten)} floor: candidates cannot be "
                     "scored there; the FLOP/byte count or the peaks are wrong for this task")
    elif result.get("impossible"):
        notes.append("a time is below a floor, the floor of the reference's operations: that code took an "
                     "algebraic or structural shortcut, or the FLOP/byte counts or the peaks are wrong "
                     "for this task")
    if not roofs.get("measured"):
        notes.append("no measured roof for this GPU: run `roofline-ext calibrate` once to add it")


# --- the one-subprocess-per-task path (--isolation process) ----------------------------------------

def analyze_and_time(
    path: str | os.PathLike,
    gpu: GpuChoice | str | None = None,
    dtype: str | None = None,
    *,
    regime: str = "burst",
    strict_fp32: bool = False,
    measured: Mapping[str, float] | None | bool = True,
    new: str | os.PathLike | None = None,
    trials: int = 100,
    warmup: int = 10,
    compile: bool = False,
    device: int = 0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    inputs: str = "cpu",
    correct_trials: int = 1,
) -> dict[str, Any]:
    """Time ``path`` on CUDA device ``device`` in a fresh subprocess and analyze it with those times.

    The result is :func:`merge_timing`'s. Raises ``TimingError`` when the timing process failed,
    ``TaskError`` for a bad task file.
    """
    from .isolation import run_isolated

    kwargs = {"path": str(Path(path).resolve()), "new": str(Path(new).resolve()) if new else None,
              "dtype": dtype, "trials": trials, "warmup": warmup, "compile": compile, "device": device,
              "inputs": inputs, "correct_trials": correct_trials}
    outcome = run_isolated(kwargs, timeout_s=timeout_s)
    if not outcome["ok"]:
        if outcome["kind"] == "gpu-unavailable":
            from ..device.status import availability
            from ..errors import GpuUnavailableError

            raise GpuUnavailableError(availability())
        raise TimingError(f"{path}: timing failed: {outcome['error']}", outcome["kind"])
    timing = outcome["result"]
    candidates = []
    if timing.get("candidate") or timing.get("correctness"):
        candidates.append(candidate_record(timing.get("candidate") or "ModelNew in task", None, timing))

    def analyze(t_ref, t_new):
        return analyze_task(path, gpu, dtype, regime=regime, strict_fp32=strict_fp32, t_ref_ms=t_ref,
                            t_new_ms=t_new, measured=measured)

    return merge_timing(analyze, timing, candidates)
