"""How fast, and in how much memory, does ``roofline-ext analyze`` count tasks?

The target: counting KernelBench levels 1-3 (250 tasks) in at most 60 s on a 2-core machine with a
peak RSS of at most 2 GiB. KernelBench is not ours to ship, so this script writes ~300 varied tasks
of its own into a temporary folder, in the KernelBench format and of the same kinds and sizes:
large and batched matmuls, matrix-vector products, convolutions (1d/2d/3d, strided, grouped,
depthwise), transposed convolutions, attention, norms, elementwise chains, reductions and losses,
level-2-style fused chains, small networks (MLP, VGG, ResNet, DenseNet, MobileNet, transformer and
GPT blocks, a small UNet), RNNs with long sequences, and tasks with multi-GB inputs.

It then counts them all in this one process, as ``roofline-ext analyze DIR`` does (the same
``analysis.analyze_batch``), and reports the total time, per-task percentiles, the slowest tasks
and the peak RSS (``resource.getrusage``), writing ``results/count_speed-<date>.json``.

    PYTHONPATH=python python3 benchmarks/count_speed.py [--out FILE] [--keep DIR]
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

HEADER = """import math
import torch
import torch.nn as nn
import torch.nn.functional as F
"""


def _task(model: str, inputs: str, init: str = "[]", prelude: str = "") -> str:
    return (f"{HEADER}\n{prelude}\n\n{model.strip()}\n\n\ndef get_inputs():\n    return {inputs}\n\n\n"
            f"def get_init_inputs():\n    return {init}\n")


def _fn_model(expr: str, args: str = "x") -> str:
    """A Model with no parameters whose forward returns ``expr``."""
    return f"""
class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}):
        return {expr}
"""


def _module_model(init_body: str, forward_body: str, init_args: str = "", fwd_args: str = "x") -> str:
    sig = f"self, {init_args}" if init_args else "self"
    return f"""
