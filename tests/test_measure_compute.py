"""Compute roofs (roofline_ext.measure.compute and the _core.compute_* kernels).

CPU tests: the no-GPU error, the path planning and unsupported-precision report (from fake
capability dicts), fractions and the clock-derived bound (with a fake core). GPU tests (marked
``gpu``): every kernel verifies and a deliberately corrupted operand fails; figures sit below the
clock-derived peak and above half of it; the best path beats cuBLAS of the same precision.
"""
from __future__ import annotations

import contextlib
import importlib

import pytest

from roofline_ext.measure import compute
from roofline_ext.device.status import Availability, Reason
from roofline_ext.errors import GpuUnavailableError, UserError

# The module, not the function of the same name that the package exports lazily.
from roofline_ext.device import status as availability_mod

H200 = {"device": 0, "name": "NVIDIA H200", "cc_major": 9, "cc_minor": 0, "sm_count": 132,
        "max_sm_clock_mhz": 1980.0, "shared_mem_per_block_optin": 232448}
A100 = {"device": 0, "name": "NVIDIA A100-SXM4-80GB", "cc_major": 8, "cc_minor": 0, "sm_count": 108,
        "max_sm_clock_mhz": 1410.0, "shared_mem_per_block_optin": 166912}


def caps_for(cc: tuple[int, int]) -> dict:
    """What _core.compute_paths reports for a GPU of compute capability ``cc`` (the C++ rules)."""
    ok = {"supported": True, "reason": None}

    def no(reason):
        return {"supported": False, "reason": reason}

    out = {}
    for p in compute.PRECISIONS:
        simt = ok if p in ("fp32", "fp64") else no("the SIMT path measures fp32 and fp64 only")
        if p in ("fp32", "fp64"):
            mma, wg = no(f"{p} has no mma.sync path"), no(f"{p} has no wgmma path")
        else:
            mma = ok
            if p == "fp8" and not (cc == (8, 9) or cc >= (12, 0)):
                mma = no("fp8 (e4m3) tensor cores need compute capability 8.9 (Ada) or newer")
            wg = ok if cc[0] == 9 else no(f"wgmma is a Hopper (compute capability 9.0) instruction; this GPU is {cc[0]}.{cc[1]}")
        out[p] = {"simt": simt, "mma.sync": mma, "wgmma": wg}
    return out


# --- planning and the unsupported report ------------------------------------------------------------

def test_plan_on_hopper_runs_both_tensor_paths():
    plan = compute.plan_paths(caps_for((9, 0)), compute.PRECISIONS)
    assert plan["fp32"] == {"simt": None}
    assert plan["fp16"] == {"mma.sync": None, "wgmma": None}
    assert plan["int8"] == {"mma.sync": None, "wgmma": None}
    # fp8 mma.sync is emulated on Hopper: unsupported there, with the reason; wgmma runs it
    plan = compute.plan_paths(caps_for((9, 0)) | {"fp8": caps_for((9, 0))["fp8"] | {
        "mma.sync": {"supported": False, "reason": "emulated"}}}, ["fp8"])
    assert plan["fp8"] == {"mma.sync": "emulated", "wgmma": None}


def test_unsupported_precision_is_reported_with_reason_not_zero():
    plan = compute.plan_paths(caps_for((8, 0)), ["fp8", "fp16"])
    assert plan["fp16"]["mma.sync"] is None and plan["fp16"]["wgmma"].startswith("wgmma is a Hopper")
    results = {path: compute.PathResult("fp8", path, "unsupported", reason=reason, unit="TFLOP/s")
               for path, reason in plan["fp8"].items()}
    r = compute.summarize_precision("fp8", results)
    assert r.status == "unsupported"
    assert r.best is None and r.tflops_median is None  # never 0
    assert "8.9" in r.reason and "Hopper" in r.reason
    d = r.to_dict()
    assert d["status"] == "unsupported" and "tflops_median" not in d
    assert set(d["paths"]) == {"mma.sync", "wgmma"}


