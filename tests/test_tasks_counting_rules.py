"""The counting rules of docs/counting.md, each on a small task of our own with its FLOPs and bytes
worked out by hand here. float32 (4 bytes) throughout; a multiply-add is 2 FLOPs."""
from __future__ import annotations

import itertools
import textwrap

import pytest
import torch

import roofline_ext.tasks.realbuild as realbuild
from roofline_ext.tasks.counting import count_task
from roofline_ext.tasks.formulas import kept_lower, kept_upper, tap_pairs
from roofline_ext.tasks.loading import TaskError


def task(tmp_path, body, name="task.py"):
    p = tmp_path / name
    p.write_text("import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
                 + textwrap.dedent(body))
    return p


def module_task(tmp_path, init, forward, inputs, name="task.py", args="x"):
    return task(tmp_path, f"""
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
{textwrap.indent(textwrap.dedent(init), ' ' * 16)}
            def forward(self, {args}):
                return {forward}

        def get_inputs():
            return {inputs}
        """, name)


# --- convolutions: only (real input element, kernel tap) pairs ------------------------------------------

def test_conv1d_with_stride_padding_dilation_and_groups(tmp_path):
    p = module_task(tmp_path, "self.conv = nn.Conv1d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2, bias=False)",
                    "self.conv(x)", "[torch.randn(2, 4, 10)]")
    c = count_task(p)
    # L_out = (10 + 2*2 - 2*(3-1) - 1) // 2 + 1 = 5. Output o reads input 2o - 2 + 2j, j = 0, 1, 2:
    # o=0: -2, 0, 2 (2 real); o=1: 0, 2, 4 (3); o=2: 3; o=3: 4, 6, 8 (3); o=4: 6, 8, 10 (2) -> 13 of 15
    # weight (Cout=6, Cin/groups=2, 3): 2 * N * 6 * 2 * 13
    assert c.outputs == ["float32[2, 6, 5]"]
    assert c.flops == 2 * 2 * 6 * 2 * 13 == 624
    assert c.flops_flopcounter == 2 * 2 * 6 * 2 * 15 == 720  # FlopCounterMode: every tap of every output


def test_conv2d_is_separable_per_dimension(tmp_path):
    p = module_task(tmp_path, "self.conv = nn.Conv2d(3, 5, (3, 2), stride=(1, 2), padding=(1, 1), bias=False)",
                    "self.conv(x)", "[torch.randn(1, 3, 4, 5)]")
    c = count_task(p)
    # H: k=3, s=1, p=1, 4 -> 4 outputs; taps 0 and 2 each miss one edge: 3 + 4 + 3 = 10 of 12
    # W: k=2, s=2, p=1, 5 -> 3 outputs reading 2o - 1 + j: o=0: -1, 0 (1); o=1: 1, 2 (2); o=2: 3, 4 (2): 5 of 6
    assert c.outputs == ["float32[1, 5, 4, 3]"]
    assert c.flops == 2 * 1 * 5 * 3 * 10 * 5 == 1500
    assert c.flops_flopcounter == 2 * 1 * 5 * 3 * (4 * 3) * (3 * 2) == 2160


def test_conv_without_padding_is_flopcounters_figure(tmp_path):
    p = module_task(tmp_path, "self.conv = nn.Conv2d(2, 3, 3)", "self.conv(x)", "[torch.randn(1, 2, 6, 6)]")
    c = count_task(p)
    assert c.flops == c.flops_flopcounter == 2 * 3 * 2 * (4 * 4) * 9 == 1728


def test_conv_transpose1d_excludes_cropped_outputs(tmp_path):
    p = module_task(tmp_path, "self.conv = nn.ConvTranspose1d(2, 3, 3, stride=2, padding=1, output_padding=1, bias=False)",
                    "self.conv(x)", "[torch.randn(1, 2, 4)]")
    c = count_task(p)
    # L_out = (4-1)*2 - 2*1 + 3 + 1 = 8. Input i, tap j land on 2i + j - 1:
    # i=0: -1 (cropped), 0, 1; i=1: 1, 2, 3; i=2: 3, 4, 5; i=3: 5, 6, 7 -> 11 of 12
    assert c.outputs == ["float32[1, 3, 8]"]
    assert c.flops == 2 * 1 * 2 * 3 * 11 == 132
    assert c.flops_flopcounter == 2 * 1 * 2 * 3 * 4 * 3 == 144


def test_conv_transpose_with_heavy_cropping(tmp_path):
    p = module_task(tmp_path, "self.conv = nn.ConvTranspose1d(1, 1, 5, padding=3, bias=False)",
                    "self.conv(x)", "[torch.randn(1, 1, 4)]")
    c = count_task(p)
    # L_out = 3 - 6 + 4 + 1 = 2: only i + j - 3 in {0, 1}, i.e. i + j = 3 (4 pairs) or 4 (4 pairs): 8 of 20
    assert c.outputs == ["float32[1, 1, 2]"]
    assert c.flops == 2 * 8 and c.flops_flopcounter == 2 * 20


