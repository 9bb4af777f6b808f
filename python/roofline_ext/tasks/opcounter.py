"""The dispatch mode that counts a forward pass: tensor-core FLOPs, SIMT FLOPs, and what it reads.

Every aten op of the forward pass reaches :meth:`_OpCounter.__torch_dispatch__` (fake tensors: only
shape functions run). It counts the op's FLOPs (``formulas``, with the pairs a mask keeps, see
masks.py) or its SIMT work (one per output element), and records the regions of pre-existing
storages (inputs, parameters, buffers, constants) that the op reads. While the model is built and
the inputs are made (``counting`` off) it only follows values, so that a ``tril`` buffer made in the
constructor is known as a mask in the forward pass.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable

from .formulas import attention_flops
from .masks import MaskTracker
from .opcounts import ZERO_WRITE, op_family
from .shortcuts import make_shortcuts
from .traffic import Reads, lookup_read, tensor_read

__all__ = ["make_op_counter", "NO_ARITHMETIC"]

# Ops that move or create data but compute nothing: no SIMT FLOPs. Views are recognised from their
# schema (OpOverload.is_view) and need not be listed; matrix products are counted in `flops` instead.
NO_ARITHMETIC = frozenset("""
    clone copy copy_ _copy_from _copy_from_and_resize _to_copy to contiguous detach detach_ alias
    lift lift_fresh lift_fresh_copy _unsafe_view view reshape _reshape_alias resize_ resize_as_ set_
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones
    ones_like new_ones full full_like new_full fill fill_ zero_ scalar_tensor arange linspace logspace
    eye rand rand_like randn randn_like randint randint_like randperm normal normal_ uniform_
    bernoulli bernoulli_ exponential_ random_ geometric_ cauchy_ log_normal_ tril_indices triu_indices
    cat stack hstack vstack constant_pad_nd reflection_pad1d reflection_pad2d reflection_pad3d
    replication_pad1d replication_pad2d replication_pad3d repeat repeat_interleave flip roll index
    index_select gather embedding take narrow_copy slice_scatter select_scatter as_strided_scatter
    diagonal_scatter index_put index_put_ split_with_sizes_copy unbind_copy pixel_shuffle
    pixel_unshuffle channel_shuffle native_channel_shuffle im2col _local_scalar_dense item
    sym_size sym_stride sym_numel sym_storage_offset _assert_async _assert_tensor_metadata
    _functional_assert_async _assert_scalar set_grad_enabled record_stream
""".split())

# Ops that read only their arguments' shapes, never their data (lift_fresh_copy: see _LIFTS).
_METADATA_ONLY = frozenset("""
    empty_like zeros_like ones_like full_like rand_like randn_like randint_like new_empty
    new_empty_strided new_zeros new_ones new_full resize_ resize_as_ _assert_tensor_metadata
    record_stream lift_fresh_copy
""".split())

# In-place ops that overwrite their first argument without reading it.
_WRITE_ONLY_SELF = frozenset("""
    copy_ fill_ zero_ normal_ uniform_ random_ bernoulli_ exponential_ geometric_ cauchy_ log_normal_
    masked_fill_ index_fill_ index_copy_ index_put_ scatter_ masked_scatter_ set_