class Model(nn.Module):
    def __init__({sig}):
        super().__init__()
{_indent(init_body, 8)}

    def forward(self, {fwd_args}):
{_indent(forward_body, 8)}
"""


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line.strip() else line for line in text.strip("\n").splitlines())


def generate() -> dict[str, tuple[str, str]]:
    """name -> (family, source) for every generated task."""
    tasks: dict[str, tuple[str, str]] = {}

    def add(family: str, name: str, source: str) -> None:
        tasks[f"{len(tasks) + 1:03d}_{family}_{name}"] = (family, source)

    # --- matmuls (level 1 style) -----------------------------------------------------------------
    for n in (256, 1024, 2048, 4096, 8192, 16384):
        add("matmul", f"square_{n}", _task(_fn_model("torch.matmul(A, B)", "A, B"),
                                         f"[torch.randn({n}, {n}), torch.randn({n}, {n})]"))
    for m, k, n in ((8192, 128, 8192), (128, 32768, 128), (16384, 4096, 1024), (1024, 8192, 4096),
                    (4096, 2048, 16384), (512, 65536, 512), (32768, 256, 32768), (3000, 5000, 7000)):
        add("matmul", f"rect_{m}x{k}x{n}", _task(_fn_model("torch.matmul(A, B)", "A, B"),
                                               f"[torch.randn({m}, {k}), torch.randn({k}, {n})]"))
    for b, m, k, n in ((128, 128, 256, 512), (64, 512, 512, 512), (16, 1024, 2048, 1024), (512, 64, 64, 64)):
        add("matmul", f"bmm_{b}", _task(_fn_model("torch.bmm(A, B)", "A, B"),
                                      f"[torch.randn({b}, {m}, {k}), torch.randn({b}, {k}, {n})]"))
    for m, k in ((8192, 8192), (16384, 131072), (256, 1048576)):
        add("matmul", f"matvec_{m}x{k}", _task(_fn_model("torch.matmul(A, B)", "A, B"),
                                             f"[torch.randn({m}, {k}), torch.randn({k}, 1)]"))
        add("matmul", f"mv1d_{m}x{k}", _task(_fn_model("torch.mv(A, B)", "A, B"),
                                           f"[torch.randn({m}, {k}), torch.randn({k})]"))
    add("matmul", "transposed_a", _task(_fn_model("torch.matmul(A.T, B)", "A, B"),
                                        "[torch.randn(4096, 1024), torch.randn(4096, 2048)]"))
    add("matmul", "transposed_both", _task(_fn_model("torch.matmul(A.T, B.T)", "A, B"),
                                           "[torch.randn(4096, 1024), torch.randn(2048, 4096)]"))
    add("matmul", "tensor3d_matrix", _task(_fn_model("torch.matmul(A, B)", "A, B"),
                                           "[torch.randn(16, 1024, 2048), torch.randn(2048, 768)]"))
    add("matmul", "einsum_4d", _task(_fn_model('torch.einsum("bijl,lk->bijk", A, B)', "A, B"),
                                     "[torch.randn(16, 256, 512, 256), torch.randn(256, 768)]"))
    add("matmul", "diag_matmul", _task(_fn_model("torch.diag(A) @ B", "A, B"),
                                       "[torch.randn(4096), torch.randn(4096, 4096)]"))
    add("matmul", "upper_triangular", _task(_fn_model("torch.triu(torch.matmul(A, B))", "A, B"),
                                            "[torch.triu(torch.randn(4096, 4096)), torch.triu(torch.randn(4096, 4096))]"))
    add("matmul", "scalar_mult", _task(_fn_model("A * s", "A, s: float"), "[torch.randn(16384, 4096), 3.14]"))
    add("matmul", "linear_bias", _task(_module_model("self.fc = nn.Linear(i, o)", "return self.fc(x)", "i, o"),
                                       "[torch.randn(1024, 8192)]", "[8192, 8192]"))

    # --- convolutions -----------------------------------------------------------------------------
    convs2d = [
        (16, 3, 64, 224, 224, 3, 1, 1, 1, 1), (16, 64, 128, 56, 56, 3, 1, 1, 1, 1),
        (16, 128, 256, 28, 28, 3, 2, 1, 1, 1), (8, 256, 256, 14, 14, 3, 1, 2, 2, 1),
        (16, 64, 64, 112, 112, 1, 1, 0, 1, 1), (32, 3, 96, 227, 227, 11, 4, 2, 1, 1),
        (16, 64, 64, 56, 56, 3, 1, 1, 1, 64), (16, 128, 128, 64, 64, 5, 1, 2, 1, 4),
        (8, 32, 64, 256, 128, 3, 1, 0, 1, 1), (16, 512, 512, 7, 7, 3, 1, 1, 1, 1),
        (4, 16, 16, 512, 512, 7, 1, 3, 1, 1), (16, 96, 96, 56, 56, 3, 2, 1, 1, 96),
    ]
    for i, (b, ci, co, h, w, k, s, p, d, g) in enumerate(convs2d):
        add("conv", f"conv2d_{i}", _task(
            _module_model(f"self.conv = nn.Conv2d(ci, co, {k}, stride={s}, padding={p}, dilation={d}, groups={g})",
                          "return self.conv(x)", "ci, co"),
            f"[torch.randn({b}, {ci}, {h}, {w})]", f"[{ci}, {co}]"))
    for i, (b, ci, co, length, k, s) in enumerate(((16, 64, 128, 65536, 3, 1), (32, 3, 64, 16384, 5, 2),
                                             (16, 256, 256, 4096, 7, 1), (8, 512, 512, 2048, 3, 2))):
        add("conv", f"conv1d_{i}", _task(
            _module_model(f"self.conv = nn.Conv1d(ci, co, {k}, stride={s})", "return self.conv(x)", "ci, co"),
            f"[torch.randn({b}, {ci}, {length})]", f"[{ci}, {co}]"))
    for i, (b, ci, co, d, h, w, k, s) in enumerate(((8, 3, 64, 32, 128, 128, 3, 1), (4, 64, 64, 16, 64, 64, 3, 2),
                                                   (2, 32, 64, 64, 64, 64, 5, 1), (16, 16, 32, 16, 32, 32, 1, 1))):
        add("conv", f"conv3d_{i}", _task(
            _module_model(f"self.conv = nn.Conv3d(ci, co, {k}, stride={s})", "return self.conv(x)", "ci, co"),
            f"[torch.randn({b}, {ci}, {d}, {h}, {w})]", f"[{ci}, {co}]"))

    # --- transposed convolutions ------------------------------------------------------------------
    for i, (b, ci, co, h, w, k, s, p, op, g) in enumerate((
            (16, 64, 32, 64, 64, 3, 2, 1, 1, 1), (16, 128, 64, 32, 32, 4, 2, 1, 0, 1),
            (8, 32, 32, 128, 128, 3, 1, 1, 0, 1), (16, 64, 64, 64, 64, 3, 2, 1, 1, 4),
            (4, 256, 128, 32, 32, 5, 3, 2, 2, 1), (32, 16, 8, 128, 256, 3, 1, 0, 0, 1))):
        add("convT", f"convT2d_{i}", _task(
            _module_model(f"self.conv = nn.ConvTranspose2d(ci, co, {k}, stride={s}, padding={p}, "
                          f"output_padding={op}, groups={g})", "return self.conv(x)", "ci, co"),
            f"[torch.randn({b}, {ci}, {h}, {w})]", f"[{ci}, {co}]"))
    for i, (b, ci, co, d, k, s, p) in enumerate(((8, 32, 16, 16, 3, 2, 1), (4, 64, 32, 32, 3, 1, 1),
                                                (2, 16, 16, 64, 4, 2, 1), (16, 32, 64, 8, 3, 2, 0),
                                                (8, 48, 48, 24, 5, 1, 2))):
        add("convT", f"convT3d_{i}", _task(
            _module_model(f"self.conv = nn.ConvTranspose3d(ci, co, {k}, stride={s}, padding={p})",
                          "return self.conv(x)", "ci, co"),
            f"[torch.randn({b}, {ci}, {d}, {d}, {d})]", f"[{ci}, {co}]"))
    for i, (b, ci, co, length, k, s) in enumerate(((16, 64, 32, 16384, 3, 2), (32, 32, 64, 4096, 5, 1))):
        add("convT", f"convT1d_{i}", _task(
            _module_model(f"self.conv = nn.ConvTranspose1d(ci, co, {k}, stride={s})", "return self.conv(x)", "ci, co"),
            f"[torch.randn({b}, {ci}, {length})]", f"[{ci}, {co}]"))

    # --- attention ----------------------------------------------------------------------------------
    for i, (b, h, length, d, causal, dt) in enumerate(((8, 16, 2048, 64, False, "float16"), (4, 32, 4096, 128, True, "bfloat16"),
                                                 (32, 8, 512, 64, False, "float32"), (2, 16, 8192, 128, True, "float16"),
                                                 (16, 12, 1024, 64, False, "bfloat16"))):
        add("attention", f"sdpa_{i}", _task(
            _fn_model(f"F.scaled_dot_product_attention(q, k, v, is_causal={causal})", "q, k, v"),
            f"[torch.randn({b}, {h}, {length}, {d}, dtype=torch.{dt}) for _ in range(3)]"))
    for i, (b, h, length, d) in enumerate(((8, 12, 1024, 64), (4, 16, 2048, 64))):
        add("attention", f"manual_{i}", _task(_fn_model(
            "torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v", "q, k, v"),
            f"[torch.randn({b}, {h}, {length}, {d}) for _ in range(3)]"))
    add("attention", "mha", _task(
        _module_model("self.attn = nn.MultiheadAttention(e, h, batch_first=True)",
                      "return self.attn(x, x, x, need_weights=False)[0]", "e, h"),
        "[torch.randn(16, 512, 768)]", "[768, 12]"))
    add("attention", "relu_attention_causal", _task(_module_model(
        """self.qkv = nn.Linear(e, 3 * e)
