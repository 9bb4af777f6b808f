"""Inputs of ``tests/test_model_assess.py``: counted tasks with and without timing, candidates of
every verdict, a profile, energy, and a task with no floor to give, built without torch or a GPU.

``tests/data/assess_golden.json`` was written from these cases by the dict path as it was before
``model/assess.py`` (analyze_task, merge_timing, attach_energy_floor, merge_judged and the batch's
additions, at commit a659413); the driver that did it, ``old_result``, is in this file at commit
524e126, and could only run against that package, so it is not kept here. ``new_result`` is the same
case through :func:`roofline_ext.model.assess.assess`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

MEASURED = {"bandwidth_tbps": 4.6, "fp32": 60.0, "tf32": 450.0, "fp16": 900.0, "bf16": 900.0}
GOLDEN = Path(__file__).resolve().parent.parent / "data" / "assess_golden.json"


def counts(**over: Any):
    from roofline_ext.tasks.counting import Counts
    from roofline_ext.tasks.opcounts import OpCount

    ops = [OpCount(0, "aten.mm", "fc", 2_000_000_000, 0, 6_000_000, 2_000_000),
           OpCount(1, "aten.relu", "act", 0, 1_000_000, 2_000_000, 2_000_000),
           OpCount(2, "aten.add", "", 0, 1_000_000, 2_000_000, 2_000_000, calls=0)]
    base = dict(task="t", path="/tasks/t.py", model="Model", flops=2_000_000_000, simt_flops=2_000_000,
                bytes=10_000_000, input_bytes=4_000_000, param_bytes=4_000_000, output_bytes=2_000_000,
                dtype="torch.float32", dtypes=["torch.float32"], compute_dtype="torch.float32", cast=None,
                inputs=["x: float32[1000, 1000]"], outputs=["float32[1000, 500]"],
                by_op={"aten.mm": {"flops": 2_000_000_000, "simt_flops": 0, "calls": 1}}, seconds=0.25,
                notes=["a count note"], flops_flopcounter=2_000_000_000, ops=ops,
                unfused_read_bytes=10_000_000, unfused_write_bytes=6_000_000)
    base.update(over)
    return Counts(**base)


def energy(j: float) -> dict[str, Any]:
    from roofline_ext.measure.energy import EnergyMeasurement

    return EnergyMeasurement(calls=100, window_s=1.0, window_j=300.0, power_w=300.0, idle_w=80.0, idle_window_s=1.0,
                             j_per_call_total=3.0, j_per_call_above_idle=j, resolution_j=0.001,
                             update_interval_s=0.1, poll_gap_s=0.001, idle_poll_gap_s=0.001, updates=10,
                             uncertainty_total_j=0.01, uncertainty_above_idle_j=0.02, uncertainty_idle_w=0.5).to_dict()


def costs():
    from roofline_ext.model.energy import COMPUTE_KEYS, HBM_KEYS, EnergyCost, lowest_costs

    rows = [EnergyCost(k, 1e-12, 1e-14, f"test {k}") for k in COMPUTE_KEYS]
    rows += [EnergyCost(k, 1.2e-10, 1e-12, f"test {k}") for k in HBM_KEYS]
    return lowest_costs(rows, idle_w=78.0)


def reply(verdict: str, t_new: float | None = None, **extra: Any) -> dict[str, Any]:
    judgement = {"verdict": verdict, "reason": None if verdict == "correct" else f"{verdict} because",
                 "defence": "identity" if verdict == "invalid" else None,
                 "evidence": {"changes": ["torch.allclose"]} if verdict == "invalid" else {},
                 "mode": "strict", "seed": 7, "checks": 3, "timed_checks": 2}
    value = {"judgement": judgement, "correctness": {"ok": verdict == "correct", "passed": 3, "tolerance": 1e-4,
                                                     "reason": None if verdict == "correct" else "differs"},
             "t_new_ms": t_new, "job_s": 1.5, "timed_loop_s": 0.5, "judge_s": 0.7, "phases_s": {"judge": 0.7}}
    if t_new is not None:
        value["candidate_timing"] = {"median_ms": t_new, "best_ms": t_new, "cv": 0.01, "trials": 100, **extra}
    return value


PROFILE = {"ops": [{"index": 0, "op": "aten.mm", "module": "fc", "kernels": [["sm90_gemm", 0.05]]},
                   {"index": 1, "op": "aten.relu", "module": "act", "kernels": [["relu_kernel", 0.004]]},
                   {"index": 5, "op": "aten.copy_", "module": "", "kernels": [["copy", 0.001]]}],
           "kernel_sum_ms": 0.055, "outside_ms": 0.001, "kernels": 3, "l2_bytes": 50 << 20,
           "queued": {"median_ms": 0.06, "reps": 5}}


def reference(t_ref: float = 0.2, **extra: Any) -> dict[str, Any]:
    return {"t_ref_ms": t_ref, "reference": {"median_ms": t_ref, "best_ms": t_ref, "cv": 0.01, "trials": 100},
            "device": "NVIDIA H200", "dtype": "torch.float32", **extra}


def cases() -> dict[str, dict[str, Any]]:
    """name -> (counts overrides, per_op, reference timing or None, candidates as (name, sample, reply or
    (kind, error), replaced), judged, t_ref/t_new untimed, energy costs, the runner's facts)."""
    ok = ("c.py", None, reply("correct", 0.1), [])
    many = [("a.py", 1, reply("correct", 0.12, energy=energy(0.5)), ["crash"]),
            ("b.py", 2, reply("incorrect"), []), ("c.py", 3, reply("invalid"), []),
            ("d.py", 4, reply("correct", 1e-6), []), ("e.py", 5, ("import", "e.py: loading failed"), [])]
    return {
        "counted": {"run": {"wall_s": 0.3, "worker_replaced": ["state"]}},
        "counted_times_elsewhere": {"t_ref_ms": 0.2, "t_new_ms": 0.1},
        "no_floor": {"counts": {"bytes": 0, "input_bytes": 0, "param_bytes": 0, "output_bytes": 0}},
        "mixed_dtypes": {"counts": {"dtype": "mixed", "dtypes": ["torch.float16", "torch.float32"],
                                    "compute_dtype": "torch.float16"}, "include_ops": False},
        "per_op": {"per_op": True},
        "timed_one": {"reference": reference(t_compile_ms=0.15, compiled_correctness={"ok": True}, compile_error=None),
                      "candidates": [ok], "run": {"wall_s": 2.0, "wall_parts_s": {"count": 0.3, "reference": 1.7},
                                                  "task": "level1/t"}},
        "timed_many_energy": {"reference": reference(energy=energy(0.8)), "candidates": many, "costs": True},
        "timed_energy_no_cost": {"reference": reference(energy=energy(0.8)), "candidates": [ok], "costs": "empty"},
        "timed_below_reference": {"reference": reference(t_ref=1e-6), "candidates": [ok]},
        "timed_no_candidates": {"reference": reference(), "candidates": []},
        "timed_profile": {"per_op": True, "reference": reference(kernel_profile=PROFILE), "candidates": [ok],
                          "l2_tbps": 10.0},
        "timed_profile_error": {"per_op": True, "reference": reference(kernel_profile={"error": "no CUPTI"}),
                                "candidates": []},
        "timed_no_output": {"counts": {"outputs": []}, "reference": reference(), "candidates": [ok]},
        "judged": {"candidates": many[:3], "judged": True, "run": {"wall_s": 4.0}},
        "judged_one": {"candidates": [("c.py", None, reply("correct"), [])], "judged": True},
    }


def _gpu_and_roofs():
    from roofline_ext.model.gpu import resolve_gpu
    from roofline_ext.model.roofs import RoofSet

    gpu = resolve_gpu("H200")
    return gpu, RoofSet.resolve(gpu, "burst", measured=MEASURED)


def _energy_costs(case: dict[str, Any]):
    from roofline_ext.model.energy import EnergyCosts

    return {True: costs(), "empty": EnergyCosts(costs={}), None: None}[case.get("costs")]


def new_result(case: dict[str, Any]):
    """The case through :func:`roofline_ext.model.assess.assess` (a :class:`TaskResult`)."""
    from roofline_ext.errors import RooflineError
    from roofline_ext.model.assess import CandidateResult, ErrorResult, assess, assess_failed

    gpu, roofs = _gpu_and_roofs()
    c = counts(**case.get("counts", {}))
    cands = []
    for name, sample, value, replaced in case.get("candidates", []):
        rec = (CandidateResult.failed(name, sample, kind=value[0], error=value[1], wall_s=1.0)
               if isinstance(value, tuple) else CandidateResult.from_reply(name, sample, value, wall_s=1.0))
        cands.append(rec.with_replaced(replaced))
    ref = case.get("reference")
    profile = ref.get("kernel_profile") if ref is not None else None
    try:
        result = assess(c, roofs, ref, cands, profile, gpu=gpu, per_op=case.get("per_op", False),
                        include_ops=case.get("include_ops", True), t_ref_ms=case.get("t_ref_ms"),
                        t_new_ms=case.get("t_new_ms"), judged=case.get("judged", False),
                        l2_tbps=case.get("l2_tbps"), energy_costs=_energy_costs(case))
    except RooflineError as exc:
        result = assess_failed(ErrorResult.from_exception(c.path, exc), ref, cands, profile,
                               l2_tbps=case.get("l2_tbps"))
    return result.with_run(**case.get("run", {}))

