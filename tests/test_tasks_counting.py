"""FLOPs, SIMT FLOPs and compulsory bytes of tasks, pinned to numbers worked out by hand.

Conventions (see roofline_ext/counting.py): a multiply-add is 2 FLOPs; ``simt_flops`` is one per
output element per non-tensor-core op; bytes = inputs + parameters/buffers read once + outputs
written once, each storage once. All tensors float32 (4 bytes) unless said otherwise.
"""
from __future__ import annotations

import resource
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import roofline_ext.tasks.counting as counting
from roofline_ext.tasks.counting import count_task, parse_dtype
from roofline_ext.errors import UserError


def task(tmp_path, body, name="task.py"):
    p = tmp_path / name
    p.write_text("import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
                 + textwrap.dedent(body))
    return p


def fn_task(tmp_path, expr, inputs, args="x", name="task.py"):
    return task(tmp_path, f"""
        class Model(nn.Module):
            def forward(self, {args}):
                return {expr}

        def get_inputs():
            return {inputs}

        def get_init_inputs():
            return []
        """, name)


# --- matmuls ---------------------------------------------------------------------------------------------

def test_square_matmul(tmp_path):
    c = count_task(fn_task(tmp_path, "torch.matmul(A, B)", "[torch.randn(512, 512), torch.randn(512, 512)]", "A, B"))
    assert c.flops == 2 * 512**3 == 268_435_456
    assert c.simt_flops == 0
    assert c.input_bytes == 2 * 512 * 512 * 4 == 2_097_152
    assert c.output_bytes == 512 * 512 * 4 == 1_048_576
    assert c.param_bytes == 0
    assert c.bytes == 3_145_728
    assert c.dtype == "torch.float32" and c.dtypes == ["torch.float32"]
    assert c.arithmetic_intensity == pytest.approx(268_435_456 / 3_145_728)
    assert c.inputs == ["float32[512, 512]", "float32[512, 512]"] and c.outputs == ["float32[512, 512]"]
    assert c.by_op["mm"] == {"calls": 1, "flops": c.flops, "simt_flops": 0}


def test_batched_matmul(tmp_path):
    c = count_task(fn_task(tmp_path, "torch.bmm(A, B)", "[torch.randn(8, 64, 32), torch.randn(8, 32, 16)]", "A, B"))
    assert c.flops == 2 * 8 * 64 * 32 * 16 == 524_288
    # A 8*64*32*4 = 65536, B 8*32*16*4 = 16384, C 8*64*16*4 = 32768
    assert (c.input_bytes, c.output_bytes, c.bytes) == (81_920, 32_768, 114_688)


def test_matrix_vector_as_column(tmp_path):
    # KernelBench's matrix-vector task: (M, K) @ (K, 1), an mm
    c = count_task(fn_task(tmp_path, "torch.matmul(A, B)", "[torch.randn(256, 1024), torch.randn(1024, 1)]", "A, B"))
    assert c.flops == 2 * 256 * 1024 == 524_288
    assert c.bytes == 256 * 1024 * 4 + 1024 * 4 + 256 * 4 == 1_053_696


def test_matrix_vector_1d_counted_although_flopcounter_misses_mv(tmp_path):
    # (M, K) @ (K,) dispatches to aten.mv, for which FlopCounterMode has no formula (it would read 0)
    c = count_task(fn_task(tmp_path, "torch.matmul(A, v)", "[torch.randn(256, 1024), torch.randn(1024)]", "A, v"))
    assert c.flops == 2 * 256 * 1024
    assert c.bytes == 1_053_696
    assert "mv" in c.by_op


def test_linear_counts_weights_as_parameters(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self, i, o):
                super().__init__()
                self.fc = nn.Linear(i, o)
            def forward(self, x):
                return self.fc(x)
        def get_inputs():
            return [torch.randn(32, 64)]
        def get_init_inputs():
            return [64, 128]
        """)
    c = count_task(p)
    assert c.flops == 2 * 32 * 64 * 128 == 524_288  # addmm: the bias add is not counted by FlopCounterMode
    assert c.param_bytes == (128 * 64 + 128) * 4 == 33_280
    assert c.input_bytes == 32 * 64 * 4 and c.output_bytes == 32 * 128 * 4


# --- convolutions ----------------------------------------------------------------------------------------

def test_conv2d(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3, padding=1)
            def forward(self, x):
                return self.conv(x)
        def get_inputs():
            return [torch.randn(2, 3, 16, 16)]
        def get_init_inputs():
            return []
        """)
    c = count_task(p)
    # Only taps on real input elements: per spatial dim, taps 0 and 2 miss the padding at one edge,
    # so 15 + 16 + 15 = 46 (output, tap) pairs of the 16 * 3 = 48. 2 * N * Cout * Cin * 46^2:
    assert c.flops == 2 * 2 * 8 * 3 * 46 * 46 == 203_136
    # FlopCounterMode counts every tap: 2 * (N * Hout * Wout) * Cout * Cin * k*k = 2 * (2*16*16) * 8 * 3 * 9
    assert c.flops_flopcounter == 221_184
    assert c.simt_flops == 0
    # input 2*3*16*16*4 = 6144; weight 8*3*3*3*4 = 864 + bias 8*4 = 32; output 2*8*16*16*4 = 16384
    assert (c.input_bytes, c.param_bytes, c.output_bytes) == (6144, 896, 16384)
    assert c.bytes == 23_424


