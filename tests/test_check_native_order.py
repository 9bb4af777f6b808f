"""The native core's stream discipline (issue 29), read off the sources: no GPU needed.

Under another process's memory traffic `check` once reported wrong data (NaN) for BF16 and FP32: the
verification's poison fill (cudaMemset) and its uploads (cudaMemcpy) ran on the legacy default
stream while the kernels ran on a cudaStreamNonBlocking stream, which does not wait for it, so the
fill could land after the kernel's results. The fix routes every transfer and fill through the
stream-ordered helpers of csrc/device.hpp; these tests keep it that way: no call that takes no
stream, no launch without one, and no launch on stream 0.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[1] / "csrc"
SOURCES = sorted(p for p in CSRC.rglob("*") if p.suffix in (".cu", ".cpp", ".hpp", ".cuh", ".h"))
#: Where the stream-ordered helpers themselves live (they call the Async forms).
HELPERS = CSRC / "device.hpp"

#: Runtime calls that take no stream (they run on the legacy default stream).
_UNORDERED = re.compile(r"\b(cudaMemcpy|cudaMemset|cudaMemcpy2D|cudaMemcpy3D|cudaMemset2D|cudaMemcpyToSymbol|"
                        r"cudaMemcpyFromSymbol|cudaMemcpyPeer)\s*\(")
_LAUNCH = re.compile(r"<<<(.*?)>>>", re.S)


def _code(path: Path) -> str:
    """The source without comments, so the explanation of the rule does not trip it."""
    text = path.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _top_level_args(text: str) -> list[str]:
    args, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
        else:
            cur += ch
    args.append(cur.strip())
    return args


def test_the_scan_sees_the_sources():
    names = {p.name for p in SOURCES}
    assert {"compute_skeleton.hpp", "simt.cu", "tensor_mma.cu", "tensor_wgmma.cu", "bandwidth.cpp", "bandwidth_hbm.cu",
            "bandwidth_l2.cu", "bandwidth_mix.cu", "bandwidth_verify.cpp", "bandwidth_fill.cu", "smem.cu", "hostlink.cpp",
            "hostlink_kernels.cu", "device.hpp"} <= names


@pytest.mark.parametrize("path", [p for p in SOURCES if p != HELPERS], ids=lambda p: p.name)
def test_no_transfer_or_fill_outside_a_stream(path):
    bad = [m.group(0) for m in _UNORDERED.finditer(_code(path))]
    assert not bad, (f"{path.name}: {bad}: these run on the legacy default stream, which the measuring "
                     "streams (cudaStreamNonBlocking) do not wait for; use upload/download/fill (device.hpp)")


@pytest.mark.parametrize("path", [p for p in SOURCES if p.suffix == ".cu"], ids=lambda p: p.name)
def test_every_launch_names_a_stream(path):
    for m in _LAUNCH.finditer(_code(path)):
        args = _top_level_args(m.group(1))
        assert len(args) == 4, f"{path.name}: launch <<<{m.group(1)}>>> names no stream (it would run on stream 0)"
        assert args[3] not in ("0", "nullptr", "NULL", "cudaStreamLegacy", "cudaStreamPerThread"), (
            f"{path.name}: launch <<<{m.group(1)}>>> runs on the default stream")


def test_the_helpers_are_stream_ordered():
    code = _code(HELPERS)
    for name, call in (("upload", "cudaMemcpyAsync"), ("download", "cudaMemcpyAsync"), ("fill", "cudaMemsetAsync")):
        body = re.search(rf"inline void {name}\(cudaStream_t s,[^{{]*\{{(.*?)\n\}}", code, re.S)
        assert body and call in body.group(1) and ", s)" in body.group(1), name
    assert not _UNORDERED.search(code)


def test_the_scan_would_catch_the_old_code():
    """The rule, applied to the lines the fix removed from compute_skeleton.hpp."""
    old = ("CUDA_CHECK(cudaMemset(out.get(), 0xFF, static_cast<std::size_t>(count) * sizeof(T)));\n"
           "Stream stream;\nlaunch(stream.get());")
    assert _UNORDERED.search(old)
    assert len(_top_level_args("p.grid, p.block")) == 2