self.h = h
self.register_buffer("mask", torch.tril(torch.ones(t, t)).view(1, 1, t, t))""",
        """B, T, C = x.shape
q, k, v = self.qkv(x).split(C, dim=2)
q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float('-inf'))
att = F.relu(att)
return (att @ v).transpose(1, 2).contiguous().view(B, T, C)""", "e, h, t"),
        "[torch.randn(16, 1024, 768)]", "[768, 12, 1024]"))

    # --- norms ----------------------------------------------------------------------------------------
    norms = [
        ("layernorm", "nn.LayerNorm((64, 256, 256))", "[torch.randn(16, 64, 256, 256)]"),
        ("layernorm_last", "nn.LayerNorm(4096)", "[torch.randn(32, 1024, 4096)]"),
        ("batchnorm2d", "nn.BatchNorm2d(64)", "[torch.randn(16, 64, 256, 256)]"),
        ("batchnorm1d", "nn.BatchNorm1d(1024)", "[torch.randn(4096, 1024)]"),
        ("batchnorm3d", "nn.BatchNorm3d(32)", "[torch.randn(8, 32, 32, 64, 64)]"),
        ("groupnorm", "nn.GroupNorm(8, 64)", "[torch.randn(16, 64, 256, 256)]"),
        ("instancenorm", "nn.InstanceNorm2d(64)", "[torch.randn(16, 64, 256, 256)]"),
    ]
    for name, mod, inputs in norms:
        add("norm", name, _task(_module_model(f"self.norm = {mod}", "return self.norm(x)"), inputs))
    add("norm", "rmsnorm", _task(_fn_model("x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)"),
                                 "[torch.randn(16, 64, 256, 256)]"))
    add("norm", "frobenius", _task(_fn_model("x / torch.norm(x, p='fro')"), "[torch.randn(16, 64, 256, 256)]"))
    add("norm", "l1", _task(_fn_model("x / torch.sum(torch.abs(x), dim=1, keepdim=True)"), "[torch.randn(16, 16384)]"))
    add("norm", "l2", _task(_fn_model("x / torch.norm(x, p=2, dim=1, keepdim=True)"), "[torch.randn(16, 16384)]"))

    # --- elementwise ----------------------------------------------------------------------------------
    acts = ["torch.relu(x)", "F.gelu(x)", "torch.sigmoid(x)", "torch.tanh(x)", "F.softplus(x)", "F.elu(x, alpha=1.0)",
            "torch.selu(x)", "F.hardtanh(x, -1.0, 1.0)", "F.leaky_relu(x, 0.01)", "x * torch.sigmoid(x)",
            "F.hardsigmoid(x)", "x / (1 + torch.abs(x))", "F.mish(x)", "torch.clamp(x, -0.5, 0.5)",
            "F.silu(x)", "F.hardswish(x)", "F.relu6(x)", "torch.where(x > 0, x, 0.1 * x)"]
    sizes = ["(16, 16384)", "(4096, 393216)", "(64, 1024, 1024)"]
    for i, a in enumerate(acts):
        add("elementwise", f"act_{i}", _task(_fn_model(a), f"[torch.randn{sizes[i % len(sizes)]}]"))
    for n in range(2, 10):
        chain = "x"
        ops = ["torch.relu({})", "({}) * 2.0", "({}) + 1.0", "torch.sigmoid({})", "torch.tanh({})",
               "F.gelu({})", "({}) - 0.5", "torch.exp(-({}))", "({}) / 3.0"]
        for j in range(n):
            chain = ops[j % len(ops)].format(chain)
        add("elementwise", f"chain_{n}", _task(_fn_model(chain), "[torch.randn(8192, 8192)]"))
    # multi-GB inputs: counted without allocating them
    add("elementwise", "huge_relu_8GB", _task(_fn_model("torch.relu(x)"), "[torch.randn(2**31)]"))
    add("elementwise", "huge_add_12GB", _task(_fn_model("x + y", "x, y"), "[torch.randn(2**30, 3), torch.randn(2**30, 3)]"))
    add("elementwise", "huge_fp16_gelu", _task(_fn_model("F.gelu(x)"), "[torch.randn(65536, 65536, dtype=torch.float16)]"))

    # --- reductions and losses -------------------------------------------------------------------------
    reds = ["torch.sum(x, dim=1)", "torch.mean(x, dim=1)", "torch.max(x, dim=1)[0]", "torch.min(x, dim=2)[0]",
            "torch.argmax(x, dim=1)", "torch.argmin(x, dim=1)", "torch.prod(x, dim=1)", "torch.cumsum(x, dim=1)",
            "torch.cumprod(x, dim=1)", "torch.logsumexp(x, dim=1)", "torch.softmax(x, dim=-1)",
            "torch.log_softmax(x, dim=1)", "torch.var(x, dim=1)", "torch.std(x, dim=-1)",
            "torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])", "torch.amax(x, dim=(1, 2))"]
    for i, r in enumerate(reds):
        add("reduction", f"red_{i}", _task(_fn_model(r), "[torch.randn(128, 4096, 393)]"))
    losses = [
        ("mse", "torch.mean((p - t) ** 2)", "[torch.randn(128, 4096), torch.randn(128, 4096)]"),
        ("cross_entropy", "F.cross_entropy(p, t)", "[torch.randn(4096, 1000), torch.randint(0, 1000, (4096,))]"),
        ("smooth_l1", "F.smooth_l1_loss(p, t)", "[torch.randn(128, 4096), torch.randn(128, 4096)]"),
        ("kl_div", "F.kl_div(torch.log(p), t, reduction='batchmean')",
         "[torch.randn(128, 4096).softmax(dim=-1), torch.randn(128, 4096).softmax(dim=-1)]"),
        ("hinge", "torch.mean(torch.clamp(1 - p * t, min=0))", "[torch.randn(128, 1), torch.randint(0, 2, (128, 1)).float() * 2 - 1]"),
        ("cosine", "torch.mean(1 - F.cosine_similarity(p, t, dim=1))", "[torch.randn(128, 4096), torch.randn(128, 4096)]"),
        ("triplet", "F.triplet_margin_loss(p, t, t.flip(0))", "[torch.randn(128, 4096), torch.randn(128, 4096)]"),
    ]
    for name, expr, inputs in losses:
        add("loss", name, _task(_fn_model(expr, "p, t"), inputs))

    # --- level-2-style fused chains ------------------------------------------------------------------------
    chains = [
        ("conv_relu_bias", "self.conv = nn.Conv2d(3, 16, 3)\nself.bias = nn.Parameter(torch.randn(16, 1, 1))",
         "return torch.relu(self.conv(x)) + self.bias", "[torch.randn(128, 3, 32, 32)]"),
        ("conv_gn_tanh_pool", "self.conv = nn.Conv2d(3, 64, 3)\nself.gn = nn.GroupNorm(8, 64)",
         "return F.max_pool2d(torch.tanh(self.gn(self.conv(x))), 2)", "[torch.randn(128, 3, 64, 64)]"),
        ("gemm_sigmoid_sum", "self.fc = nn.Linear(1024, 512)", "return torch.sigmoid(self.fc(x)).sum(dim=1, keepdim=True)",
         "[torch.randn(2048, 1024)]"),
        ("gemm_bn_gelu_relu", "self.fc = nn.Linear(512, 1024)\nself.bn = nn.BatchNorm1d(1024)",
         "return torch.relu(F.gelu(self.bn(self.fc(x))))", "[torch.randn(4096, 512)]"),
        ("convT3d_bn_mean", "self.conv = nn.ConvTranspose3d(16, 32, 3, stride=2, padding=1)\nself.bn = nn.BatchNorm3d(32)",
         "x = self.bn(self.conv(x))\nreturn x - x.mean(dim=(2, 3, 4), keepdim=True)", "[torch.randn(16, 16, 16, 32, 32)]"),
        ("conv3d_softmax_pool", "self.conv = nn.Conv3d(3, 16, 3)",
         "return F.max_pool3d(torch.softmax(self.conv(x), dim=1), 2)", "[torch.randn(16, 3, 16, 64, 64)]"),
        ("convT2d_add_hardswish", "self.conv = nn.ConvTranspose2d(32, 64, 3, stride=2, padding=1, output_padding=1)",
         "x = self.conv(x)\nreturn x * F.hardswish(x + 1.0)", "[torch.randn(128, 32, 16, 16)]"),
        ("matmul_scale_residual", "self.fc = nn.Linear(1024, 1024)",
         "y = self.fc(x)\nreturn y * 0.5 + y.detach()", "[torch.randn(1024, 1024)]"),
        ("conv_in_div", "self.conv = nn.Conv2d(3, 16, 3)\nself.norm = nn.InstanceNorm2d(16)",
         "return self.norm(self.conv(x)) / 2.0", "[torch.randn(128, 3, 128, 128)]"),
        ("gemm_max_sub_gelu", "self.fc = nn.Linear(512, 1024)",
         "x = self.fc(x)\nx = torch.max(x, dim=1, keepdim=True)[0]\nreturn F.gelu(x - x.mean(dim=1, keepdim=True))",
         "[torch.randn(1024, 512)]"),
        ("conv_avgpool_sigmoid_sum", "self.conv = nn.Conv2d(8, 32, 3, padding=1)",
         "return torch.sigmoid(F.avg_pool2d(self.conv(x), 4)).sum(dim=[1, 2, 3])", "[torch.randn(128, 8, 256, 256)]"),
        ("gemm_swish_scale", "self.fc = nn.Linear(1024, 512)",
         "x = self.fc(x)\nreturn x * torch.sigmoid(x) * 2.0", "[torch.randn(1024, 1024)]"),
        ("conv_dropout_softmax", "self.conv = nn.Conv3d(3, 16, 3)\nself.drop = nn.Dropout(0.0)",
         "return torch.softmax(self.drop(self.conv(x)), dim=1)", "[torch.randn(8, 3, 16, 32, 32)]"),
        ("bmm_instnorm_sum", "self.fc = nn.Linear(64, 128)\nself.norm = nn.InstanceNorm2d(1)",
         "x = self.fc(x)\nx = self.norm(x.unsqueeze(1).unsqueeze(1)).squeeze()\nreturn x + x", "[torch.randn(1024, 64)]"),
        ("convT2d_upsample_pool", "self.conv = nn.ConvTranspose2d(16, 16, 4, stride=2, padding=1)",
         "x = F.interpolate(self.conv(x), scale_factor=2, mode='bilinear', align_corners=False)\nreturn F.adaptive_avg_pool2d(x, 1)",
         "[torch.randn(32, 16, 64, 64)]"),
    ]
    for rep in range(2):  # each chain at two sizes: the batch (first input dim) doubled the second time
        for name, init, fwd, inputs in chains:
            if rep:
                inputs = re.sub(r"torch\.randn\((\d+)", lambda m: f"torch.randn({2 * int(m.group(1))}", inputs, count=1)
            add("fused", f"{name}_{rep}", _task(_module_model(init, fwd), inputs))

    # --- small networks ------------------------------------------------------------------------------------
    for depth, width in ((3, 1024), (8, 2048), (16, 512), (4, 8192)):
        add("net", f"mlp_{depth}x{width}", _task(_module_model(
            f"""layers = []
