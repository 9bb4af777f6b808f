"""tanh-approximation GELU written as a chain of elementwise ops, and ModelNew: the same in one call.

PyTorch runs Model as ~8 kernels, each reading and writing the whole tensor; the floor counts the
compulsory traffic only (x read once, y written once: 2 x 268 MB), which a fused kernel such as
ModelNew's can approach. `roofline-ext analyze` reports the floor of the reference Model.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 8192
cols = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