""".split())

# Lookups read the rows their indices name, not the whole table (``traffic.lookup_read``).
_LOOKUPS = frozenset({"embedding", "index_select", "gather", "take", "index", "_embedding_bag", "embedding_bag",
                      # the negative log-likelihood reads one input element per target, not the
                      # whole input (an H200 kernel read 32768 of 4096-wide rows in 0.038 ms, where
                      # the full input's floor was 0.099 ms: KernelBench level1/95, 2026-12-02)
                      "nll_loss_forward", "nll_loss2d_forward"})

# Attention kernels: (query, key, value) first; where is_causal is, and the mask argument (an index
# or a keyword).
ATTENTION = {
    "_scaled_dot_product_flash_attention_for_cpu": (4, "attn_mask"),
    "_scaled_dot_product_flash_attention": (4, None),
    "_scaled_dot_product_efficient_attention": (6, 3),
    "_scaled_dot_product_cudnn_attention": (6, 3),
}


# Ops that return their input's storage under another shape without being views by their schema.
ALIAS_OPS = frozenset({"_unsafe_view", "_reshape_alias"})
# A literal that Python made in forward (torch.tensor(0.0)) enters as lift_fresh: made, not read.
_LIFTS = frozenset({"lift_fresh", "lift_fresh_copy"})


def _lookup_elements(name: str, args: tuple, out) -> int:
    """Elements a lookup reads from its table: one per output element, but a bag reads a row per index."""
    if name in ("_embedding_bag", "embedding_bag"):
        table, indices = args[0], args[1]
        return indices.numel() * (table.numel() // max(1, int(table.shape[0])))
    if name.startswith("nll_loss"):  # (input, target, ...): one element per target, the output may be a scalar
        return int(args[1].numel())
    return out.numel()


class _Family:
    """One call of a family function (opcounts.FAMILY_FUNCTIONS) while its aten ops run: one row for
    all of them, made at the first op that is not a view (a call that dispatches none, such as
    dropout in eval mode, gets no row), and the call's own traffic gathered from its ops."""

    __slots__ = ("name", "index", "before", "produced", "reads", "writes", "keep")

    def __init__(self, name: str, before: set[int]) -> None:
        self.name, self.before = name, before
        self.index: int | None = None
        self.produced: set[int] = set()  # storages its ops made: temporaries unless returned
        self.reads: dict[int, tuple[list, int | None]] = {}
        self.writes: dict[int, int] = {}
        self.keep: list = []  # the temporaries, alive so that no address is reused during the call

    def add(self, reads: dict[int, tuple[list, int | None]], writes: dict[int, int], outputs: list) -> None:
        for k, (rs, n) in reads.items():
            if k not in self.produced:  # reading its own temporary is no traffic of the call
                self.reads.setdefault(k, ([], n))[0].extend(rs)
        for k, b in writes.items():
            self.writes[k] = max(self.writes.get(k, 0), b)
        for k, o in outputs:
            if k not in self.before and k not in self.reads:
                self.produced.add(k)
                self.keep.append(o)

    def traffic(self, returned: set[int]) -> tuple[dict[int, tuple[list, int | None]], dict[int, int]]:
        """What the call reads and writes: its temporaries are neither; what it returns or overwrites
        of what existed before it is written."""
        writes = {k: b for k, b in self.writes.items() if k in returned or k not in self.produced}
        return self.reads, writes


def _nbytes(t) -> int | None:
    try:
        return int(t.untyped_storage().nbytes())
    except Exception:  # a storage whose size cannot be read: no cap
        return None


def run_if_not_counted(mode, func, args: tuple, kwargs: dict) -> tuple[bool, Any]:
    """The first step of every per-op dispatch mode (this counter, and the profiler's numbering in
    tasks/opranges.py), shared so that both see the same ops in the same order:
    ``(True, result)`` for an op that is not counted itself, ``(False, None)`` for one that is.

    prim ops (prim.device, prim.layout) are metadata queries: run as they are. Under
    torch.inference_mode (a task may decorate forward with it) composite ops such as aten.matmul or
    aten.linear reach the mode whole, not decomposed into mm/addmm as they are otherwise: they are
    decomposed here, under the mode, as FlopCounterMode does, so that the same ops are seen (and a
    matmul is not counted as SIMT work) either way."""
    if func.namespace == "prim":
        return True, func(*args, **kwargs)
    if not func._can_decompose():  # what decompose() would find: no need to enter the mode to be told
        return False, None
    with mode:
        decomposed = func.decompose(*args, **kwargs)
    if decomposed is not NotImplemented:
        return True, decomposed
    return False, None


