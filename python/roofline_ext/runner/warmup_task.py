"""A task the fork server counts once before it forks any worker (not a user task).

The first count in a fresh process pays for everything torch does lazily: importing the fake-tensor,
FLOP-counter and dynamo machinery and filling their per-op caches. That is about 0.9 s. Counting
this task in the server pays it once, and every worker forked afterwards starts warm, so a task's
count costs milliseconds rather than a second. It touches the op families KernelBench uses most
(matmuls, convolutions 1d/2d/3d and transposed, norms, pooling, attention, an LSTM, elementwise
ops and reductions). The shapes are tiny because counting uses fake tensors anyway.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)
        self.conv1 = nn.Conv1d(4, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.conv3 = nn.Conv3d(2, 2, 3, padding=1)
        self.deconv = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.bn = nn.BatchNorm2d(4)
        self.ln = nn.LayerNorm(16)
        self.gn = nn.GroupNorm(2, 4)
        self.lstm = nn.LSTM(16, 16, batch_first=True)

    def forward(self, x, img, vol, seq):
        y = F.gelu(self.ln(self.linear(x))) @ x.t()
        y = torch.softmax(y, dim=-1).sum() + torch.bmm(x[None], x.t()[None]).mean()
        z = self.gn(self.bn(F.relu(self.conv2(img))))
        z = F.max_pool2d(self.deconv(z), 2) + F.avg_pool2d(z, 1)
        w = torch.tanh(self.conv3(vol)).amax() + torch.sigmoid(self.conv1(img.flatten(2)[:, :, :16])).var()
        q = seq.view(2, 1, 4, 16)
        a = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        out, _ = self.lstm(seq)
        loss = F.cross_entropy(x, torch.zeros(16, dtype=torch.long)) + F.mse_loss(x, x * 2)
        return y + z.sum() + w + a.sum() + out.sum() + loss + torch.cumsum(x, 0).max()


def get_inputs():
    return [torch.randn(16, 16), torch.randn(2, 4, 8, 8), torch.randn(1, 2, 4, 4, 4), torch.randn(2, 4, 16)]


def get_init_inputs():
    return []