def test_conv_transpose2d(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, bias=False)
            def forward(self, x):
                return self.conv(x)
        def get_inputs():
            return [torch.randn(2, 4, 8, 8)]
        def get_init_inputs():
            return []
        """)
    c = count_task(p)
    # Every *input* pixel is scattered to k*k outputs per output channel, but padding 1 crops output
    # position -1: per dim, input 0 with tap 0 lands there, so 7 + 8 + 8 = 23 of the 8 * 3 = 24
    # (input, tap) pairs count. 2 * N * Cin * Cout * 23^2:
    assert c.flops == 2 * 2 * 4 * 6 * 23 * 23 == 50_784
    # FlopCounterMode: 2 * N * Hin * Win * Cin * Cout * k*k = 2 * 2 * 64 * 4 * 6 * 9
    assert c.flops_flopcounter == 55_296
    # output size (8-1)*2 - 2*1 + 3 + 1 = 16
    assert c.outputs == ["float32[2, 6, 16, 16]"]
    # input 2*4*8*8*4 = 2048; weight (Cin, Cout, 3, 3) 4*6*9*4 = 864; output 2*6*16*16*4 = 12288
    assert (c.input_bytes, c.param_bytes, c.output_bytes) == (2048, 864, 12288)


def test_conv_transpose3d(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.ConvTranspose3d(2, 3, 3, stride=2)
            def forward(self, x):
                return self.conv(x)
        def get_inputs():
            return [torch.randn(1, 2, 4, 4, 4)]
        def get_init_inputs():
            return []
        """)
    c = count_task(p)
    # 2 * N * Din*Hin*Win * Cin * Cout * k^3 = 2 * 1 * 64 * 2 * 3 * 27
    assert c.flops == 20_736
    assert c.outputs == ["float32[1, 3, 9, 9, 9]"]  # (4-1)*2 + 3 = 9
    # input 2*64*4 = 512; weight 2*3*27*4 = 648 + bias 12; output 3*729*4 = 8748
    assert (c.input_bytes, c.param_bytes, c.output_bytes) == (512, 660, 8748)


# --- attention -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention(tmp_path, causal):
    c = count_task(fn_task(tmp_path, f"F.scaled_dot_product_attention(q, k, v, is_causal={causal})",
                           "[torch.randn(2, 4, 128, 32) for _ in range(3)]", "q, k, v"))
    # Q K^T and P V: 2 * (B*H) * L * L * D each = 4 * 2*4 * 128*128 * 32. On fake CPU tensors this
    # dispatches to the CPU flash kernel, which FlopCounterMode alone would count as 0. A causal mask
    # keeps L*(L+1)/2 = 8256 of the 16384 pairs: 4 * 8 * 8256 * 32 = 8_454_144.
    assert c.flops == (8_454_144 if causal else 16_777_216)
    assert c.simt_flops == 2 * 4 * (8256 if causal else 128 * 128)  # the softmax: one per kept score
    assert c.bytes == 4 * (2 * 4 * 128 * 32 * 4) == 524_288  # q, k, v read; o written


def test_causal_pairs_with_unequal_lengths():
    from roofline_ext.tasks.formulas import causal_pairs

    # tril(ones(3, 5)) keeps 1 + 2 + 3; tril(ones(5, 3)) keeps 1 + 2 + 3 + 3 + 3.
    assert causal_pairs(3, 5) == 6 and causal_pairs(5, 3) == 12 and causal_pairs(4, 4) == 10


def test_attention_written_out_matches_sdpa_flops(tmp_path):
    c = count_task(fn_task(tmp_path, "torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(32), dim=-1) @ v",
                           "[torch.randn(2, 4, 128, 32) for _ in range(3)]", "q, k, v"))
    assert c.flops == 16_777_216
    # div and softmax over the 2*4*128*128 scores
    assert c.simt_flops == 2 * 131_072