for _ in range({depth}):
    layers += [nn.Linear(w, w), nn.ReLU()]
self.net = nn.Sequential(*layers, nn.Linear(w, 10))""", "return self.net(x)", "w"),
            f"[torch.randn(256, {width})]", f"[{width}]"))
    vgg = """cfg = [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'M', 512, 512, 512, 'M', 512, 512, 512, 'M']
layers, c = [], 3
for v in cfg:
    if v == 'M':
        layers.append(nn.MaxPool2d(2, 2))
    else:
        layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
        c = v
self.features = nn.Sequential(*layers)
self.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(0.0),
                                nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(0.0), nn.Linear(4096, n))"""
    add("net", "vgg16", _task(_module_model(vgg, "return self.classifier(torch.flatten(self.features(x), 1))", "n"),
                              "[torch.randn(10, 3, 224, 224)]", "[1000]"))
    resnet_prelude = '''
class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        out = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(out)) + idt)
'''
    for blocks, name in (((2, 2, 2, 2), "resnet18"), ((3, 4, 6, 3), "resnet34"), ((3, 4, 23, 3), "resnet_deep")):
        add("net", name, _task(_module_model(f"""self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
layers, c = [], 64
for i, (n, w) in enumerate(zip({blocks}, (64, 128, 256, 512))):
    for j in range(n):
        layers.append(Block(c, w, 2 if (j == 0 and i > 0) else 1))
        c = w
