"""Thirty-odd varied KernelBench-style tasks, written to a folder, for timing PyTorch eager on a GPU.

Sizes are chosen so each task runs for roughly 0.05-5 ms on an H200 (far above event resolution and
launch gaps) with inputs well beyond the L2 where the task is memory-bound. Each entry is
(file stem, dtype, body of Model.forward, constructor, inputs).
"""
from __future__ import annotations

import textwrap
from pathlib import Path

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"

# name: (init body lines, forward expression or body, get_inputs expr, get_init_inputs expr)
TASKS: dict[str, tuple[str, str, str, str]] = {
    "matmul_4096_fp32": ("", "return a @ b", "[torch.randn(4096, 4096), torch.randn(4096, 4096)]", "[]"),
    "matmul_8192_bf16": ("", "return a @ b",
                         "[torch.randn(8192, 8192, dtype=torch.bfloat16), torch.randn(8192, 8192, dtype=torch.bfloat16)]", "[]"),
    "matmul_4096_fp16": ("", "return a @ b",
                         "[torch.randn(4096, 4096, dtype=torch.float16), torch.randn(4096, 4096, dtype=torch.float16)]", "[]"),
    "matmul_tall_skinny_bf16": ("", "return a @ b",
                                "[torch.randn(65536, 1024, dtype=torch.bfloat16), torch.randn(1024, 256, dtype=torch.bfloat16)]", "[]"),
    "bmm_64x512_fp16": ("", "return torch.bmm(a, b)",
                        "[torch.randn(64, 512, 512, dtype=torch.float16), torch.randn(64, 512, 512, dtype=torch.float16)]", "[]"),
    "matvec_16384_fp32": ("", "return a @ b", "[torch.randn(16384, 16384), torch.randn(16384, 1)]", "[]"),
    "linear_bf16": ("self.fc = nn.Linear(4096, 4096).to(torch.bfloat16)", "return self.fc(a)",
                    "[torch.randn(8192, 4096, dtype=torch.bfloat16)]", "[]"),
    "mlp_block_bf16": ("self.fc1 = nn.Linear(2048, 8192).to(torch.bfloat16)\n"
                       "self.fc2 = nn.Linear(8192, 2048).to(torch.bfloat16)",
                       "return self.fc2(F.gelu(self.fc1(a)))", "[torch.randn(8192, 2048, dtype=torch.bfloat16)]", "[]"),
    "conv2d_3x3_resnet": ("self.conv = nn.Conv2d(128, 128, 3, padding=1)", "return self.conv(a)",
                          "[torch.randn(32, 128, 56, 56)]", "[]"),
    "conv2d_1x1": ("self.conv = nn.Conv2d(256, 512, 1)", "return self.conv(a)", "[torch.randn(32, 256, 28, 28)]", "[]"),
    "conv2d_depthwise": ("self.conv = nn.Conv2d(256, 256, 3, padding=1, groups=256)", "return self.conv(a)",
                         "[torch.randn(32, 256, 56, 56)]", "[]"),
    "conv_transpose2d": ("self.conv = nn.ConvTranspose2d(128, 64, 4, stride=2, padding=1)", "return self.conv(a)",
                         "[torch.randn(16, 128, 64, 64)]", "[]"),
    "conv3d_small": ("self.conv = nn.Conv3d(32, 64, 3, padding=1)", "return self.conv(a)",
                     "[torch.randn(8, 32, 16, 64, 64)]", "[]"),
    "softmax_rows": ("", "return torch.softmax(a, dim=-1)", "[torch.randn(8192, 8192)]", "[]"),
    "log_softmax_rows": ("", "return torch.log_softmax(a, dim=-1)", "[torch.randn(4096, 16384)]", "[]"),
    "layernorm": ("self.ln = nn.LayerNorm(4096)", "return self.ln(a)", "[torch.randn(16384, 4096)]", "[]"),
    "rmsnorm_manual": ("self.w = nn.Parameter(torch.ones(4096))",
                       "return a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w",
                       "[torch.randn(16384, 4096)]", "[]"),
    "batchnorm2d": ("self.bn = nn.BatchNorm2d(64).eval()", "return self.bn(a)", "[torch.randn(64, 64, 112, 112)]", "[]"),
    "groupnorm": ("self.gn = nn.GroupNorm(32, 256)", "return self.gn(a)", "[torch.randn(32, 256, 56, 56)]", "[]"),
    "gelu": ("", "return F.gelu(a)", "[torch.randn(64 * 1024 * 1024)]", "[]"),
    "relu": ("", "return torch.relu(a)", "[torch.randn(64 * 1024 * 1024)]", "[]"),
    "add": ("", "return a + b", "[torch.randn(64 * 1024 * 1024), torch.randn(64 * 1024 * 1024)]", "[]"),
    "elementwise_chain": ("", "return torch.sigmoid(a * 2 + 1) * a - 0.5",
                          "[torch.randn(64 * 1024 * 1024)]", "[]"),
    "scale_bf16": ("", "return a * 3", "[torch.randn(128 * 1024 * 1024, dtype=torch.bfloat16)]", "[]"),
    "sum_rows": ("", "return a.sum(dim=1)", "[torch.randn(16384, 8192)]", "[]"),
    "mean_all": ("", "return a.mean()", "[torch.randn(128 * 1024 * 1024)]", "[]"),
    "max_cols": ("", "return a.amax(dim=0)", "[torch.randn(8192, 16384)]", "[]"),
    "cumsum_rows": ("", "return torch.cumsum(a, dim=1)", "[torch.randn(4096, 8192)]", "[]"),
    "l2_norm_rows": ("", "return a / a.norm(dim=1, keepdim=True)", "[torch.randn(16384, 4096)]", "[]"),
    "transpose_copy": ("", "return a.t().contiguous()", "[torch.randn(8192, 8192)]", "[]"),
    "concat": ("", "return torch.cat([a, b], dim=1)", "[torch.randn(8192, 4096), torch.randn(8192, 4096)]", "[]"),
    "sdpa_fp16": ("", "return F.scaled_dot_product_attention(q, k, v)",
                  "[torch.randn(8, 16, 2048, 64, dtype=torch.float16) for _ in range(3)]", "[]"),
    "sdpa_causal_bf16": ("", "return F.scaled_dot_product_attention(q, k, v, is_causal=True)",
                         "[torch.randn(4, 32, 4096, 128, dtype=torch.bfloat16) for _ in range(3)]", "[]"),
    "cosine_similarity": ("", "return F.cosine_similarity(a, b, dim=1)",
                          "[torch.randn(16384, 2048), torch.randn(16384, 2048)]", "[]"),
    "small_cnn": ("self.net = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),\n"
                  "    nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),\n"
                  "    nn.Linear(128, 10))", "return self.net(a)", "[torch.randn(64, 3, 224, 224)]", "[]"),
    "transformer_layer_bf16": ("self.layer = nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True)"
                               ".to(torch.bfloat16).eval()",
                               "return self.layer(a)", "[torch.randn(16, 512, 1024, dtype=torch.bfloat16)]", "[]"),
}


def _args(forward: str, inputs: str) -> str:
    if "q, k, v" in forward:
        return "q, k, v"
    return "a, b" if " b" in forward or "(a, b" in forward or "b)" in forward else "a"


def write_zoo(folder: str | Path) -> list[Path]:
    """Write every task as ``<name>.py`` into ``folder``; returns the paths."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (init, forward, inputs, init_inputs) in TASKS.items():
        init_body = textwrap.indent(init, " " * 8) + "\n" if init else ""
        src = (HEADER
               + "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
               + init_body
               + f"\n    def forward(self, {_args(forward, inputs)}):\n        {forward}\n\n\n"
               + f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return {init_inputs}\n")
        p = out / f"{name}.py"
        p.write_text(src)
        paths.append(p)
    return paths


if __name__ == "__main__":
    import sys

    for p in write_zoo(sys.argv[1] if len(sys.argv) > 1 else "zoo"):
        print(p)
