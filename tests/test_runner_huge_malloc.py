"""The fork server's malloc heap in transparent huge pages (runner/server_start.with_huge_malloc)."""
from __future__ import annotations

from roofline_ext.runner.server_start import HUGE_MALLOC, server_env, with_huge_malloc


def test_the_server_asks_for_huge_pages_and_keeps_what_was_set(monkeypatch):
    assert with_huge_malloc(None) == with_huge_malloc("") == HUGE_MALLOC
    assert with_huge_malloc("glibc.malloc.arena_max=2") == f"glibc.malloc.arena_max=2:{HUGE_MALLOC}"
    assert with_huge_malloc("glibc.malloc.hugetlb=0") == "glibc.malloc.hugetlb=0"  # the user's own choice stays
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    assert server_env()["GLIBC_TUNABLES"] == HUGE_MALLOC
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0")
    assert server_env()["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=0"
