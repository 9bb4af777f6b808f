"""Row softmax of a 4096 x 16384 float32 matrix: memory-bound.

Bytes: 268 MB read + 268 MB written; no tensor-core FLOPs, 67 M "SIMT" FLOPs (one per output
element), so the floor is the time to stream 537 MB through HBM.
"""
import torch
import torch.nn as nn

batch_size = 4096
dim = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
