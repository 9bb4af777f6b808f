"""Per-op counts, per-op floors, the unfused bound (issue 16), CPU only.

Hand-derived small tasks check the numbers; every KernelBench L1-L3 task (when checked out at
../shared/kernelbench) checks the invariants: the per-op FLOPs add up to the task's exactly, the
per-op bytes to the unfused traffic (summed apart, per op name, while counting), and the unfused
bound is never below the fused floor."""
from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import pytest

from roofline_ext.model.floors import floor, roofline_result
from roofline_ext.model.ops import attach_kernels, attach_ops, memory_ms
from roofline_ext.model.results import KernelTime, OpResult
from roofline_ext.peaks.datasheet import lookup
from roofline_ext.report.ops_table import ops_report
from roofline_ext.runner.analyze import analyze_task
from roofline_ext.tasks.counting import count_task
from roofline_ext.tasks.loading import TaskError, find_task_files
from roofline_ext.tasks.opcounts import UNWRITTEN_OUTPUT

KERNELBENCH = (Path(__file__).resolve().parents[1] / ".." / "shared" / "kernelbench").resolve()
LEVELS = [KERNELBENCH / f"level{n}" for n in (1, 2, 3)]
H200 = lookup("H200")



def _with_profile(path, result, prof, *, l2_tbps):
    """``result`` (an ``analyze_task`` dict with ops, timed at its ``t_ref_ms``) assessed again
    with the reference's kernel profile ``prof`` (:func:`roofline_ext.model.profiled.place_profile`)."""
    from roofline_ext.runner.analyze import assess_task

    return assess_task(path, "H200", per_op=True, t_ref_ms=result["t_ref_ms"], measured=None,
                       profile=prof, l2_tbps=l2_tbps).to_dict()