def test_paths_filter_and_validation():
    plan = compute.plan_paths(caps_for((9, 0)), ["fp16", "fp32"], paths=["wgmma"])
    assert plan["fp16"] == {"wgmma": None}
    assert "simt" in plan["fp32"] and "not among the paths asked for" in plan["fp32"]["simt"]
    assert compute.plan_paths(caps_for((9, 0)), ["bf16"], paths="mma")["bf16"] == {"mma.sync": None}
    with pytest.raises(UserError, match="unknown precision"):
        compute.plan_paths(caps_for((9, 0)), ["fp4"])
    with pytest.raises(UserError, match="unknown path"):
        compute.plan_paths(caps_for((9, 0)), ["fp16"], paths=["tcgen05"])


def test_best_path_is_the_highest_median():
    a = compute.PathResult("bf16", "mma.sync", "ok", tflops_median=600.0, unit="TFLOP/s")
    b = compute.PathResult("bf16", "wgmma", "ok", tflops_median=880.0, unit="TFLOP/s")
    r = compute.summarize_precision("bf16", {"mma.sync": a, "wgmma": b})
    assert r.status == "ok" and r.path == "wgmma" and r.tflops_median == 880.0
    assert r.to_dict()["paths"]["mma.sync"]["tflops_median"] == 600.0


# --- the no-GPU error ---------------------------------------------------------------------------

def _no_driver(refresh: bool = False) -> Availability:
    return Availability(Reason.NO_DRIVER, "no NVIDIA driver found on this machine (test)", {})


def test_no_gpu_raises_with_the_availability_reason(monkeypatch):
    monkeypatch.setattr(availability_mod, "availability", _no_driver)
    with pytest.raises(GpuUnavailableError) as info:
        compute.measure_compute(0, precisions=["fp32"])
    assert info.value.availability.reason is Reason.NO_DRIVER
    assert "no NVIDIA driver" in str(info.value)


def test_no_gpu_here_raises_the_real_reason():
    avail = availability_mod.availability()
    if avail.ok:
        pytest.skip("a GPU is available here")
    with pytest.raises(GpuUnavailableError) as info:
        compute.measure_compute(0)
    assert str(info.value) == avail.message


# --- the whole pipeline with a fake core ----------------------------------------------------------

class FakeTel:
    def __init__(self, clock):
        self.clock = clock

    def summary(self):
        return {"sm_clock_mhz": {"min": self.clock, "median": self.clock, "max": self.clock},
                "power_w": {"min": 600.0, "median": 650.0, "max": 690.0}, "throttle_reasons": []}


class FakeCore:
    """Stands in for _core: H200 facts, the capability rules above, and made-up timings."""

    class CoreError(RuntimeError):
        pass

    class VerificationError(CoreError):
        pass

    def __init__(self, facts, rates, kernel_clock=1800.0):
        self.facts, self.rates, self.kernel_clock, self.calls = facts, rates, kernel_clock, []

    def compute_device(self, device):
        return dict(self.facts)

    def compute_paths(self, device):
        return caps_for((self.facts["cc_major"], self.facts["cc_minor"]))

    def compute_run(self, device, precision, path, **kw):
        self.calls.append((precision, path, kw))
        tf = self.rates[(precision, path)]
        return {"precision": precision, "path": path, "unit": "TOP/s" if precision == "int8" else "TFLOP/s",
                "instruction": f"fake {path}", "grid": 132, "block": 256, "smem_bytes": 0, "regs_per_thread": 64,
                "iterations": 100, "config": {"iterations": 100}, "flop_per_launch": tf * 1e12 * 2e-3,
                "reps": kw["reps"], "times_ms": [2.0] * kw["reps"], "median_ms": 2.0, "best_ms": 1.99, "mean_ms": 2.0,
                "worst_ms": 2.01, "cv": 0.004, "tflops_median": tf, "tflops_best": tf * 1.005,
                "kernel_clock_mhz": self.kernel_clock,
                "verification": {"passed": True, "max_error": 1e-7, "tolerance": 1e-3, "checked": 10,
                                 "mismatches": 0, "iterations": 1, "detail": ""},
                "device": dict(self.facts)}


