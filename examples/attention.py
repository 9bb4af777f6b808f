"""Scaled-dot-product attention in half precision: batch 8, 16 heads, 2048 tokens, head dim 64.

FLOPs 4·B·H·L²·D = 137.4 GFLOP (QKᵀ and PV, 2·L²·D each per head); bytes: Q, K, V read and O
written, 4 x 33.5 MB. Compute-bound on FP16 tensor cores.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
heads = 16
seq_len = 2048
head_dim = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    shape = (batch_size, heads, seq_len, head_dim)
    return [torch.randn(shape, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return []