self.layers = nn.Sequential(*layers)
self.fc = nn.Linear(512, n_cls)""", "x = self.layers(self.stem(x))\nreturn self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))",
            "n_cls"), "[torch.randn(10, 3, 224, 224)]", "[1000]", prelude=resnet_prelude))
    dense_prelude = '''
class DenseLayer(nn.Module):
    def __init__(self, cin, growth):
        super().__init__()
        self.bn = nn.BatchNorm2d(cin)
        self.conv = nn.Conv2d(cin, growth, 3, padding=1, bias=False)

    def forward(self, x):
        return torch.cat([x, self.conv(torch.relu(self.bn(x)))], 1)
'''
    for n_layers in (6, 24, 48):
        add("net", f"densenet_block_{n_layers}", _task(_module_model(
            f"self.layers = nn.Sequential(*[DenseLayer(32 + i * 32, 32) for i in range({n_layers})])",
            "return self.layers(x)"), "[torch.randn(10, 32, 56, 56)]", prelude=dense_prelude))
    add("net", "mobilenet_v1", _task(_module_model("""def dw(cin, cout, s):
    return nn.Sequential(nn.Conv2d(cin, cin, 3, s, 1, groups=cin, bias=False), nn.BatchNorm2d(cin), nn.ReLU(True),
                         nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True))