# --- SIMT work -------------------------------------------------------------------------------------------

def test_layer_norm(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.ln = nn.LayerNorm(d)
            def forward(self, x):
                return self.ln(x)
        def get_inputs():
            return [torch.randn(32, 64)]
        def get_init_inputs():
            return [64]
        """)
    c = count_task(p)
    assert c.flops == 0
    assert c.simt_flops == 32 * 64  # one per output element
    assert c.param_bytes == 2 * 64 * 4  # weight and bias
    assert c.bytes == 8192 + 512 + 8192


def test_elementwise_chain(tmp_path):
    c = count_task(fn_task(tmp_path, "torch.relu(x * 2 + 1) - torch.sigmoid(x)", "[torch.randn(1000)]"))
    # mul, add, relu, sigmoid, sub: 5 ops x 1000 elements; Python scalars are not tensors to read
    assert c.flops == 0
    assert c.simt_flops == 5 * 1000
    assert c.bytes == 4000 + 4000
    assert {k for k, v in c.by_op.items() if v["simt_flops"]} == {"mul", "add", "relu", "sigmoid", "sub"}


def test_reduction_counts_its_outputs(tmp_path):
    c = count_task(fn_task(tmp_path, "x.sum(dim=1)", "[torch.randn(64, 100)]"))
    assert c.simt_flops == 64  # the documented approximation: one per output element
    assert c.bytes == 64 * 100 * 4 + 64 * 4


def test_copies_and_views_are_not_simt_work(tmp_path):
    c = count_task(fn_task(tmp_path, "torch.cat([x.t().contiguous(), x.view(16, 4)[:, :2].reshape(8, 4)], 0)",
                           "[torch.randn(4, 16)]"))
    assert c.simt_flops == 0 and c.flops == 0


def test_inference_mode_does_not_zero_or_skew_the_counts(tmp_path):
    # Under inference_mode composite ops (matmul, linear) arrive undecomposed; counts must not change.
    body = """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 4)
            {decorator}
            def forward(self, x, w):
                return self.fc(torch.relu(x * 2) @ w)
        def get_inputs():
            return [torch.randn(100, 16), torch.randn(16, 8)]
        def get_init_inputs():
            return []
        """
    plain = count_task(task(tmp_path, body.format(decorator=""), "plain.py"))
    decorated = count_task(task(tmp_path, body.format(decorator="@torch.inference_mode()"), "decorated.py"))
    with torch.inference_mode():
        ambient = count_task(task(tmp_path, body.format(decorator=""), "ambient.py"))
    expected_flops = 2 * 100 * 16 * 8 + 2 * 100 * 8 * 4
    for c in (plain, decorated, ambient):
        assert c.flops == expected_flops
        assert c.simt_flops == 2 * 100 * 16  # mul and relu; the matmuls are not SIMT work
        assert c.bytes == plain.bytes


# --- state: parameters, buffers, attributes, integers, sharing ---------------------------------------------

def test_registered_buffers_count_as_state(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 8)
                self.register_buffer("scale", torch.ones(16))
                self.register_buffer("spare", torch.zeros(1000), persistent=False)
            def forward(self, x):
                return self.fc(x * self.scale)
        def get_inputs():
            return [torch.randn(4, 16)]
        def get_init_inputs():
            return []
        """)
    c = count_task(p)
    # every parameter and buffer that forward reads is read once; `spare` is never read: 0.
    # fc 8*16*4 + 8*4 = 544, scale 64
    assert c.param_bytes == 544 + 64
    assert c.input_bytes == 4 * 16 * 4 and c.output_bytes == 4 * 8 * 4
    assert c.bytes == 608 + 256 + 128
    assert c.flops == 2 * 4 * 16 * 8
    assert c.simt_flops == 4 * 16  # x * scale


def test_plain_tensor_attributes_count_when_read(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.h0 = torch.randn(10, 16)      # read by forward: state
                self.unused = torch.randn(1000)    # never read: not traffic
            def forward(self, x):
                self.h0 = self.h0.to(x.device)
                return x + self.h0
        def get_inputs():
            return [torch.randn(10, 16)]
        def get_init_inputs():
            return []
        """)
    c = count_task(p)
    assert c.param_bytes == 10 * 16 * 4
    assert c.bytes == 3 * 640


def test_integer_inputs(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(100, 8)
            def forward(self, idx):
                return self.emb(idx)
        def get_inputs():
            return [torch.randint(0, 100, (4, 5))]
        def get_init_inputs():
            return []
        """)
    c = count_task(p)
    # indices int64 4*5*8 = 160; 20 indices read at most 20 of the 100 rows: 20*8*4 = 640;
    # output 4*5*8*4 = 640
    assert (c.input_bytes, c.param_bytes, c.output_bytes) == (160, 640, 640)
    assert c.flops == 0 and c.simt_flops == 0  # a gather
    assert c.dtype == "torch.float32"  # integers do not set the task's dtype
    assert c.inputs == ["int64[4, 5]"]


