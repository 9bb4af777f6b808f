"""Square matrix multiply, 4096 x 4096 x 4096 in float32: compute-bound on any GPU.

FLOPs 2·N³ = 137.4 GFLOP; bytes 3·N²·4 = 201 MB (A and B read, C written): 683 FLOP/byte.
Try `--dtype bf16` to see the BF16 tensor-core roof instead of TF32.
"""
import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