cfg = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1), (256, 512, 2)] + [(512, 512, 1)] * 5 + [(512, 1024, 2), (1024, 1024, 1)]
self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(True))
self.body = nn.Sequential(*[dw(a, b, s) for a, b, s in cfg])
self.fc = nn.Linear(1024, 1000)""", "x = self.body(self.stem(x))\nreturn self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))"),
        "[torch.randn(10, 3, 224, 224)]"))
    for layers, d, heads, seq in ((1, 512, 8, 512), (6, 768, 12, 256), (12, 768, 12, 197), (4, 1024, 16, 1024)):
        add("net", f"transformer_{layers}x{d}", _task(_module_model(
            f"""layer = nn.TransformerEncoderLayer({d}, {heads}, 4 * {d}, dropout=0.0, batch_first=True)
self.enc = nn.TransformerEncoder(layer, {layers}, enable_nested_tensor=False)""", "return self.enc(x)"),
            f"[torch.randn(8, {seq}, {d})]"))
    gpt_prelude = '''
class Block(nn.Module):
    def __init__(self, d, h, t):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.h = h
        self.register_buffer("bias", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))
'''
    for n_blocks, d, h, t in ((1, 768, 8, 512), (4, 768, 12, 1024), (12, 512, 8, 256)):
        add("net", f"gpt_{n_blocks}x{d}", _task(_module_model(
            f"self.blocks = nn.Sequential(*[Block({d}, {h}, {t}) for _ in range({n_blocks})])", "return self.blocks(x)"),
            f"[torch.randn(16, {t}, {d})]", prelude=gpt_prelude))
    add("net", "vit_patch_embed", _task(_module_model(
        """self.patch = nn.Conv2d(3, 768, 16, 16)
self.cls = nn.Parameter(torch.zeros(1, 1, 768))
self.pos = nn.Parameter(torch.zeros(1, 197, 768))
layer = nn.TransformerEncoderLayer(768, 12, 3072, dropout=0.0, batch_first=True, norm_first=True)
self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
self.head = nn.Linear(768, 1000)""",
        """x = self.patch(x).flatten(2).transpose(1, 2)
x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
return self.head(self.enc(x)[:, 0])"""), "[torch.randn(10, 3, 224, 224)]"))
    add("net", "unet_small", _task(_module_model(
        """def blk(a, b):
    return nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.Softmax(dim=-1),
                         nn.Conv2d(b, b, 3, padding=1), nn.BatchNorm2d(b), nn.Softmax(dim=-1))
self.e1, self.e2, self.e3 = blk(8, 32), blk(32, 64), blk(64, 128)
self.up2 = nn.ConvTranspose2d(128, 64, 2, 2)
self.d2 = blk(128, 64)
self.up1 = nn.ConvTranspose2d(64, 32, 2, 2)
self.d1 = blk(64, 32)
self.out = nn.Conv2d(32, 4, 1)""",
        """e1 = self.e1(x)
e2 = self.e2(F.max_pool2d(e1, 2))
e3 = self.e3(F.max_pool2d(e2, 2))
d2 = self.d2(torch.cat([self.up2(e3), e2], 1))
d1 = self.d1(torch.cat([self.up1(d2), e1], 1))
return self.out(d1)"""), "[torch.randn(8, 8, 64, 512)]"))

    # --- RNNs (level 3 has several, with long sequences) ---------------------------------------------------
    for cell in ("LSTM", "GRU", "RNN"):
        for layers, seq, bidir in ((6, 512, False), (6, 512, True), (2, 1024, False)):
            h0 = "self.h0 = torch.randn(layers * (2 if bidir else 1), 10, hidden)"
            state = "(self.h0, self.h0.clone())" if cell == "LSTM" else "self.h0"
            add("rnn", f"{cell.lower()}_{layers}l_{seq}_{'bi' if bidir else 'uni'}", _task(_module_model(
                f"""self.rnn = nn.{cell}(inp, hidden, layers, batch_first=True, bidirectional=bidir)
{h0}
self.fc = nn.Linear(hidden * (2 if bidir else 1), 10)""",
                f"""self.h0 = self.h0.to(x.device)
out, _ = self.rnn(x, {state})
return self.fc(out[:, -1, :])""", "inp, hidden, layers, bidir"),
                f"[torch.randn(10, {seq}, 128)]", f"[128, 256, {layers}, {bidir}]"))
    add("rnn", "vanilla_rnn_cell", _task(_module_model(
        """self.hidden = torch.randn(8, h)
self.i2h = nn.Linear(i + h, h)
self.h2o = nn.Linear(h, o)""",
        """self.hidden = self.hidden.to(x.device)