def test_integer_only_task_has_no_float_dtype(tmp_path):
    c = count_task(fn_task(tmp_path, "x + y", "[torch.randint(0, 9, (100,), dtype=torch.int32)] * 2", "x, y"))
    assert c.dtype is None and c.compute_dtype is None and c.dtypes == []
    # the same tensor passed twice is one storage, read once: 400 bytes in, 400 out
    assert c.bytes == 800
    assert c.simt_flops == 100


def test_shared_storage_counted_once(tmp_path):
    # x, a slice of it and its transpose: one storage of 8*8*4 = 256 bytes
    c = count_task(fn_task(tmp_path, "a + b.sum() + c.t()",
                           "(lambda x: [x, x[2:4], x.t()])(torch.randn(8, 8))", "a, b, c"))
    assert c.input_bytes == 256
    c = count_task(fn_task(tmp_path, "a * 2", "[torch.randn(1000, 4)[::2]]", "a", name="strided.py"))
    # every other 16-byte row: each 32-byte sector holds one row read, so every sector is moved
    assert c.input_bytes == 1000 * 4 * 4


def test_broadcast_input_counts_distinct_elements(tmp_path):
    c = count_task(fn_task(tmp_path, "a + 1", "[torch.randn(1, 64).expand(1000, 64)]", "a"))
    assert c.input_bytes == 64 * 4
    assert c.output_bytes == 1000 * 64 * 4


def test_tied_weights_counted_once(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(32, 32, bias=False)
                self.b = nn.Linear(32, 32, bias=False)
                self.b.weight = self.a.weight
            def forward(self, x):
                return self.b(self.a(x))
        def get_inputs():
            return [torch.randn(4, 32)]
        def get_init_inputs():
            return []
        """)
    c = count_task(p)
    assert c.param_bytes == 32 * 32 * 4
    assert c.flops == 2 * (2 * 4 * 32 * 32)


def test_in_place_output_is_read_and_written(tmp_path):
    c = count_task(fn_task(tmp_path, "x.relu_()", "[torch.randn(256)]"))
    assert c.input_bytes == 1024 and c.output_bytes == 1024
    assert c.simt_flops == 256


def test_non_tensor_arguments_are_free(tmp_path):
    c = count_task(fn_task(tmp_path, "x * s + n", "[torch.randn(10), 3.5, 2]", "x, s, n"))
    assert c.bytes == 80 and c.inputs == ["float32[10]"]


# --- dtypes ----------------------------------------------------------------------------------------------

def test_mixed_dtypes_are_reported(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(64, 64)
            def forward(self, x):
                return self.fc(x.float())
        def get_inputs():
            return [torch.randn(8, 64, dtype=torch.float16)]
        def get_init_inputs():
            return []
        """)
    c = count_task(p)
    assert c.dtype == "mixed"
    assert c.dtypes == ["torch.float16", "torch.float32"]
    assert c.compute_dtype == "torch.float16"  # the fastest roof present keeps the floor a floor
    assert c.input_bytes == 8 * 64 * 2


def test_dtype_cast_like_kernelbench(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(100, 64)
                self.fc = nn.Linear(64, 64)
            def forward(self, idx, x):
                return self.fc(self.emb(idx) + x)
        def get_inputs():
            return [torch.randint(0, 100, (8,)), torch.randn(8, 64)]
        def get_init_inputs():
            return []
        """)
    full = count_task(p)
    half = count_task(p, "bf16")
    assert half.dtype == "torch.bfloat16" and half.cast == "torch.bfloat16"
    assert half.flops == full.flops
    # floating tensors halve; the int64 indices (8*8 = 64 bytes) stay as they are
    assert full.input_bytes == 64 + 8 * 64 * 4 and half.input_bytes == 64 + 8 * 64 * 2
    assert half.param_bytes * 2 == full.param_bytes
    assert half.outputs == ["bfloat16[8, 64]"]


def test_module_conversions_in_the_constructor_and_tied_weights_under_cast(tmp_path):
    # Module.half()/.to() on fake parameters would fail inside torch (it swaps tensors in place);
    # tied weights must stay one parameter through --dtype
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(32, 32, bias=False).half().float()
                self.b = nn.Linear(32, 32, bias=False)
                self.b.weight = self.a.weight
            def forward(self, x):
                return self.b(self.a(x))
        def get_inputs():
            return [torch.randn(4, 32)]
        def get_init_inputs():
            return []
        """)
    assert count_task(p).param_bytes == 32 * 32 * 4
    half = count_task(p, "fp16")
    assert half.param_bytes == 32 * 32 * 2
    assert half.dtype == "torch.float16"