@pytest.fixture
def fake(monkeypatch):
    def install(facts, rates, clock=1755.0, kernel_clock=1600.0):
        core = FakeCore(facts, rates, kernel_clock)
        monkeypatch.setattr(availability_mod, "require_measurement", lambda device=0: None)
        native = importlib.import_module("roofline_ext.device.status")
        telemetry = importlib.import_module("roofline_ext.device.telemetry")

        monkeypatch.setattr(native, "core", lambda: core)

        @contextlib.contextmanager
        def sampling(device=0, interval_ms=25.0):
            yield FakeTel(clock)

        monkeypatch.setattr(telemetry, "sampling", sampling)
        return core
    return install


def test_measure_compute_reports_paths_fractions_and_unsupported(fake):
    rates = {("fp32", "simt"): 58.0, ("fp16", "mma.sync"): 610.0, ("fp16", "wgmma"): 850.0}
    core = fake(H200, rates)
    res = compute.measure_compute(0, precisions=["fp32", "fp16"], reps=5, warmup=1, cooldown_s=0)
    fp16 = res["fp16"]
    assert fp16.status == "ok" and fp16.path == "wgmma" and fp16.tflops_median == 850.0
    assert fp16.paths["mma.sync"].tflops_median == 610.0  # mma.sync kept beside the roof
    assert fp16.fraction_of_datasheet == pytest.approx(850.0 / 989.4, rel=1e-3)
    peak = 4096 * 132 * 1755e6 / 1e12
    assert fp16.clock_derived_peak == pytest.approx(peak)
    assert fp16.fraction_of_clock_derived == pytest.approx(850.0 / peak)
    assert fp16.fraction_of_clock_derived_at_kernel_clock == pytest.approx(850.0 / (4096 * 132 * 1600e6 / 1e12))
    d = res.to_dict()
    assert d["precisions"]["fp16"]["path"] == "wgmma"
    assert d["precisions"]["fp32"]["instruction"] == "fake simt"
    assert res.peaks() == {"fp32": 58.0, "fp16": 850.0}
    assert {(p, path) for p, path, _ in core.calls} == set(rates)
    assert core.calls[-1][2]["warpgroups"] == 2  # the wgmma default configuration was passed


def test_precision_the_gpu_lacks_is_unsupported_not_zero(fake):
    fake(A100, {("fp8", "mma.sync"): 1.0})
    res = compute.measure_compute(0, precisions=["fp8"], reps=3, warmup=0, cooldown_s=0)
    r = res["fp8"]
    assert r.status == "unsupported" and r.tflops_median is None
    assert "8.9" in r.reason


def test_result_above_clock_derived_peak_raises(fake):
    # 1200 TFLOP/s FP16 on 132 SMs needs more than 2.2 GHz: a bug, not a result
    fake(H200, {("fp16", "wgmma"): 1200.0, ("fp16", "mma.sync"): 600.0}, clock=1980.0, kernel_clock=1980.0)
    with pytest.raises(compute.ComputeBoundError, match="above the clock-derived peak"):
        compute.measure_compute(0, precisions=["fp16"], reps=3, warmup=0, cooldown_s=0)


def test_bad_arguments(fake):
    fake(H200, {})
    with pytest.raises(UserError):
        compute.measure_compute(0, precisions=["fp16"], reps=0)
    with pytest.raises(UserError, match="knob"):
        compute.measure_compute(0, precisions=["fp16"], paths=["wgmma"], configs={"wgmma": [{"tile": 3}]})


# --- on a GPU -------------------------------------------------------------------------------------

def _gpu_core():
    from roofline_ext.device.status import core

    return core()