self.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), dim=1)))
return self.h2o(self.hidden)""", "i, h, o"), "[torch.randn(8, 1024)]", "[1024, 256, 128]"))

    # --- pooling, indexing and shape ops ------------------------------------------------------------------
    misc = [
        ("maxpool2d", "F.max_pool2d(x, 3, 2, 1)", "[torch.randn(32, 64, 224, 224)]"),
        ("avgpool3d", "F.avg_pool3d(x, 3, 2, 1)", "[torch.randn(16, 32, 64, 64, 64)]"),
        ("maxpool1d", "F.max_pool1d(x, 4, 2)", "[torch.randn(64, 128, 65536)]"),
        ("adaptive_avg", "F.adaptive_avg_pool2d(x, (7, 7))", "[torch.randn(64, 512, 28, 28)]"),
        ("embedding_like", "w[idx]", "[torch.randn(50000, 1024), torch.randint(0, 50000, (4096, 128))]", "w, idx"),
        ("gather", "torch.gather(x, 1, idx)", "[torch.randn(4096, 4096), torch.randint(0, 4096, (4096, 256))]", "x, idx"),
        ("cat", "torch.cat([x, y], dim=1)", "[torch.randn(64, 512, 1024), torch.randn(64, 256, 1024)]", "x, y"),
        ("transpose_contig", "x.transpose(1, 2).contiguous()", "[torch.randn(64, 1024, 1024)]"),
        ("pad", "F.pad(x, (1, 1, 1, 1))", "[torch.randn(64, 64, 256, 256)]"),
        ("interpolate", "F.interpolate(x, scale_factor=2, mode='nearest')", "[torch.randn(32, 64, 128, 128)]"),
    ]
    for entry in misc:
        name, expr, inputs = entry[:3]
        args = entry[3] if len(entry) > 3 else "x"
        add("misc", name, _task(_fn_model(expr, args), inputs))

    # --- the same kinds again at other sizes, to reach a few hundred tasks ----------------------------------
    for n in (512, 3072, 6144, 12288):
        for dt in ("float32", "float16", "bfloat16"):
            add("matmul", f"square_{n}_{dt}", _task(_fn_model("A @ B", "A, B"),
                f"[torch.randn({n}, {n}, dtype=torch.{dt}), torch.randn({n}, {n}, dtype=torch.{dt})]"))
    for i, (b, c, h) in enumerate(((8, 64, 64), (32, 32, 128), (4, 128, 256), (64, 16, 32), (16, 256, 32), (2, 512, 64))):
        add("conv", f"conv_bn_relu_{i}", _task(_module_model(
            "self.conv = nn.Conv2d(c, c, 3, padding=1)\nself.bn = nn.BatchNorm2d(c)", "return torch.relu(self.bn(self.conv(x)))", "c"),
            f"[torch.randn({b}, {c}, {h}, {h})]", f"[{c}]"))
    for i, (b, length, d) in enumerate(((64, 128, 256), (16, 1024, 1024), (4, 4096, 512), (128, 64, 768))):
        add("norm", f"layernorm_{i}", _task(_module_model("self.ln = nn.LayerNorm(d)", "return self.ln(x)", "d"),
                                            f"[torch.randn({b}, {length}, {d})]", f"[{d}]"))
        add("reduction", f"softmax_{i}", _task(_fn_model("torch.softmax(x, dim=-1)"), f"[torch.randn({b}, {length}, {d})]"))
        add("elementwise", f"gelu_{i}", _task(_fn_model("F.gelu(x)"), f"[torch.randn({b}, {length}, {d})]"))
    # level-2 style: a layer, then an activation, then (or not) a norm and a reduction
    layers = [
        ("linear", "nn.Linear(1024, 2048)", "nn.BatchNorm1d(2048)", "[torch.randn(512, 1024)]", "1"),
        ("conv2d", "nn.Conv2d(16, 32, 3, padding=1)", "nn.BatchNorm2d(32)", "[torch.randn(64, 16, 64, 64)]", "(2, 3)"),
        ("convT2d", "nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1)", "nn.GroupNorm(4, 16)",
         "[torch.randn(32, 32, 32, 32)]", "(2, 3)"),
        ("conv3d", "nn.Conv3d(8, 16, 3)", "nn.InstanceNorm3d(16)", "[torch.randn(8, 8, 16, 32, 32)]", "(2, 3, 4)"),
    ]
    activations = ["torch.relu(x)", "F.gelu(x)", "x * torch.sigmoid(x)", "torch.tanh(x) * 2.0",
                   "F.hardswish(x)", "F.leaky_relu(x, 0.2) + 1.0"]
    for lname, layer, norm, inputs, dims in layers:
        for j, act in enumerate(activations):
            with_norm = j % 2 == 0
            init = f"self.layer = {layer}" + (f"\nself.norm = {norm}" if with_norm else "")
            fwd = "x = self.layer(x)\n" + ("x = self.norm(x)\n" if with_norm else "") + f"x = {act}\n"
            fwd += f"return x.mean(dim={dims})" if j % 3 == 0 else "return x"
            add("fused", f"{lname}_act{j}{'_norm' if with_norm else ''}", _task(_module_model(init, fwd), inputs))
    # level 1 has many variants of one convolution: kernel shape, stride, dilation, asymmetric input
    for k in ((1, 1), (3, 3), (5, 5), (3, 7)):
        for stride, dilation in ((1, 1), (2, 1), (1, 2), (2, 3)):
            add("conv", f"conv2d_k{k[0]}x{k[1]}_s{stride}_d{dilation}", _task(_module_model(
                f"self.conv = nn.Conv2d(32, 64, {k}, stride={stride}, dilation={dilation}, bias=False)",
                "return self.conv(x)"), "[torch.randn(16, 32, 128, 256)]"))
            add("convT", f"convT2d_k{k[0]}x{k[1]}_s{stride}_d{dilation}", _task(_module_model(
                f"self.conv = nn.ConvTranspose2d(32, 64, {k}, stride={stride}, dilation={dilation}, bias=False)",
                "return self.conv(x)"), "[torch.randn(16, 32, 64, 128)]"))
    for m, k, n in ((1, 4096, 4096), (7, 11, 13), (33, 4097, 65), (1000, 1000, 1), (4096, 1, 4096),
                    (2048, 6144, 128), (96, 96, 96), (12288, 12288, 64)):
        add("matmul", f"odd_{m}x{k}x{n}", _task(_fn_model("torch.matmul(A, B)", "A, B"),
                                              f"[torch.randn({m}, {k}), torch.randn({k}, {n})]"))
    return tasks


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return 0.0
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="result JSON (default: benchmarks/results/count_speed-<date>.json)")
    ap.add_argument("--keep", help="write the generated tasks to this folder (and keep them)")
    args = ap.parse_args(argv)

    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here.parent / "python"))
    rss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    tasks = generate()
    tmp = None
    folder = Path(args.keep) if args.keep else Path(tmp := tempfile.mkdtemp(prefix="count_speed_"))
    folder.mkdir(parents=True, exist_ok=True)
    for name, (_, source) in tasks.items():
        (folder / f"{name}.py").write_text(source)

    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    t0 = time.perf_counter()
    import torch  # noqa: F401  (timed apart: every run of the CLI pays it once)

    from roofline_ext.runner.analyze import analyze_batch, analyze_task, resolve_gpu
    from roofline_ext.tasks.loading import find_task_files

    t_import = time.perf_counter() - t0
    gpu = resolve_gpu("H100")
    per_task: dict[str, float] = {}

    def timed(path, *a, **kw):
        start = time.perf_counter()
        try:
            return analyze_task(path, *a, **kw)
        finally:
            per_task[Path(path).stem] = time.perf_counter() - start

    paths = find_task_files(folder)
    t1 = time.perf_counter()
    from roofline_ext.report.progress import Progress

    results = analyze_batch(paths, gpu, progress=Progress if sys.stderr.isatty() else None, measured=None,
                            analyze=timed)
    t_count = time.perf_counter() - t1
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux -> MiB

    failed = [r for r in results if r["status"] != "ok"]
    times = list(per_task.values())
    by_family: dict[str, dict[str, float]] = {}
    for name, (family, _) in tasks.items():
        f = by_family.setdefault(family, {"tasks": 0, "seconds": 0.0})
        f["tasks"] += 1
        f["seconds"] = round(f["seconds"] + per_task.get(name, 0.0), 4)
    slowest = sorted(per_task.items(), key=lambda kv: -kv[1])[:8]
    biggest = max((r for r in results if r["status"] == "ok"), key=lambda r: r["input_bytes"])
    report = {
        "benchmark": "count_speed",
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "machine": {
            "cpus_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "platform": platform.platform(),
            # other work on the machine slows this down: the 1-minute load before and after
            "loadavg_1min_before": round(load_before[0], 2) if load_before else None,
            "loadavg_1min_after": round(os.getloadavg()[0], 2) if load_before else None,
        },
        "tasks": len(paths),
        "failed": len(failed),
        "failures": [{"task": r["task"], "error": r["error"]} for r in failed],
        "import_torch_s": round(t_import, 3),
        "count_total_s": round(t_count, 3),
        "total_s": round(t_import + t_count, 3),
        "per_task_s": {
            "mean": round(statistics.mean(times), 4),
            "p50": round(_percentile(times, 0.50), 4),
            "p90": round(_percentile(times, 0.90), 4),
            "p99": round(_percentile(times, 0.99), 4),
            "max": round(max(times), 4),
            "first_task_s": round(per_task[paths[0].stem], 4),
        },
        "slowest": [{"task": k, "seconds": round(v, 4)} for k, v in slowest],
        "by_family": by_family,
        "largest_inputs": {"task": biggest["task"], "input_gb": round(biggest["input_bytes"] / 1e9, 2),
                           "seconds": round(per_task[biggest["task"]], 4)},
        "peak_rss_mib": round(peak_rss, 1),
        "rss_before_mib": round(rss_start, 1),
        "targets": {"total_s_for_250_tasks": 60, "peak_rss_mib": 2048},
        "scaled_to_250_tasks_s": round((t_import + t_count) * 250 / len(paths), 2),
    }
    out = Path(args.out) if args.out else here / "results" / f"count_speed-{_dt.date.today().isoformat()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("tasks", "failed", "import_torch_s", "count_total_s", "total_s",
                                             "per_task_s", "peak_rss_mib", "scaled_to_250_tasks_s")}, indent=2))
    for f in report["failures"]:
        print(f"FAILED {f['task']}: {f['error']}", file=sys.stderr)
    print(f"wrote {out}", file=sys.stderr)
    if tmp:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