def test_parse_dtype():
    assert parse_dtype("fp16") is torch.float16
    assert parse_dtype("torch.bfloat16") is torch.bfloat16
    assert parse_dtype(None) is None
    with pytest.raises(UserError, match="fp32, fp16, bf16"):
        parse_dtype("fp4")


# --- RNNs, CUDA requests ---------------------------------------------------------------------------------

RNN_TASK = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.{cell}(12, 16, 2, batch_first=True, bidirectional=True)
    def forward(self, x):
        return self.rnn(x)[0]
def get_inputs():
    return [torch.randn(3, 20, 12)]
def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("cell,gates", [("LSTM", 4), ("GRU", 3), ("RNN", 1)])
def test_rnn_shortcut_counts_what_stepping_counts(tmp_path, monkeypatch, cell, gates):
    p = task(tmp_path, RNN_TASK.format(cell=cell))
    fast = count_task(p)
    monkeypatch.setattr(counting, "RNN_SHORTCUT", False)
    slow = count_task(p)
    assert (fast.flops, fast.simt_flops, fast.bytes, fast.outputs) == (slow.flops, slow.simt_flops, slow.bytes, slow.outputs)
    def work(c):  # op calls that compute something (the shortcut adds a few views of its own)
        return {k: v for k, v in c.by_op.items() if v["flops"] or v["simt_flops"]}

    assert work(fast) == work(slow)
    # by hand: per layer and direction 2 * T*B * G*H * (I + H); layer 1 reads both directions (2H)
    t_b, h = 20 * 3, 16
    expected = 2 * (2 * t_b * gates * h * (12 + h) + 2 * t_b * gates * h * (2 * h + h))
    assert fast.flops == expected
    assert fast.outputs == ["float32[3, 20, 32]"]


def test_cuda_requests_in_task_code_are_counted_on_cpu(tmp_path):
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8).cuda()
            def forward(self, x):
                return self.fc(x) + torch.zeros(8, device="cuda") + torch.ones(8).to("cuda:0")
        def get_inputs():
            return [torch.randn(4, 8).cuda()]
        def get_init_inputs():
            return []
        """)
    c = count_task(p)
    assert c.flops == 2 * 4 * 8 * 8


# --- no memory, no time ----------------------------------------------------------------------------------

def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def test_ten_gigabytes_of_inputs_count_instantly_without_allocating(tmp_path):
    count_task(fn_task(tmp_path, "x + 1", "[torch.randn(4)]", name="warm.py"))  # torch's one-time start-up
    p = task(tmp_path, """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(50000, 50000)            # 10 GB of weights
            def forward(self, x, y):
                return self.fc(torch.relu(x) + y)
        def get_inputs():
            return [torch.randn(50000, 50000), torch.randn(50000, 50000)]   # 2 x 10 GB
        def get_init_inputs():
            return []
        """, "huge.py")
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rss_before = _rss_mib()
    start = time.perf_counter()
    c = count_task(p)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, elapsed
    assert _rss_mib() - rss_before < 64
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - peak_before < 64
    n = 50000 * 50000
    assert c.input_bytes == 2 * n * 4
    assert c.param_bytes == (n + 50000) * 4
    assert c.output_bytes == n * 4
    assert c.flops == 2 * 50000**3


def test_importing_the_package_does_not_import_torch():
    code = ("import sys, roofline_ext, roofline_ext.tasks.loading, roofline_ext.tasks.counting, roofline_ext.runner.analyze, "
            "roofline_ext.cli.commands.analyze; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_counts_to_dict_is_json_ready(tmp_path):
    import json

    c = count_task(fn_task(tmp_path, "x * 2", "[torch.randn(4)]"))
    d = json.loads(json.dumps(c.to_dict()))
    assert d["flops"] == 0 and d["simt_flops"] == 4 and d["bytes"] == 32
    assert d["arithmetic_intensity"] == 4 / 32