def _task(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / f"{name}.py"
    p.write_text("import torch\nimport torch.nn as nn\n" + textwrap.dedent(body))
    return p


#: The H200's full calibration of 2026-12-01 (with its read:write envelope): the measured roof of
#: the invariant test, so that per-op floors read the envelope at each op's own ratio there too.
H200_CALIBRATION = Path(__file__).resolve().parents[1] / "benchmarks/results/calibration-full-h200-2026-12-01.json"


def _h200_measured():
    from roofline_ext.peaks.cache import measured_peaks_of

    return measured_peaks_of(json.loads(H200_CALIBRATION.read_text()), "burst")


def _typed(counts, measured=None):
    r = roofline_result(counts.flops, counts.bytes, counts.compute_dtype or "float32", "H200", None,
                        simt_flops=counts.simt_flops, measured=measured,
                        read_bytes=counts.input_bytes + counts.param_bytes, write_bytes=counts.output_bytes)
    return attach_ops(r, counts.ops)


def _check_invariants(counts, label: str) -> None:
    assert counts.ops is not None, label
    assert sum(o.flops for o in counts.ops) == counts.flops, label
    assert sum(o.simt_flops for o in counts.ops) == counts.simt_flops, label
    assert sum(o.read_bytes for o in counts.ops) == counts.unfused_read_bytes, label
    assert sum(o.write_bytes for o in counts.ops) == counts.unfused_write_bytes, label
    assert all(o.flops >= 0 and o.simt_flops >= 0 and o.read_bytes >= 0 and o.write_bytes >= 0
               for o in counts.ops), label
    assert [o.index for o in counts.ops] == list(range(len(counts.ops))), label


# --- hand-derived ---------------------------------------------------------------------------------

LINEAR_RELU = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(256, 512)
        def forward(self, x):
            return torch.relu(self.fc(x))
    def get_inputs():
        return [torch.randn(64, 256)]
    def get_init_inputs():
        return []
"""


def test_linear_relu_by_hand(tmp_path):
    c = count_task(_task(tmp_path, "lin", LINEAR_RELU), ops=True)
    ops = [o for o in c.ops if o.flops or o.simt_flops]
    assert [(o.op, o.module) for o in ops] == [("addmm", "fc"), ("relu", "")]
    addmm, relu = ops
    assert addmm.flops == 2 * 64 * 256 * 512
    assert addmm.read_bytes == 4 * (64 * 256 + 512 * 256 + 512) and addmm.write_bytes == 4 * 64 * 512
    assert relu.simt_flops == 64 * 512 and relu.read_bytes == relu.write_bytes == 4 * 64 * 512
    _check_invariants(c, "lin")
    r = _typed(c)
    ds = r.roofs["datasheet"]
    by_hand = sum(floor(o.flops, o.read_bytes + o.write_bytes, o.simt_flops, ds.compute_tflops, ds.simt_tflops,
                        ds.bandwidth_tbps)["t_min_ms"] for o in c.ops)
    assert r.unfused["datasheet"].unfused_bound_ms == pytest.approx(by_hand, rel=1e-12)
    # relu's floor: 2 x 128 KiB on 4.8 TB/s
    relu_r = next(o for o in r.ops if o.op == "relu")
    assert relu_r.floors["datasheet"] == pytest.approx(2 * 4 * 64 * 512 / (H200.bandwidth_tbps * 1e12) * 1e3)
    assert r.unfused["datasheet"].fusion_headroom > 1
    d = r.to_dict()
    assert d["unfused"]["roofs"]["datasheet"]["unfused_is_a_floor"] is False
    assert "NOT a floor" in d["unfused"]["note"]
    assert [o["op"] for o in d["ops"]] == [o.op for o in c.ops]


def test_per_op_counting_leaves_the_totals_alone(tmp_path):
    p = _task(tmp_path, "lin", LINEAR_RELU)
    a, b = count_task(p), count_task(p, ops=True)
    assert (a.flops, a.simt_flops, a.bytes, a.by_op) == (b.flops, b.simt_flops, b.bytes, b.by_op)
    assert a.ops is None and a.unfused_bytes is None


def test_output_no_op_wrote_gets_a_row(tmp_path):
    p = _task(tmp_path, "ident", """
        class Model(nn.Module):
            def forward(self, x):
                return x.view(-1)
        def get_inputs():
            return [torch.randn(32, 32)]
        def get_init_inputs():
            return []
    """)
    c = count_task(p, ops=True)
    row = next(o for o in c.ops if o.op == UNWRITTEN_OUTPUT)
    assert row.write_bytes == 4 * 32 * 32
    _check_invariants(c, "ident")
    assert c.unfused_bytes >= c.bytes


def test_masked_attention_take_back_lands_on_its_op(tmp_path):
    p = _task(tmp_path, "causal", """
        import math
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("bias", torch.tril(torch.ones(64, 64)).view(1, 1, 64, 64))
            def forward(self, q, k, v):
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
                att = att.masked_fill(self.bias[:, :, :64, :64] == 0, float('-inf'))
                att = torch.softmax(att, dim=-1)
                return att @ v
        def get_inputs():
            return [torch.randn(2, 4, 64, 32) for _ in range(3)]
        def get_init_inputs():
            return []
    """)
    c = count_task(p, ops=True)
    _check_invariants(c, "causal")
    assert any("lower-triangular" in n for n in c.notes)  # the mask was followed
    full = 2 * 2 * 4 * 64 * 64 * 32
    bmms = [o for o in c.ops if o.flops]
    assert len(bmms) == 2 and all(o.flops < full for o in bmms)


def test_rnn_rows_are_extrapolated_exactly(tmp_path):
    p = _task(tmp_path, "lstm", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
            def forward(self, x):
                return self.lstm(x)[0]
        def get_inputs():
            return [torch.randn(4, 40, 16)]
        def get_init_inputs():
            return []
    """)
    c = count_task(p, ops=True)
    _check_invariants(c, "lstm")
    rows = [o for o in c.ops if o.note]  # the initial state (zeros) is made outside the steps
    # One call of the layer's family, as the GPU's fused cuDNN kernels are one call: its work is
    # every step's, its traffic the call's own (the input and the weights read, the output written)
    assert [(o.op, o.module, o.calls) for o in rows] == [("lstm", "lstm", 1)]
    assert "extrapolated to 40 steps" in rows[0].note
    lstm = rows[0]
    assert lstm.flops == c.flops and lstm.simt_flops == c.simt_flops
    x_bytes, out_bytes = 4 * 4 * 40 * 16, 4 * 4 * 40 * 32
    assert lstm.read_bytes >= x_bytes + c.param_bytes and lstm.write_bytes >= out_bytes
    assert lstm.read_bytes + lstm.write_bytes <= c.bytes + 4 * (2 * 2 * 4 * 32) * 2  # + the (h, c) states