@pytest.mark.gpu
def test_every_kernel_verifies_and_a_corrupted_operand_fails():
    core = _gpu_core()
    caps = core.compute_paths(0)
    checked = 0
    for prec, paths in caps.items():
        for path, cap in paths.items():
            if not cap["supported"]:
                assert cap["reason"], (prec, path)
                continue
            good = core.compute_verify(0, prec, path)
            assert good["passed"], (prec, path, good["detail"])
            assert good["checked"] > 0 and good["max_error"] <= good["tolerance"]
            bad = core.compute_verify(0, prec, path, corrupt=True)
            assert not bad["passed"] and bad["mismatches"] > 0, (prec, path, bad["detail"])
            checked += 1
    assert checked >= 3  # at least fp32, fp64 and one tensor format on any supported GPU
    if caps["fp16"]["wgmma"]["supported"]:
        # every wgmma layout, and the descriptor knob that must break it
        for cfg in ({"a_from_registers": 0, "swizzle": 0, "warpgroups": 3},
                    {"a_from_registers": 0, "swizzle": 128, "warpgroups": 1},
                    {"a_from_registers": 1, "swizzle": 0, "warpgroups": 2}):
            assert core.compute_verify(0, "fp16", "wgmma", **cfg)["passed"], cfg
        swapped = core.compute_verify(0, "fp16", "wgmma", a_from_registers=0, swizzle=0,
                                      swap_descriptor_strides=True)
        assert not swapped["passed"]


@pytest.mark.gpu
def test_figures_within_clock_derived_bounds():
    res = compute.measure_compute(0, reps=10, warmup=2)
    measured = 0
    for prec, r in res.precisions.items():
        for path, p in r.paths.items():
            if not p.ok:
                assert p.reason
                continue
            measured += 1
            assert p.verification["passed"]
            assert p.cv is not None and p.cv < 0.05, (prec, path, p.cv)
            if p.fraction_of_clock_derived is not None:
                # at the median NVML clock; the bound itself (max clock) is enforced in measure_compute
                assert p.fraction_of_clock_derived <= 1.0 + 1e-6 or p.sm_clock_mhz < p.kernel_clock_mhz
        if r.status == "ok" and r.fraction_of_clock_derived is not None:
            assert r.fraction_of_clock_derived >= 0.5, (prec, r.path, r.fraction_of_clock_derived)
    assert measured >= 3


def _cublas_tflops(torch, precision: str, n: int = 8192, reps: int = 5) -> float:
    dtype = {"tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[precision]
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        for _ in range(2):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.matmul(a, b)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        return 2 * n**3 / (times[len(times) // 2] * 1e-3) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


@pytest.mark.gpu
def test_best_path_beats_cublas_of_the_same_precision():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    precisions = ["fp32", "tf32", "fp16", "bf16"]
    res = compute.measure_compute(0, precisions=precisions, reps=10, warmup=2)
    compared = []
    for prec in precisions:
        r = res[prec]
        if r.status != "ok":
            continue
        peer = _cublas_tflops(torch, prec)
        assert r.tflops_median >= peer, f"{prec}: ours {r.tflops_median:.1f} < cuBLAS {peer:.1f} ({r.path})"
        compared.append(prec)
    # FP32 runs on every GPU: a comparison that compared nothing must not pass.
    assert "fp32" in compared, f"compared with cuBLAS: {compared or 'nothing'}"


def test_a_results_config_can_be_passed_back(fake):
    # calibration's sustained phase re-runs the burst winner with its reported config
    core = fake(H200, {("bf16", "wgmma"): 900.0})
    reported = {"warpgroups": 2, "ctas_per_sm": 1, "mma_m": 64, "mma_n": 256, "mma_k": 16, "mmas_per_commit": 8,
                "groups_in_flight": 2, "k_slices": 4, "iterations": 1234, "swizzle": 128, "a_from_registers": 1}
    r = compute.measure_path(0, "bf16", "wgmma", reported, reps=3, warmup=0, iterations=1234, _core=core,
                             _device=H200)
    assert r.tflops_median == 900.0
    kw = core.calls[-1][2]
    assert kw["warpgroups"] == 2 and kw["swizzle"] == 128 and kw["a_from_registers"] == 1
    assert kw["iterations"] == 1234 and "mma_n" not in kw
