"""A ResNet-style 3x3 convolution + batch norm + ReLU: 128 channels at 56 x 56, batch 32.

Convolution FLOPs 2·N·C_out·H·W·C_in·9 = 29.6 GFLOP; bytes: input and output activations (2 x 51.4
MB) plus 0.6 MB of weights, so about 2.25·C = 288 FLOP/byte: compute-bound on TF32 tensor cores. The
batch norm (training mode, as KernelBench runs it) and ReLU are SIMT work.
"""
import torch
import torch.nn as nn

batch_size = 32
channels = 128
size = 56


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, channels, size, size)]


def get_init_inputs():
    return [channels]