@pytest.mark.parametrize("transposed", [False, True])
def test_tap_pairs_agree_with_enumeration(transposed):
    # the closed form against brute force over many small configurations
    for n, k, s, p, d in itertools.product((1, 4, 7), (1, 2, 3), (1, 2, 3), (0, 1, 2), (1, 2)):
        if transposed:
            n_iter, n_bound = n, (n - 1) * s - 2 * p + d * (k - 1) + 1
        else:
            n_iter, n_bound = (n + 2 * p - d * (k - 1) - 1) // s + 1, n
        if n_iter <= 0 or n_bound <= 0:
            continue
        brute = sum(1 for x in range(n_iter) for j in range(k) if 0 <= x * s + j * d - p < n_bound)
        assert tap_pairs(n_iter, n_bound, k, s, p, d) == brute, (n, k, s, p, d)


# --- causal attention: only the pairs the mask keeps ------------------------------------------------------

HAND_ATTENTION = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("bias", torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8))
            self.register_buffer("up", torch.triu(torch.ones(8, 8), diagonal=1).bool())
            self.register_buffer("additive", torch.triu(torch.full((8, 8), float("-inf")), diagonal=1))
        def forward(self, q, k, v):
            T = q.size(-2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = {mask}
            att = F.softmax(att, dim=-1)
            return att @ v

    def get_inputs():
        return [torch.randn(2, 2, 6, 4) for _ in range(3)]
    """


@pytest.mark.parametrize("mask", [
    "att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))",
    "torch.where(self.bias[:, :, :T, :T].bool(), att, float('-inf'))",
    "att.masked_fill(self.up[:T, :T], float('-inf'))",
    "att + self.additive[:T, :T]",
])
def test_hand_written_causal_attention(tmp_path, mask):
    c = count_task(task(tmp_path, HAND_ATTENTION.format(mask=mask)))
    # B*H = 4 matrices of T x T = 6 x 6 scores; a causal mask keeps 1 + 2 + ... + 6 = 21 of 36.
    # Q K^T and P V over the kept pairs: 2 * 4 * 21 * E (E = 4) each
    assert c.flops == 2 * (2 * 4 * 21 * 4) == 1344
    assert c.flops_flopcounter == 2 * (2 * 4 * 36 * 4) == 2304
    # the scale, the masking op and the softmax count one per kept score: 3 * 4 * 21 = 252, plus
    # what the mask's own expression costs: `== 0` on the 6 x 6 window, 36 (a cast like .bool() is free)
    own = 36 if "== 0" in mask else 0
    assert c.simt_flops == 3 * 4 * 21 + own
    assert any("keeps 21 of 36" in n for n in c.notes)


def test_hand_written_attention_bytes(tmp_path):
    c = count_task(task(tmp_path, HAND_ATTENTION.format(
        mask="att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))")))
    # q, k, v: 3 * 2*2*6*4 * 4 = 1152; output 384. Of the 8 x 8 mask (256 bytes) the 6 x 6 window is
    # read: rows of 24 bytes 32 bytes apart (gaps under a sector), one run of 5*32 + 24 = 184 bytes,
    # i.e. 6 sectors = 192 bytes. The other buffers are never read.
    assert (c.input_bytes, c.output_bytes, c.param_bytes) == (1152, 384, 192)


SDPA = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("keep", torch.tril(torch.ones(6, 6, dtype=torch.bool)))
            self.register_buffer("additive", torch.triu(torch.full((6, 6), float("-inf")), diagonal=1))
        def forward(self, q, k, v, m):
            return F.scaled_dot_product_attention(q, k, v, attn_mask={mask})

    def get_inputs():
        return [torch.randn(2, 2, 6, 4) for _ in range(3)] + [torch.rand(6, 6) > 0.5]
    """


@pytest.mark.parametrize("mask,kept", [
    ("self.keep", 21), ("self.additive", 21), ("torch.ones(6, 6, dtype=torch.bool).tril()", 21),
    ("torch.ones(6, 6, dtype=torch.bool).tril(-1)", 15), ("torch.ones(6, 6, dtype=torch.bool)", 36),
])
def test_sdpa_with_a_known_mask(tmp_path, mask, kept):
    c = count_task(task(tmp_path, SDPA.format(mask=mask)))
    # softmax(Q K^T) V over the kept pairs: 2 * (B*H) * kept * (E + Ev) = 2 * 4 * kept * 8
    assert c.flops == 2 * 4 * kept * 8
    assert c.flops_flopcounter == 2 * 4 * 36 * 8


def test_a_failure_in_following_masks_counts_all_work_and_says_so(tmp_path, monkeypatch):
    import roofline_ext.tasks.masks as masks

    def broken(*args, **kwargs):
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(masks.MaskTracker, "_elementwise", broken)
    c = count_task(task(tmp_path, HAND_ATTENTION.format(
        mask="att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))")))
    assert c.flops == c.flops_flopcounter == 2 * (2 * 4 * 36 * 4)
    assert any("broken on purpose" in n for n in c.notes)


def test_a_mask_of_unknown_values_counts_the_full_square_and_says_so(tmp_path):
    c = count_task(task(tmp_path, SDPA.format(mask="m")))
    assert c.flops == 2 * 4 * 36 * 8
    assert any("cannot be known" in n for n in c.notes)
    hand = HAND_ATTENTION.replace("def forward(self, q, k, v):", "def forward(self, q, k, v, m):").replace(
        "for _ in range(3)]", "for _ in range(3)] + [torch.rand(6, 6) > 0.5]")
    c = count_task(task(tmp_path, hand.format(mask="att.masked_fill(m, float('-inf'))"), "hand.py"))
    assert c.flops == 2 * (2 * 4 * 36 * 4)
    assert any("cannot be known" in n for n in c.notes)


def test_causal_mask_with_unequal_lengths(tmp_path):
    body = SDPA.replace("torch.randn(2, 2, 6, 4) for _ in range(3)]",
                        "torch.randn(2, 2, L, 4) for L in (3, 5, 5)]")
    c = count_task(task(tmp_path, body.format(mask="torch.ones(3, 5, dtype=torch.bool).tril(2)")))
    # bottom-right aligned (diagonal 2): row i keeps i + 3 keys: 3 + 4 + 5 = 12 of 15
    assert c.flops == 2 * 4 * 12 * 8
    assert kept_lower(3, 5, 2) == 12 and kept_upper(5, 3, -2) == 12


def test_triangle_of_a_matmul_counts_the_kept_half(tmp_path):
    c = count_task(task(tmp_path, """
        class Model(nn.Module):
            def forward(self, A, B):
                return torch.triu(torch.matmul(A, B))
        def get_inputs():
            return [torch.triu(torch.randn(8, 8)), torch.triu(torch.randn(8, 8))]
        """))
    # entries below the diagonal are zeroed: 36 of 64 outputs are needed, 2 * 8 multiply-adds each
    assert c.flops == 2 * 36 * 8 == 576
    assert c.simt_flops == 36  # triu writes the 28 zeros without computing them


def test_triangular_inputs_are_not_a_shortcut_of_the_floor(tmp_path):
    c = count_task(task(tmp_path, """
        class Model(nn.Module):
            def forward(self, A, B):
                return torch.matmul(A, B)
        def get_inputs():
            return [torch.triu(torch.randn(8, 8)), torch.triu(torch.randn(8, 8))]
        """))
    assert c.flops == 2 * 8 ** 3  # exploiting the inputs' zeros is a structural shortcut, not the floor


# --- bytes the forward pass reads ------------------------------------------------------------------------

def test_an_unused_layer_adds_nothing(tmp_path):
    c = count_task(module_task(tmp_path, "self.used = nn.Linear(16, 8)\nself.unused = nn.Linear(1000, 1000)",
                               "self.used(x)", "[torch.randn(4, 16)]"))
    assert c.param_bytes == (8 * 16 + 8) * 4 == 544


def test_a_literal_made_in_forward_is_not_read(tmp_path):
    c = count_task(module_task(tmp_path, "pass", "torch.minimum(x, torch.tensor(0.0))", "[torch.randn(10)]"))
    assert (c.input_bytes, c.param_bytes, c.output_bytes) == (40, 0, 40)


def test_an_input_never_read_adds_nothing(tmp_path):
    c = count_task(module_task(tmp_path, "pass", "x * 2", "[torch.randn(10), torch.randn(1000)]", args="x, y"))
    assert c.input_bytes == 40 and c.inputs == ["float32[10]", "float32[1000]"]


@pytest.mark.parametrize("expr,nbytes", [
    # columns 0..15 of a 32 x 64 weight: 32 rows of 64 bytes, 256 bytes apart (gaps of a sector or more)
    ("x[:, :16] @ self.w[:, :16].t()", 32 * 64),
    ("x[:, :16] @ self.w.narrow(1, 0, 16).t()", 32 * 64),
    # row 3: 64 contiguous floats
    ("x[:, :64] * self.w[3]", 256),
    # column 5: 32 floats, each in a sector of its own
    ("x[:, :32] * self.w[:, 5]", 32 * 32),
    # the whole weight
    ("x @ self.w.t()", 32 * 64 * 4),
])
def test_a_slice_counts_the_sectors_it_covers(tmp_path, expr, nbytes):
    c = count_task(module_task(tmp_path, "self.w = nn.Parameter(torch.randn(32, 64))", expr,
                               "[torch.randn(4, 64)]", args="x"))
    assert c.param_bytes == nbytes


@pytest.mark.parametrize("init,expr,inputs,nbytes", [
    # 50 indices, 10 rows: every row at most once: 10 * 16 * 4
    ("self.emb = nn.Embedding(10, 16)", "self.emb(x)", "[torch.randint(0, 10, (50,))]", 640),
    # 5 of 100 rows of 8 floats
    ("self.t = nn.Parameter(torch.randn(100, 8))", "torch.index_select(self.t, 0, x)",
     "[torch.randint(0, 100, (5,))]", 5 * 8 * 4),
    # gather: one element per index, 64 * 2 of the 64 * 64
    ("self.t = nn.Parameter(torch.randn(64, 64))", "torch.gather(self.t, 1, x)",
     "[torch.randint(0, 64, (64, 2))]", 64 * 2 * 4),
    # advanced indexing, 10 rows of 4 floats of 1000
    ("self.t = nn.Parameter(torch.randn(1000, 4))", "self.t[x]", "[torch.randint(0, 1000, (10,))]", 160),
])
def test_a_lookup_reads_one_row_per_index_at_most(tmp_path, init, expr, inputs, nbytes):
    c = count_task(module_task(tmp_path, init, expr, inputs))
    assert c.param_bytes == nbytes


# --- storages shared by inputs ---------------------------------------------------------------------------

@pytest.mark.parametrize("returned,nbytes", [
    ("[X, X.t()]", 64 * 64 * 4),
    ("[X, X]", 64 * 64 * 4),
    ("[X.t(), X[:32]]", 64 * 64 * 4),
])
def test_module_level_inputs_that_share_storage_count_once(tmp_path, returned, nbytes):
    c = count_task(task(tmp_path, f"""
        X = torch.randn(64, 64)
        class Model(nn.Module):
            def forward(self, a, b):
                return a + b.t() if a.shape == b.t().shape else a.sum() + b.sum()
        def get_inputs():
            return {returned}
        """))
    assert c.input_bytes == nbytes


def test_disjoint_slices_of_one_input_count_their_sectors(tmp_path):
    c = count_task(task(tmp_path, """
        X = torch.randn(64, 64)
        class Model(nn.Module):
            def forward(self, a, b):
                return a + b
        def get_inputs():
            return [X[:16], X[32:48]]
        """))
    assert c.input_bytes == 2 * 16 * 64 * 4


# --- tasks that need real values to be built ---------------------------------------------------------------

ITEM_IN_INIT = """
    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.rates = [x.item() for x in torch.linspace(0, 0.5, 3)]
            self.fc = nn.Linear(n, n)
        def forward(self, x):
            return self.fc(x) * self.rates[1]
    def get_inputs():
        return [torch.randn(8, 32)]
    def get_init_inputs():
        return [32]
    """


def test_a_constructor_that_reads_values_is_built_for_real(tmp_path):
    c = count_task(task(tmp_path, ITEM_IN_INIT))
    assert c.flops == 2 * 8 * 32 * 32
    assert c.param_bytes == (32 * 32 + 32) * 4 and c.input_bytes == 8 * 32 * 4
    assert any("built for real on the CPU" in n for n in c.notes)


def test_a_constructor_over_the_budget_says_why_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(realbuild, "REAL_BUILD_BUDGET", 1024)  # the Linear alone is 4 KiB
    with pytest.raises(TaskError) as e:
        count_task(task(tmp_path, ITEM_IN_INIT))
    message = str(e.value)
    assert e.value.kind == "unsupported-op" and "\n" not in message
    assert "Model(*get_init_inputs()) cannot be counted without running it: its result depends on tensor values" in message
    assert "would allocate more than" in message
    assert "Exception" not in message  # no raw torch exception names


def test_item_in_forward_is_one_friendly_line(tmp_path):
    with pytest.raises(TaskError) as e:
        count_task(module_task(tmp_path, "pass", "x * x.sum().item()", "[torch.randn(4)]"))
    message = str(e.value)
    assert e.value.kind == "unsupported-op" and "\n" not in message and "Exception" not in message
    assert "Model.forward() cannot be counted without running it: its result depends on tensor values" in message


def test_counting_leaves_no_mode_behind(tmp_path):
    count_task(task(tmp_path, ITEM_IN_INIT))
    assert torch.ones(2).sum().item() == 2.0  # real tensors again, no fake mode left active