def make_op_counter(formulas: dict, key: Callable[[Any], int]):
    """Build the TorchDispatchMode (defined lazily: torch is imported only when counting).

    ``formulas``: packet -> f(args, kwargs, out), the tensor-core FLOPs of an op; ``key``: a tensor's
    storage identity. Set ``sources`` (storage -> "input" or "param") and ``counting`` before forward."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _OpCounter(_OpCounterBase, TorchDispatchMode):
        pass

    return _OpCounter(formulas, key)


class _OpCounterBase:
    def __init__(self, formulas: dict, key: Callable[[Any], int]) -> None:
        import torch
        from torch.utils._pytree import tree_leaves

        super().__init__()  # TorchDispatchMode's, next in the subclass's order
        self._formulas, self._key, self._torch, self._leaves = formulas, key, torch, tree_leaves
        self._Tensor = torch.Tensor
        self._shortcuts = make_shortcuts(getattr(key, "fake_mode", None))  # key: counting._StorageKey
        self.counting = False
        self.sources: dict[int, str] = {}
        self.calls: dict[str, int] = defaultdict(int)
        self.flops: dict[str, int] = defaultdict(int)
        self.simt: dict[str, int] = defaultdict(int)
        self.produced: set[int] = set()
        # The storages of produced tensors are keyed by address: each is kept alive for the
        # count, or a freed temporary's address could be reused by a parameter read later, which
        # would then pass for produced (KernelBench L2 83 counted 5376 or 5380 parameter bytes
        # depending on what ran before it). Fake tensors hold no data, so keeping them is cheap.
        self._keep_produced: list = []
        self.reads = Reads()
        self.masks = MaskTracker(key, self.adjust)
        # Per-op counting (opcounts.OpRecorder), off unless set: the rows of each op, and the
        # unfused traffic per op name, kept apart from the rows so that the two can be checked.
        self.recorder: Any = None  # an opcounts.OpRecorder
        self.read_by_name: dict[str, int] = defaultdict(int)
        self.write_by_name: dict[str, int] = defaultdict(int)
        self.family: _Family | None = None  # the family call running (per-op counting only)
        # FlopCounterMode's registry (packet -> formula) while forward runs, else None, and what it
        # counts: what torch.utils.flop_counter.FlopCounterMode, entered under this mode, would count
        # (counting.py). That mode sees exactly the ops this one passes on (func(*args): not the
        # ones decomposed here, not those a shortcut answers) and counts those in its registry with
        # formula(*args, **kwargs, out_val=out), keyed by packet; so is it done here, one dispatch
        # mode and its module hooks fewer per op.
        self.fc_registry: dict | None = None
        self.fc_counts: dict[Any, int] = defaultdict(int)

    def adjust(self, bucket: str, op: str, delta: int, index: int | None = None) -> None:
        (self.flops if bucket == "flops" else self.simt)[op] += delta
        if self.recorder is not None and index is not None:
            self.recorder.work(index, bucket, delta)

    def mark_read(self, t) -> None:
        """``t`` is read in full (the RNN shortcut runs on a part of it)."""
        if isinstance(t, self._Tensor):
            self._read(t)

    def _read(self, t, read=None) -> None:
        k = self._key(t)
        if k in self.produced:
            return
        category = "input" if self.sources.get(k) == "input" else "param"
        if read is None:
            self.reads.add_tensor(k, category, t)
        else:
            self.reads.add(k, category, read, int(t.untyped_storage().nbytes()))

    def _note_reads(self, name: str, args: tuple, kwargs: dict, out) -> None:
        if name in _METADATA_ONLY:
            return
        tensors = [a for a in self._leaves((args, kwargs)) if isinstance(a, self._Tensor)]
        if name in _WRITE_ONLY_SELF and args and isinstance(args[0], self._Tensor):
            tensors = tensors[1:]
        if name in _LOOKUPS and args and isinstance(args[0], self._Tensor) and tensors and tensors[0] is args[0]:
            table = tensors.pop(0)
            self._read(table, lookup_read(table, _lookup_elements(name, args, out) * table.element_size()))
        for t in tensors:
            self._read(t)

    # --- op families (opcounts.FAMILY_FUNCTIONS): the torch-function layer calls these ------

    def begin_family(self, name: str, args: tuple, kwargs: dict) -> Any:
        """A family function is called: its aten ops are one row (per-op counting only). Returns
        what :meth:`end_family` restores (calls do not nest: the function layer is off inside)."""
        previous = self.family
        if self.counting and self.recorder is not None and previous is None:
            before = {self._key(t) for t in self._leaves((args, kwargs)) if isinstance(t, self._Tensor)}
            self.family = _Family(name, before)
        return previous

    def end_family(self, previous: Any, out) -> None:
        fam, self.family = self.family, previous
        if fam is None or fam is previous or fam.index is None:
            return
        returned = {self._key(o) for o in self._leaves(out) if isinstance(o, self._Tensor)}
        reads, writes = fam.traffic(returned)
        read, write = self.recorder.traffic(fam.index, reads, writes)
        self.read_by_name[fam.name] += read
        self.write_by_name[fam.name] += write

    def _row(self, name: str, args: tuple) -> int:
        """The per-op row of a non-view op: its family call's one row, or a row of its own."""
        fam = self.family
        if fam is None:
            return self.recorder.begin(op_family(name, args))
        if fam.index is None:
            fam.index = self.recorder.begin(fam.name)
        return int(fam.index)

    def _own_traffic(self, index: int, name: str, args: tuple, kwargs: dict, out, first) -> None:
        """The op's own reads and writes, as a kernel of its own would move them (opcounts); inside
        a family call, gathered for the call instead."""
        reads, writes = self._op_traffic(name, args, kwargs, out, first)
        if self.family is not None:
            outputs = [(self._key(o), o) for o in self._leaves(out) if isinstance(o, self._Tensor)]
            self.family.add(reads, writes, outputs)
            return
        read, write = self.recorder.traffic(index, reads, writes)
        self.read_by_name[name] += read
        self.write_by_name[name] += write

    def _op_traffic(self, name: str, args: tuple, kwargs: dict, out, first):
        reads: dict[int, tuple[list, int | None]] = {}
        if name not in _METADATA_ONLY and name not in _LIFTS:
            tensors = [a for a in self._leaves((args, kwargs)) if isinstance(a, self._Tensor)]
            if name in _WRITE_ONLY_SELF and args and isinstance(args[0], self._Tensor):
                tensors = tensors[1:]
            if name in _LOOKUPS and args and isinstance(args[0], self._Tensor) and tensors and tensors[0] is args[0]:
                table = tensors.pop(0)
                nbytes = _lookup_elements(name, args, first) * table.element_size()
                reads.setdefault(self._key(table), ([], _nbytes(table)))[0].append(lookup_read(table, nbytes))
            for t in tensors:
                reads.setdefault(self._key(t), ([], _nbytes(t)))[0].append(tensor_read(t))
        writes: dict[int, int] = {}
        if name not in ZERO_WRITE:
            for o in self._leaves(out):
                if isinstance(o, self._Tensor):
                    k = self._key(o)
                    writes[k] = max(writes.get(k, 0), tensor_read(o).nbytes)
        return reads, writes

    def _mark_produced(self, out) -> None:
        for o in self._leaves(out):
            if isinstance(o, self._Tensor):
                k = self._key(o)
                if k not in self.sources and k not in self.reads.category:
                    self.produced.add(k)
                    self._keep_produced.append(o)

    def _attention(self, name: str, args: tuple, kwargs: dict) -> int:
        causal_at, mask_at = ATTENTION[name]
        q, k, v = args[0], args[1], args[2]
        causal = bool(args[causal_at]) if len(args) > causal_at else bool(kwargs.get("is_causal", False))
        if isinstance(mask_at, int):
            mask = args[mask_at] if len(args) > mask_at else kwargs.get("attn_bias")
        else:
            mask = kwargs.get(mask_at) if mask_at else None
        pairs = self.masks.attention_pairs(q, k, causal, mask if isinstance(mask, self._Tensor) else None)
        softmax = int(self._torch.Size(q.shape[:-2]).numel()) * pairs  # the softmax, per kept score
        self.adjust("simt", name, softmax, self.masks.current if self.recorder is not None else None)
        return attention_flops(q, k, v, pairs)

    def _work(self, func, name: str, args: tuple, kwargs: dict, first) -> tuple[str | None, int]:
        packet = func._overloadpacket
        if name in ATTENTION:
            return "flops", self._attention(name, args, kwargs)
        if packet in self._formulas:
            flops = int(self._formulas[packet](args, kwargs, first))
            fraction = self.masks.matmul_fraction(name, args)
            if fraction is not None:
                flops = flops * fraction[0] // fraction[1]
                self.masks.note(f"{name}: an operand that the mask zeroed keeps {fraction[0]} of "
                                f"{fraction[1]} entries per matrix: only their multiply-adds are counted")
            return "flops", flops
        if name in NO_ARITHMETIC:
            return None, 0
        return "simt", first.numel()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handled, value = run_if_not_counted(self, func, args, kwargs)
        if handled:
            return value
        name = func._overloadpacket.__name__
        is_view = func.is_view or name in ALIAS_OPS
        pre = None if is_view else self.masks.before(name, args)
        shortcut = self._shortcuts.get(func)
        out = shortcut(args, kwargs) if shortcut is not None else None
        if out is None:  # no shortcut for this op, or none for these arguments (shortcuts.py)
            out = func(*args, **kwargs)
            if self.fc_registry is not None:
                formula = self.fc_registry.get(func._overloadpacket)
                if formula is not None:
                    self.fc_counts[func._overloadpacket] += formula(*args, **kwargs, out_val=out)
        first = next((o for o in self._leaves(out) if isinstance(o, self._Tensor)), None)
        index = None
        if self.counting and self.recorder is not None and not is_view:
            index = self.masks.current = self._row(name, args)
            self._own_traffic(index, name, args, kwargs, out, first)
        if self.counting:
            self.calls[name] += 1
            if not is_view:
                self._note_reads(name, args, kwargs, first)
            if not is_view or name in _LIFTS:
                self._mark_produced(out)
        if first is None or is_view:
            return out  # a view shares its base's storage, and what is known about it
        if not self.counting:
            self.masks.after(name, args, kwargs, first, pre)
            return out
        bucket, work = self._work(func, name, args, kwargs, first)
        kept = self.masks.after(name, args, kwargs, first, pre, work, bucket)
        if bucket is not None:
            (self.flops if bucket == "flops" else self.simt)[name] += kept
            if index is not None:
                self.recorder.work(index, bucket, kept)
        return out
