"""Compulsory bytes: which parts of which storages a forward pass reads and writes.

A *read* is the region of a storage that one op reads: a tensor (a view: its distinct elements, at
32-byte sector granularity) or, for a lookup (``embedding``, ``index_select``, ``gather``, ``x[idx]``),
the rows the indices can name: ``min(table rows, number of indices)``. The reads of one storage are
combined (:func:`storage_bytes`), and each storage counts once however many tensors view it.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

__all__ = ["SECTOR", "Read", "tensor_read", "lookup_read", "storage_bytes", "Reads", "distinct_bytes"]

#: DRAM moves 32-byte sectors: a kernel reading one float of a sector moves all 32 bytes.
SECTOR = 32


@dataclass(frozen=True)
class Read:
    """Bytes ``[lo, hi)`` of a storage that a read may touch, and how many of them it does touch."""

    lo: int
    hi: int
    nbytes: int
    what: tuple = ()  # identifies the read, so that the same region read twice counts once


def distinct_bytes(t) -> int:
    """Bytes of the distinct elements ``t`` addresses: broadcast (stride-0) dims count once."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if size == 0:
            return 0
        if stride != 0:
            n *= size
    return n * t.element_size()


def _sector_bytes(t) -> int:
    """Bytes of the 32-byte sectors that ``t``'s distinct elements lie in (a lower bound).

    Dims are taken from the smallest stride up. While the gap between consecutive blocks is shorter
    than a sector, no sector lies wholly in a gap, so every sector of the merged block is touched;
    from the first wider gap on, blocks share no sector and each touches at least ceil(block / 32).
    A layout that is not nested (overlapping strides) falls back to its distinct bytes."""
    item = t.element_size()
    if any(s == 0 for s in t.shape):
        return 0
    dims = sorted((st * item, s) for s, st in zip(t.shape, t.stride()) if s > 1 and st != 0)
    run = extent = item
    blocks, merging = 1, True
    for stride, size in dims:
        if stride < extent:
            return distinct_bytes(t)
        if merging and stride - run < SECTOR:
            run += (size - 1) * stride
        else:
            merging = False
            blocks *= size
        extent += (size - 1) * stride
    return max(blocks * -(-run // SECTOR) * SECTOR, distinct_bytes(t))


def _span(t) -> tuple[int, int]:
    """[first byte, last byte + 1) that ``t`` touches in its storage."""
    if t.numel() == 0:
        return (0, 0)
    lo = t.storage_offset()
    hi = lo + sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if st > 0) + 1
    neg = sum((s - 1) * st for s, st in zip(t.shape, t.stride()) if st < 0)
    item = t.element_size()
    return ((lo + neg) * item, hi * item)


def _storage_nbytes(t) -> int | None:
    try:
        return int(t.untyped_storage().nbytes())
    except Exception:  # a storage whose size cannot be read: no cap
        return None


def tensor_read(t) -> Read:
    """The whole of ``t`` read: its sectors, never more than its storage."""
    lo, hi = _span(t)
    n = _sector_bytes(t)
    cap = _storage_nbytes(t)
    return Read(lo, hi, n if cap is None else min(n, cap),
                ("view", t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.element_size()))


def lookup_read(table, nbytes: int) -> Read:
    """A lookup of ``nbytes`` worth of rows in ``table``: which rows is unknown (the span is the
    table's), how many bytes at most the table's."""
    whole = tensor_read(table)
    return Read(whole.lo, whole.hi, min(whole.nbytes, nbytes), ("lookup", nbytes) + whole.what)


def storage_bytes(reads: list[Read], storage_nbytes: int | None = None) -> int:
    """Bytes of one storage that ``reads`` cover: one read its own bytes; several the union of their
    spans, capped by the sum of their bytes and the storage (exact for the common cases: the same
    tensor twice, disjoint slices, a tensor and its transpose)."""
    unique = list({r.what or id(r): r for r in reads}.values())
    if len(unique) == 1:
        total = unique[0].nbytes
    else:
        # cur_lo is only read once cur_hi is set, and the two are set together.
        union, cur_lo = 0, 0
        cur_hi: int | None = None
        for lo, hi in sorted((r.lo, r.hi) for r in unique):
            if cur_hi is None or lo > cur_hi:
                union += 0 if cur_hi is None else cur_hi - cur_lo
                cur_lo, cur_hi = lo, hi
            else:
                cur_hi = max(cur_hi, hi)
        union += 0 if cur_hi is None else cur_hi - cur_lo
        total = min(union, sum(r.nbytes for r in unique))
    return total if storage_nbytes is None else min(total, storage_nbytes)


class Reads:
    """What was read, per storage, each storage filed under the category it was first seen in."""

    def __init__(self) -> None:
        self.reads: dict[int, list[Read]] = defaultdict(list)
        self.category: dict[int, str] = {}
        self.nbytes: dict[int, int | None] = {}

    def add(self, key: int, category: str, read: Read, storage_nbytes: int | None) -> None:
        self.category.setdefault(key, category)
        self.nbytes.setdefault(key, storage_nbytes)
        self.reads[key].append(read)

    def add_tensor(self, key: int, category: str, t) -> None:
        self.add(key, category, tensor_read(t), _storage_nbytes(t))

    def bytes_by_category(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for key, reads in self.reads.items():
            out[self.category[key]] += storage_bytes(reads, self.nbytes[key])
        return out
