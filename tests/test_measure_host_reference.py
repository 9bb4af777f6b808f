"""The host references of the bandwidth and shared-memory kernels, without a GPU.

``csrc/host_reference.hpp`` holds the words the kernels read and must write, the checksums, the
triad reference and the spot-check regions; both nvcc (for the kernels and their verification)
and a plain C++ compiler read it. This test builds ``csrc/tests/host_reference_test.cpp`` with
that compiler, runs it (its own consistency checks must pass), and recomputes the values it prints
with an independent Python implementation of the same definitions.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
M32 = 0xFFFFFFFF
# slow: every test reads the module fixture that compiles and runs the C++ host reference (4 s on 2 cores).
pytestmark = pytest.mark.slow


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> dict:
    cxx = _compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (g++, c++, clang++ or $CXX) to build the host reference test")
    exe = tmp_path_factory.mktemp("host-reference") / "host_reference_test"
    build = subprocess.run([cxx, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-x", "c++",
                            "-I", str(ROOT / "csrc"), str(ROOT / "csrc" / "tests" / "host_reference_test.cpp"),
                            "-o", str(exe)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"host reference checks failed:\n{run.stderr}"
    return json.loads(run.stdout)


# --- an independent Python implementation of the definitions ----------------------------------------

def mix32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x85EBCA6B) & M32
    x ^= x >> 13
    x = (x * 0xC2B2AE35) & M32
    return x ^ (x >> 16)


def buffer_seed(seed: int, buffer: int) -> int:
    return mix32(seed ^ ((0x632BE5AB * (buffer + 1)) & M32))


def data_word(seed: int, i: int) -> int:
    key = mix32((seed + (i >> 32) * 0x9E3779B9) & M32)
    return mix32((i & M32) ^ key)


def fill_word(key: int, i: int) -> int:
    return (((i & M32) * 0x9E3779B1) & M32) ^ key


def word_to_float(h: int) -> float:
    return (h >> 8) / 8388608.0 - 1.0  # exact in double


def triad_word(seed_b: int, seed_c: int, i: int) -> int:
    b, c = word_to_float(data_word(seed_b, i)), word_to_float(data_word(seed_c, i))
    # 1.5 * c + b is exact in double (at most 26 significant bits), so one rounding to float32
    # gives the correctly rounded fma, as std::fmaf and the device's __fmaf_rn do.
    return struct.unpack("<I", struct.pack("<f", 1.5 * c + b))[0]


def smem_thread_sum(key: int, thread: int, threads: int, width: int, words: int, passes: int) -> int:
    s = 0
    for base in range(thread * width, words, threads * width):
        s += sum(data_word(key, base + c) for c in range(width))
    return (s * passes) & M32


# --- the tests ------------------------------------------------------------------------------------------

def test_murmur3_finaliser_matches(printed):
    assert mix32(1) == 0x514E28B7  # murmur3's fmix32(1), a published value
    for x, y in printed["mix32"]:
        assert mix32(x) == y


def test_buffer_seeds_match(printed):
    assert printed["seeds"] == [buffer_seed(12345, 0), buffer_seed(12345, 1), buffer_seed(12345, 7)]


def test_data_fill_and_triad_words_match(printed):
    s0, s1, key = printed["seeds"]
    for i, word, fill, triad in printed["words"]:
        assert word == data_word(s0, i), i
        assert fill == fill_word(key, i), i
        assert triad == triad_word(s0, s1, i), i


def test_checksum_matches(printed):
    s0 = printed["seeds"][0]
    assert printed["checksum_100000"] == sum(data_word(s0, i) for i in range(100000)) & M32


def test_shared_memory_thread_sums_match(printed):
    key = printed["smem_block_seed_5"]
    assert key == buffer_seed(12345, 5 + 16)
    want = [smem_thread_sum(key, t * 37, 256, 4, 256 * 8 * 4, 1000) for t in range(4)]
    assert printed["smem_thread_sums"] == want