def test_the_rnn_family_matches_cudnns_fused_kernels(tmp_path):
    # The GPU's profiled run names the layer's call by its family (its kernels are cuDNN's fused
    # ones); an aten _cudnn_rnn met outside a family call matches by its mode argument.
    from roofline_ext.tasks.opcounts import match_key, op_family

    p = _task(tmp_path, "gru", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(16, 32, num_layers=2)
            def forward(self, x):
                return self.gru(x)[0]
        def get_inputs():
            return [torch.randn(40, 4, 16)]
        def get_init_inputs():
            return []
    """)
    result = analyze_task(p, "H200", per_op=True, t_ref_ms=1.0, measured=None)
    gru = [o for o in result["ops"] if o["module"] == "gru" and o["op"] == "gru"]
    assert len(gru) == 1 and gru[0]["flops"] > 0
    prof = {"ops": [{"index": 0, "op": "gru", "module": "gru", "kernels": [["cudnn_rnn_fwd", 0.9]]}],
            "kernel_sum_ms": 0.9, "outside_ms": 0.0, "kernels": 1, "l2_bytes": 50 << 20}
    result = _with_profile(p, result, prof, l2_tbps=10.0)
    s = result["kernel_profile"]
    assert s["unmatched_kernel_ms"] == 0.0 and s["unmatched_profiled_count"] == 0
    assert op_family("_cudnn_rnn", (None,) * 6 + (3,)) == "gru" and op_family("_cudnn_rnn") == "rnn"
    assert match_key("_cudnn_rnn") == match_key("gru") == match_key("lstm") == "rnn"
    # the profiled run (real tensors: every step runs) numbers the layer's call as the count does
    counted = [(o["op"], o["module"]) for o in result["ops"]]
    assert [(r["op"], r["module"]) for r in _profiled_numbering(p)] == counted


def test_analyze_task_json_and_table(tmp_path):
    r = analyze_task(_task(tmp_path, "lin", LINEAR_RELU), "H200", per_op=True, measured=None)
    assert r["ops"] and r["unfused"]["bytes"] == r["unfused"]["read_bytes"] + r["unfused"]["write_bytes"]
    json.dumps({k: v for k, v in r.items() if not k.startswith("_")})  # JSON-ready
    assert r["_result"].ops and r["_result"].unfused["datasheet"].unfused_bound_ms >= r["t_min_ms"]
    text = ops_report(r)
    assert "NOT a floor" in text and "addmm" in text and "fc" in text


def test_memory_rule():
    l2 = 50 << 20
    t, level = memory_ms(10 << 20, 4.0, 10.0, l2)
    assert level == "l2" and t == pytest.approx((10 << 20) / 10e12 * 1e3)
    t, level = memory_ms(150 << 20, 4.0, 10.0, l2)
    assert level == "hbm" and t == pytest.approx((100 << 20) / 4e12 * 1e3 + l2 / 10e12 * 1e3)
    assert memory_ms(10 << 20, 4.0, None, l2) == (0.0, "l2")  # no L2 figure: no memory term
    assert memory_ms(10 << 20, 4.0, None, None)[1] == "hbm"


def test_kernels_attach_and_lose_time(tmp_path):
    c = count_task(_task(tmp_path, "lin", LINEAR_RELU), ops=True)
    r = _typed(c)
    relu = next(o for o in r.ops if o.op == "relu")
    timed = attach_kernels(r, {relu.index: [KernelTime("relu_kernel", 0.01, relu.index)]},
                           l2_bytes=50 << 20, l2_tbps=10.0)
    got: OpResult = next(o for o in timed.ops if o.op == "relu")
    assert got.kernel_ms == 0.01 and got.memory_level == "l2"
    assert got.kernel_floors["datasheet"] == pytest.approx(relu.bytes / 10e12 * 1e3)
    assert got.kernels[0].lost_ms == pytest.approx(0.01 - got.kernel_floors["datasheet"])


# --- every KernelBench task -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def kb_counts():
    if not all(d.is_dir() for d in LEVELS):
        pytest.skip(f"KernelBench is not at {KERNELBENCH} (level1-3)")
    out = {}
    for level in LEVELS:
        for p in find_task_files(level):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    out[f"{level.name}/{p.stem}"] = count_task(p, ops=True)
                except TaskError as exc:
                    out[f"{level.name}/{p.stem}"] = exc
    return out


@pytest.mark.slow
def test_kernelbench_invariants(kb_counts):
    counted = {k: c for k, c in kb_counts.items() if not isinstance(c, TaskError)}
    assert len(counted) >= 245
    measured = _h200_measured()
    assert measured is not None and measured.mix, "the recorded calibration has a read:write envelope"
    below = {}
    for name, c in counted.items():
        _check_invariants(c, name)
        assert c.unfused_bytes >= c.bytes, name
        if not c.bytes:
            continue
        r = _typed(c, measured)
        assert "measured" in r.unfused, name
        for roof, b in r.unfused.items():
            if b.unfused_bound_ms < b.fused_floor_ms * (1 - 1e-9):
                below[name] = (roof, b.unfused_bound_ms, b.fused_floor_ms)
    assert below == {}


# The issue-14 rules on the tasks that motivated them, read off the same counts (they were
# tests/test_counting_kernelbench.py, which counted all 250 tasks a second time: 20-40 s of the
# suite; a per-op count gives the same task totals and notes, checked when they were merged).

@pytest.mark.slow
def test_all_250_tasks_count(kb_counts):
    import importlib.util

    assert len(kb_counts) == 250
    failed = {k: str(v) for k, v in kb_counts.items() if isinstance(v, TaskError)}
    if importlib.util.find_spec("einops") is None:  # L3 48/49 import it: they say how to install it
        assert all("pip install einops" in v for v in failed.values()), failed
        failed = {}
    assert failed == {}


@pytest.mark.slow
def test_convolutions_count_no_padding_taps(kb_counts):
    alexnet = kb_counts["level3/5_AlexNet"]
    assert 0.90 < alexnet.flops / alexnet.flops_flopcounter < 0.93  # about 8% of its taps hit padding


@pytest.mark.slow
@pytest.mark.parametrize("name", ["43_MinGPTCausalAttention", "44_MiniGPTBlock", "50_ReLUSelfAttention"])
def test_hand_written_causal_attention_is_recognised(kb_counts, name):
    c = kb_counts[f"level3/{name}"]
    assert c.flops < c.flops_flopcounter
    assert any("lower-triangular mask" in n for n in c.notes)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["29_SwinMLP", "30_SwinTransformerV2"])
def test_constructors_reading_values_are_built_for_real(kb_counts, name):
    c = kb_counts[f"level3/{name}"]
    assert not isinstance(c, TaskError) and c.flops > 0
    assert any("built for real" in n for n in c.notes)


# --- the kernel profile's mapping, with fake profiler events --------------------------------------

class _Ev:
    def __init__(self, name, parent=None, kernels=(), id=0):
        from torch.autograd.profiler_util import Kernel

        self.name, self.cpu_parent, self.id = name, parent, id
        self.kernels = [Kernel(n, 0, us) for n, us in kernels]


def test_kernels_by_op_walks_up_to_the_op_range():
    from roofline_ext.measure.kernel_profile import kernels_by_op

    fwd = _Ev("roofline_ext.forward")
    op0 = _Ev("roofline_ext.op#0", fwd)
    op1 = _Ev("roofline_ext.op#1", fwd)
    events = [
        fwd, op0, op1,
        _Ev("cudaLaunchKernel", _Ev("aten::addmm", op0), [("gemm", 10.0)]),
        _Ev("cudaLaunchKernel", _Ev("aten::relu", op1), [("relu_k", 2.0), ("relu_k2", 1.0)]),
        _Ev("cudaLaunchKernel", fwd, [("stray", 0.5)]),
        _Ev("cudaLaunchKernel", None, [("flush", 99.0)]),  # outside the forward: not counted
    ]
    by_op, outside, n = kernels_by_op(events)
    assert by_op == {0: [("gemm", 10.0)], 1: [("relu_k", 2.0), ("relu_k2", 1.0)]}
    assert outside == 0.5 and n == 4


def test_a_kernel_launched_through_the_driver_api_counts_once():
    # cuBLAS/cuDNN launch with cuLaunchKernel: torch then hangs the kernel on the runtime event and
    # on the driver event, which share the correlation id (H200, 2026-12-01: GEMMs counted twice).
    from roofline_ext.measure.kernel_profile import kernels_by_op

    fwd = _Ev("roofline_ext.forward")
    op0 = _Ev("roofline_ext.op#0", fwd)
    addmm = _Ev("aten::addmm", op0)
    events = [fwd, op0, addmm,
              _Ev("cudaLaunchKernel", addmm, [("gemm", 10.0)], id=7),
              _Ev("cuLaunchKernelEx", addmm, [("gemm", 10.0)], id=7),
              _Ev("cudaLaunchKernel", addmm, [("gemm", 10.0)], id=8)]  # a second launch: counts
    by_op, outside, n = kernels_by_op(events)
    assert by_op == {0: [("gemm", 10.0), ("gemm", 10.0)]} and n == 2


def test_numbering_matches_the_counted_rows(tmp_path):
    # The profiled run numbers ops as the counting pass does: on real CPU tensors, the same names.
    from roofline_ext.model.profiled import align

    p = _task(tmp_path, "lin", LINEAR_RELU)
    c = count_task(p, ops=True)
    assert [(r["op"], r["module"]) for r in _profiled_numbering(p)] == [(o.op, o.module) for o in c.ops]
    assert align([(o.op, o.module) for o in c.ops], [("relu_", "")]) == {0: 1}


def _profiled_numbering(path, backend=None):
    """The profiled run's numbering (both modes of tasks/opranges.py) on real CPU tensors."""
    import contextlib

    import torch

    from roofline_ext.tasks.opranges import _make_family_mode, _make_mode
    from roofline_ext.tasks.loading import load_task
    from roofline_ext.tasks.opcounts import ModuleTracker

    task = load_task(path)
    model = task.build(task.init_inputs()).eval()
    inputs = task.inputs()
    record: list = []
    tracker = ModuleTracker(model)
    mode = _make_mode(record, tracker)
    chosen = contextlib.nullcontext()
    if backend is not None:
        from torch.nn.attention import sdpa_kernel

        chosen = sdpa_kernel(backend)
    with torch.no_grad(), chosen, tracker, _make_family_mode(record, tracker, mode), mode:
        model(*inputs)
    task.unload()
    return record


# --- op families: one op per call, named as written -----------------------------------------------

FAMILIES = """
    import torch.nn.functional as F
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.inorm = nn.InstanceNorm2d(8)
            self.drop = nn.Dropout(0.1)
            self.ln = nn.LayerNorm(16)
        def forward(self, x, q):
            y = self.ln(self.drop(self.inorm(self.bn(self.conv(x)))))
            return y, F.scaled_dot_product_attention(q, q, q)
    def get_inputs():
        return [torch.randn(2, 3, 16, 16), torch.randn(2, 4, 32, 16)]
    def get_init_inputs():
        return []
"""


def test_family_calls_are_one_op_named_as_written(tmp_path):
    c = count_task(_task(tmp_path, "fam", FAMILIES), ops=True)
    _check_invariants(c, "fam")
    assert c.mode == "eval"
    # eval mode: dropout is the identity (no op, no row), batch norm updates nothing
    assert [(o.op, o.module) for o in c.ops] == [
        ("conv2d", "conv"), ("batch_norm", "bn"), ("instance_norm", "inorm"), ("layer_norm", "ln"),
        ("scaled_dot_product_attention", "")]
    assert "scaled_dot_product_attention" in c.by_op and not any(k.startswith("_") for k in c.by_op)
    sdpa = c.ops[-1]
    # the call's own traffic: q read once (passed three times), the output written; the CPU
    # kernel's logsumexp is a side output no caller sees, not traffic of the call
    assert sdpa.read_bytes == sdpa.write_bytes == 4 * 2 * 4 * 32 * 16
    assert sdpa.flops == 2 * 2 * 4 * 32 * 32 * (16 + 16) and sdpa.simt_flops == 2 * 4 * 32 * 32
    bn = c.ops[1]
    assert bn.simt_flops == 2 * 8 * 16 * 16
    assert bn.read_bytes == 4 * (2 * 8 * 16 * 16 + 4 * 8) and bn.write_bytes == 4 * 2 * 8 * 16 * 16


@pytest.mark.parametrize("backend", ["MATH", "FLASH_ATTENTION"])
def test_profiled_families_number_as_counted_whatever_the_backend(tmp_path, backend):
    # The math backend dispatches mul, bmm, _safe_softmax, bmm; the flash one a single op: either is
    # the one counted op, so the profiled and counted sequences are the same.
    from torch.nn.attention import SDPBackend

    p = _task(tmp_path, "fam", FAMILIES)
    c = count_task(p, ops=True)
    record = _profiled_numbering(p, getattr(SDPBackend, backend))
    assert [(r["op"], r["module"]) for r in record] == [(o.op, o.module) for o in c.ops]


def test_gpu_forms_of_an_op_match_the_counted_family(tmp_path):
    # What a GPU (or torch.compile) dispatches outside a family call matches by family: the
    # attention op gets its kernels, nothing is left unmatched.

    p = _task(tmp_path, "fam", FAMILIES)
    result = analyze_task(p, "H200", per_op=True, t_ref_ms=1.0, measured=None)
    gpu = [("cudnn_convolution", "conv", 0.1), ("cudnn_batch_norm", "bn", 0.05),
           ("_native_batch_norm_legit", "inorm", 0.05), ("native_layer_norm", "ln", 0.05),
           ("_scaled_dot_product_efficient_attention", "", 0.5)]
    prof = {"ops": [{"index": i, "op": op, "module": m, "kernels": [[f"k{i}", ms]]}
                    for i, (op, m, ms) in enumerate(gpu)],
            "kernel_sum_ms": 0.75, "outside_ms": 0.0, "kernels": 5, "l2_bytes": 50 << 20}
    result = _with_profile(p, result, prof, l2_tbps=10.0)
    s = result["kernel_profile"]
    assert s["unmatched_kernel_ms"] == 0.0 and s["matched_ops"] == 5
    assert s["unmatched_profiled_count"] == 0 and s["unmatched_counted_count"] == 0
    sdpa = next(o for o in result["ops"] if o["op"] == "scaled_dot_product_attention")
    assert sdpa["kernel_ms"] == pytest.approx(0.5) and sdpa["floors_ms"]["datasheet"] > 0


def test_op_family_names():
    import torch

    from roofline_ext.tasks.opcounts import match_key, op_family

    w2, w1 = torch.empty(8, 3, 3, 3), torch.empty(8, 3, 3)
    x = torch.empty(1)
    assert op_family("convolution", (x, w2, None, [1], [0], [1], False, [0], 1)) == "conv2d"
    assert op_family("convolution", (x, w1, None, [1], [0], [1], True, [0], 1)) == "conv_transpose1d"
    assert op_family("cudnn_convolution_transpose", (x, w2)) == "conv_transpose2d"
    for name in ("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_cudnn_attention",
                 "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention"):
        assert op_family(name) == "scaled_dot_product_attention"
    for name in ("cudnn_batch_norm", "_native_batch_norm_legit_no_training", "native_batch_norm"):
        assert op_family(name) == "batch_norm"
    assert op_family("native_dropout") == "dropout" and op_family("addmm") == "addmm"
    assert match_key("relu_") == match_key("relu") == "relu"


# --- eval mode, and TRAINING = True ---------------------------------------------------------------

BN_DROPOUT = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm2d(8)
            self.drop = nn.Dropout(0.5)
        def forward(self, x):
            return self.drop(self.bn(x))
    def get_inputs():
        return [torch.randn(4, 8, 16, 16)]
    def get_init_inputs():
        return []
"""


def test_counted_in_eval_mode_unless_the_task_says_training(tmp_path):
    n, c = 4 * 8 * 16 * 16, 8
    ev = count_task(_task(tmp_path, "bn_eval", BN_DROPOUT), ops=True)
    # eval: batch norm normalises with its running statistics (one SIMT FLOP per output), reads
    # x, weight, bias, running mean and variance; dropout is the identity; nothing else runs
    assert ev.mode == "eval" and [o.op for o in ev.ops] == ["batch_norm"]
    assert (ev.flops, ev.simt_flops) == (0, n)
    assert ev.bytes == 4 * n + 4 * 4 * c + 4 * n
    tr = count_task(_task(tmp_path, "bn_train", BN_DROPOUT + "    TRAINING = True\n"), ops=True)
    # training: + num_batches_tracked += 1 (reads its 8 bytes, 1 FLOP), dropout's masks: the CPU
    # path draws them (no arithmetic), divides by keep-probability and multiplies (2 per element)
    assert tr.mode == "train" and [o.op for o in tr.ops] == ["add_", "batch_norm", "dropout"]
    assert (tr.flops, tr.simt_flops) == (0, n + 1 + 2 * n)
    assert tr.bytes == ev.bytes + 8
    assert any("training mode" in note for note in tr.notes)
    # dropout's own traffic: its input read, its output written; the mask is its temporary
    drop = tr.ops[-1]
    assert drop.read_bytes == drop.write_bytes == 4 * n
    for counts, label in ((ev, "eval"), (tr, "train")):
        _check_invariants(counts, label)


def test_attach_profile_reports_sums_and_breaches(tmp_path):

    p = _task(tmp_path, "lin", LINEAR_RELU)
    result = analyze_task(p, "H200", per_op=True, t_ref_ms=0.02, measured=None)
    prof = {"ops": [{"index": i, "op": o["op"], "module": o["module"], "kernels": []} for i, o in
                    enumerate(result["ops"])], "kernel_sum_ms": 0.019, "outside_ms": 0.0, "kernels": 2,
            "l2_bytes": 50 << 20}
    addmm = next(o for o in prof["ops"] if o["op"] == "addmm")
    relu = next(o for o in prof["ops"] if o["op"] == "relu")
    addmm["kernels"] = [["gemm", 0.018]]
    relu["kernels"] = [["relu", 1e-9]]  # impossibly fast: a breach on every roof
    result = _with_profile(p, result, prof, l2_tbps=10.0)
    s = result["kernel_profile"]
    assert s["kernel_sum_over_event"] == pytest.approx(0.95)
    assert s["gpu_wait_ms"] == pytest.approx(0.001) and not any("waited" in n for n in s["notes"])
    assert s["matched_ops"] == len(prof["ops"])
    assert [b["op"] for b in s["breaches"]["all_roofs"]] == ["relu"]
    text = ops_report({k: v for k, v in result.items() if not k.startswith("_")})
    assert "gemm" in text and "lose the most" in text


class _Dev:
    """A device-side profiler event: its name, its time range and the launch it links to."""

    def __init__(self, name, linked, start, end):
        from torch.autograd import DeviceType

        self.name, self.linked_correlation_id, self.device_type = name, linked, DeviceType.CUDA
        self.time_range = type("R", (), {"start": start, "end": end})()


def test_device_side_events_count_each_kernel_once():
    # With device events present (what a real CUDA profile lists), each GPU activity counts once,
    # whatever CPU events also carry it, and its op is found from the CPU event that launched it.
    from torch.autograd import DeviceType

    from roofline_ext.measure.kernel_profile import kernels_by_op

    def cpu(name, parent=None, kernels=(), id=0):
        e = _Ev(name, parent, kernels, id)
        e.device_type = DeviceType.CPU
        return e

    fwd = cpu("roofline_ext.forward")
    op0 = cpu("roofline_ext.op#0", fwd)
    op1 = cpu("roofline_ext.op#1", fwd)
    conv = cpu("aten::cudnn_convolution", op0)
    events = [fwd, op0, op1, conv,
              cpu("cudaLaunchKernel", conv, [("xmma", 9.0)], id=11), cpu("cuLaunchKernelEx", conv, [("xmma", 9.0)], id=11),
              cpu("cudaLaunchKernel", op1, [("relu", 2.0)], id=12),
              cpu("cudaMemsetAsync", None, [("flush", 50.0)], id=13),
              _Dev("xmma", 11, 100.0, 109.0), _Dev("relu", 12, 110.0, 112.0), _Dev("flush", 13, 0.0, 50.0)]
    by_op, outside, n = kernels_by_op(events)
    assert by_op == {0: [("xmma", 9.0)], 1: [("relu", 2.0)]} and outside == 0.0 and n == 2


MUL_THEN_SUM = """
    class Model(nn.Module):
        def forward(self, a, b):
            return (a * b).sum(dim=1)
    def get_inputs():
        return [torch.randn(4096, 4096), torch.randn(4096, 4096)]
    def get_init_inputs():
        return []
"""


def test_each_op_reads_the_envelope_at_its_own_ratio(tmp_path):
    # The task reads 2 x 64 MiB and writes 16 KiB (a reduction: the read end of the envelope), but
    # its mul reads two tensors and writes one: held to the 2:1 point, not to the task's figure.
    from roofline_ext.peaks.mix import mix_bandwidth

    c = count_task(_task(tmp_path, "ms", MUL_THEN_SUM), ops=True)
    measured = _h200_measured()
    r = _typed(c, measured)
    mul = next(o for o in r.ops if o.op == "mul")
    assert (mul.read_bytes, mul.write_bytes) == (2 * 4 * 4096 * 4096, 4 * 4096 * 4096)
    at_2_to_1 = mix_bandwidth(measured.mix, 2, 1)
    assert measured.mix["2:1"] == at_2_to_1 != r.roofs["measured"].bandwidth_tbps
    assert mul.floors["measured"] == pytest.approx((mul.read_bytes + mul.write_bytes) / (at_2_to_1 * 1e12) * 1e3)
    # The datasheet roof has one figure for every ratio.
    ds = r.roofs["datasheet"]
    assert mul.floors["datasheet"] == pytest.approx((mul.read_bytes + mul.write_bytes) / (ds.bandwidth_tbps * 1e12) * 1e3)


@pytest.mark.parametrize("kernel_sum, said", [(0.005, "waited 0.015 ms per call on the host"),
                                              (0.03, "ran slower than the timed ones")])
def test_kernels_that_do_not_add_up_to_the_event_time_say_why(tmp_path, kernel_sum, said):

    p = _task(tmp_path, "lin", LINEAR_RELU)
    result = analyze_task(p, "H200", per_op=True, t_ref_ms=0.02, measured=None)
    prof = {"ops": [], "kernel_sum_ms": kernel_sum, "outside_ms": 0.0, "kernels": 2, "l2_bytes": 0}
    result = _with_profile(p, result, prof, l2_tbps=10.0)
    s = result["kernel_profile"]
    assert s["gpu_wait_ms"] == pytest.approx(max(0.0, 0.02 - kernel_sum))
    assert any(said in n for n in s["notes"]), s["notes"]


def test_a_launch_bound_call_is_held_to_its_gpu_time_with_the_host_queued_ahead(tmp_path):
    """Issue 26: where the GPU waits on the host, the kernels are compared with the call's GPU time
    measured with the host queued ahead of it, and the note gives both."""

    p = _task(tmp_path, "lin", LINEAR_RELU)
    result = analyze_task(p, "H200", per_op=True, t_ref_ms=0.02, measured=None)
    prof = {"ops": [], "kernel_sum_ms": 0.005, "outside_ms": 0.0, "kernels": 2, "l2_bytes": 0,
            "queued": {"median_ms": 0.0052, "host_issue_ms": 0.018, "reps": 5, "covered": 5}}
    result = _with_profile(p, result, prof, l2_tbps=10.0)
    s = result["kernel_profile"]
    assert s["queued_gpu_ms"] == 0.0052 and s["kernel_sum_over_queued"] == pytest.approx(0.005 / 0.0052)
    assert s["kernel_sum_over_event"] == pytest.approx(0.25) and s["queued"]["covered"] == 5
    assert any("GPU time is 0.0052 ms, of which the kernels are 96%" in n for n in s["notes"]), s["notes"]


class _FakeCuda:
    """torch.cuda as queued_gpu_ms uses it, on a fake timeline: ``_sleep`` spins the GPU, a call
    issues for ``issue_s`` of host time and runs ``gpu_ms`` on the GPU."""

    def __init__(self, now, gpu_ms):
        self.now, self.gpu_ms, self.sleeps = now, gpu_ms, []
        outer = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self):
                self.t = outer.now[0]

            def synchronize(self):
                pass

            def elapsed_time(self, other):
                return outer.gpu_ms

        self.Event = Event

    def _sleep(self, cycles):
        self.sleeps.append(cycles)

    def synchronize(self):
        pass


@pytest.mark.parametrize("issue_s, covered", [(1e-3, 5), (2.0, 0)])
def test_queued_gpu_time_counts_only_reps_the_host_issued_within_the_spin(issue_s, covered):
    from types import SimpleNamespace

    from roofline_ext.measure.kernel_profile import queued_gpu_ms

    now = [0.0]
    cuda = _FakeCuda(now, gpu_ms=0.7)
    flushes = []

    def fn():
        now[0] += issue_s

    q = queued_gpu_ms(fn, lambda: flushes.append(1), clock=lambda: now[0], torch_mod=SimpleNamespace(cuda=cuda))
    assert q["reps"] == 5 and q["covered"] == covered and len(flushes) == 6  # the sizing call, then each rep
    assert q["host_issue_ms"] == pytest.approx(issue_s * 1e3)
    # Each spin twice the last issue time (within 0.1 ms .. 0.5 s), counted at 2.5 GHz.
    assert cuda.sleeps == [int(min(max(2 * issue_s, 1e-4), 0.5) * 2.5e9)] * 5
    if covered:
        assert q["median_ms"] == 0.7 and "reason" not in q
    else:  # a 2 s issue outlasts the longest spin: no rep is known to be GPU time only
        assert q["median_ms"] is None and "never issued the call within the spin" in q["reason"]
