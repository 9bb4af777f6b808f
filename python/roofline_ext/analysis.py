"""Analysis of task files against a GPU's roofs: one task (:func:`analyze_task`) or a folder of them
(:func:`analyze_batch`), without running anything on a GPU.

Kept apart from the CLI so that timing (``--time``/``--new``) can add ``t_ref_ms``/``t_new_ms`` to
:func:`analyze_task` and reuse the batch loop unchanged.

Task files are user code and run in this process when loaded (see :mod:`roofline_ext.tasks`).
Each task's failure becomes a result with ``status: "error"`` and a one-line ``error``; the batch
goes on, and each result is written to the output files as soon as it exists (temp file +
``os.replace``), so an interrupted batch keeps every task finished before the interruption.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import sys
import tempfile
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .errors import RooflineError, UserError

__all__ = [
    "GpuChoice",
    "resolve_gpu",
    "analyze_task",
    "analyze_batch",
    "ResultsWriter",
    "CSV_COLUMNS",
    "local_device",
    "measured_peaks_for",
]

REGIMES = ("burst", "sustained")


# --- which GPU ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GpuChoice:
    """The GPU an analysis is for.

    ``name``: what results call it (the device's name, or the SKU's full name); ``sheet``: its
    datasheet entry or None; ``device``: the local device record when it is a GPU of this machine
    (gives the derived roof); ``source``: ``"local"``, ``"flag"`` (``--gpu``) or ``"default"``;
    ``note``: the line to tell the user when the default was taken.
    """

    name: str
    sheet: Any | None
    device: Any | None
    source: str
    note: str | None = None


def local_device() -> Any | None:
    """The first GPU of this machine (a ``roofline_ext.devices.Device``), or None.

    Any failure of GPU detection (module missing, no native core, NVML trouble) means "no local
    GPU": analysis needs no GPU, so detection must never be what stops it. Devices NVML sees count
    even when this build cannot *measure* them: analysis only needs the name and attributes.
    """
    try:
        from .devices import devices

        found = devices()
    except Exception:
        return None
    return found[0] if found else None


def _no_gpu_reason() -> str:
    try:
        from .availability import availability

        return availability().reason.value.replace("_", " ")
    except Exception:
        return "GPU detection unavailable"


def resolve_gpu(name: str | None = None) -> GpuChoice:
    """The GPU ``--gpu NAME`` names, or by default the local GPU, or with none ``DEFAULT_SKU``.

    An unknown ``name`` is a ``UserError`` listing the known SKUs, unless it is the name of a GPU of
    this machine (then its derived roof still applies).
    """
    from .datasheet import DEFAULT_SKU, known_names, lookup

    local = local_device()
    if name is not None:
        sheet = lookup(name)
        local_match = None
        if local is not None:
            same_sku = sheet is not None and lookup(local.name) is sheet
            same_name = str(local.name).strip().lower() == name.strip().lower()
            if same_sku or same_name:
                local_match = local
        if sheet is None and local_match is None:
            raise UserError(f"unknown GPU {name!r}; known: {', '.join(known_names())}")
        shown = local_match.name if local_match is not None else sheet.full_name
        return GpuChoice(shown, sheet, local_match, "flag")
    if local is not None:
        return GpuChoice(local.name, lookup(local.name), local, "local")
    sheet = lookup(DEFAULT_SKU)
    note = (
        f"no local GPU ({_no_gpu_reason()}): analyzing against the {DEFAULT_SKU} datasheet "
        f"({sheet.full_name}); choose another with --gpu NAME (known names: roofline-ext peaks)"
    )
    return GpuChoice(sheet.full_name, sheet, None, "default", note)


def measured_peaks_for(gpu_name: str, regime: str = "burst", uuid: str | None = None) -> Mapping[str, float] | None:
    """Calibrated peaks for ``gpu_name`` from the calibration cache, or None.

    The single hook between analysis and calibration: None when the calibration module is absent
    or nothing is cached for this GPU.
    """
    try:
        from .calibration import cached_peaks
    except ImportError:
        return None
    if uuid:
        # This very card's calibration when it has one (a host with several of one model).
        peaks = cached_peaks(uuid=uuid, regime=regime)
        if peaks is not None:
            return peaks
    return cached_peaks(gpu_name=gpu_name, regime=regime)


# --- one task ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def _task_sandbox():
    """What a task may change and we put back: stdout (task prints must not corrupt JSON on stdout;
    they go to stderr), warnings (torch's chatter about the task is not ours to show), torch's
    default dtype (a task that calls torch.set_default_dtype must not change the next one)."""
    torch = sys.modules.get("torch")
    default_dtype = torch.get_default_dtype() if torch is not None else None
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.set_default_dtype(default_dtype or torch.float32)


def _roof_dtype(counts) -> tuple[str, str | None]:
    """dtype for the compute roof, and a note when it is a stand-in."""
    if counts.compute_dtype is not None:
        note = None
        if counts.dtype == "mixed":
            note = (f"mixed dtypes {', '.join(counts.dtypes)}: the {counts.compute_dtype} roof "
                    "(the fastest present) is used, so the floor stays a floor")
        return counts.compute_dtype, note
    return "torch.float32", "no floating-point tensors: the float32 roof is used"


def analyze_task(
    path: str | os.PathLike,
    gpu: GpuChoice | str | None = None,
    dtype: str | None = None,
    *,
    regime: str = "burst",
    strict_fp32: bool = False,
    t_ref_ms: float | None = None,
    t_new_ms: float | None = None,
    measured: Mapping[str, float] | None | bool = True,
    include_ops: bool = True,
) -> dict[str, Any]:
    """Count a task file and put it on the GPU's roofs. Returns a JSON-ready dict.

    ``gpu``: a :class:`GpuChoice`, a name (as ``--gpu``), or None for the default. ``dtype``:
    ``fp32|fp16|bf16`` casts model and inputs first. ``t_ref_ms``/``t_new_ms``: times measured
    elsewhere (the timing layer), giving ``ref_roofline_frac``/``roofline_frac``. ``measured``:
    True looks up the calibration cache for this GPU and ``regime``; a mapping is used as is;
    None/False means no measured roof. Raises ``TaskError`` for a bad task file.
    """
    from .counting import count_task, require_torch
    from .roofline import roofline
    from .tasks import load_task

    if regime not in REGIMES:
        raise UserError(f"unknown regime {regime!r}; choose one of: {', '.join(REGIMES)}")
    choice = gpu if isinstance(gpu, GpuChoice) else resolve_gpu(gpu)
    require_torch()  # before the task's own `import torch` fails with a less helpful message

    with _task_sandbox():
        task = load_task(path)
        try:
            counts = count_task(task, dtype)
        finally:
            task.unload()

    derived = None
    if choice.device is not None:
        try:
            from .derived import derived_peaks_for_device

            derived = derived_peaks_for_device(choice.device)
        except Exception:  # a device record without attributes: no derived roof, not an error
            derived = None
    if measured is True:
        measured = measured_peaks_for(choice.name, regime, getattr(choice.device, "uuid", None))
    elif measured is False:
        measured = None

    roof_dtype, dtype_note = _roof_dtype(counts)
    r = roofline(
        counts.flops, counts.bytes, roof_dtype, choice.sheet if choice.sheet is not None else choice.name,
        t_ref_ms, t_new_ms, simt_flops=counts.simt_flops, strict_fp32=strict_fp32,
        derived=derived, measured=measured,
    )
    notes = list(counts.notes)
    if dtype_note:
        notes.append(dtype_note)
    if r is None:
        notes.append("no roofline: nothing is read or written, or no peaks are known for this GPU")

    result: dict[str, Any] = {
        "task": counts.task,
        "path": counts.path,
        "status": "ok",
        "model": counts.model,
        "has_model_new": counts.has_model_new,
        "flops": counts.flops,
        "simt_flops": counts.simt_flops,
        "bytes": counts.bytes,
        "input_bytes": counts.input_bytes,
        "param_bytes": counts.param_bytes,
        "output_bytes": counts.output_bytes,
        "dtype": counts.dtype,
        "dtypes": counts.dtypes,
        "compute_dtype": roof_dtype,
        "cast": counts.cast,
        "arithmetic_intensity": counts.arithmetic_intensity,
        "inputs": counts.inputs,
        "outputs": counts.outputs,
        "gpu": choice.name,
        "gpu_source": choice.source,
        "sku": choice.sheet.name if choice.sheet is not None else None,
        "regime": regime,
        "strict_fp32": strict_fp32,
        "t_min_ms": r["t_min_ms"] if r else None,
        "bound": r["bound"] if r else None,
        "primary_roof": r["primary_roof"] if r else None,
        "compute_unit": r["unit"] if r else None,
        "roofs": r["roofs"] if r else {"datasheet": None, "derived": None, "measured": None},
        "t_ref_ms": t_ref_ms,
        "t_new_ms": t_new_ms,
        "ref_roofline_frac": r.get("ref_roofline_frac") if r else None,
        "roofline_frac": r.get("roofline_frac") if r else None,
        "impossible": bool(r and r["impossible"]),
        "count_seconds": counts.seconds,
        "notes": notes,
    }
    if include_ops:
        result["by_op"] = counts.by_op
    # The roofline() dict itself, for describe(); not JSON output (it repeats the fields above).
    result["_roofline"] = r
    return result


def public(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result without its private keys (``_roofline``): what goes into JSON."""
    return {k: v for k, v in result.items() if not k.startswith("_")}


def error_result(path: str | os.PathLike, exc: BaseException) -> dict[str, Any]:
    """The record of a task that failed: its one-line reason and the step that failed."""
    kind = getattr(exc, "kind", None)
    if kind is None:
        kind = "error" if isinstance(exc, RooflineError) else "internal"
    message = " ".join(str(exc).split()) or type(exc).__name__
    if kind == "internal":
        message = f"{type(exc).__name__}: {message}"
    return {"task": Path(path).stem, "path": str(path), "status": "error", "error_kind": kind,
            "error": message}


# --- output files -----------------------------------------------------------------------------------

CSV_COLUMNS = (
    "task", "path", "status", "error_kind", "error", "flops", "simt_flops", "bytes", "input_bytes",
    "param_bytes", "output_bytes", "dtype", "compute_dtype", "arithmetic_intensity", "gpu", "regime",
    "t_min_ms", "bound",
    "datasheet_t_min_ms", "datasheet_bound", "datasheet_compute_tflops", "datasheet_bandwidth_tbps",
    "derived_t_min_ms", "derived_bound", "measured_t_min_ms", "measured_bound", "count_seconds",
)


def _csv_row(result: Mapping[str, Any]) -> dict[str, Any]:
    row = {k: result.get(k) for k in CSV_COLUMNS if k in result}
    for roof_name, roof in (result.get("roofs") or {}).items():
        if roof:
            for key in ("t_min_ms", "bound", "compute_tflops", "bandwidth_tbps"):
                col = f"{roof_name}_{key}"
                if col in CSV_COLUMNS:
                    row[col] = roof.get(key)
    return {k: ("" if row.get(k) is None else row[k]) for k in CSV_COLUMNS}


def _write_atomic(path: Path, text: str) -> None:
    # Temp file in the same folder + os.replace: a reader (or a crash) sees the old file or the new
    # one, never half of one.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def summarize(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    failed = [r for r in results if r.get("status") != "ok"]
    return {
        "total": len(results),
        "ok": len(results) - len(failed),
        "failed": len(failed),
        "failures": [{"task": r["task"], "path": r["path"], "error_kind": r.get("error_kind"),
                      "error": r.get("error")} for r in failed],
    }


class ResultsWriter:
    """Rewrites the JSON and/or CSV file after every result, atomically.

    The JSON file is one object: ``{"gpu", "regime", "dtype", "complete", "summary", "tasks": [...]}``;
    ``complete`` turns true only when the batch finished, so a file left by an interrupted batch
    says so. The CSV file has one row per task (:data:`CSV_COLUMNS`).
    """

    def __init__(self, json_path: str | os.PathLike | None = None, csv_path: str | os.PathLike | None = None,
                 meta: Mapping[str, Any] | None = None) -> None:
        self.json_path = Path(json_path) if json_path else None
        self.csv_path = Path(csv_path) if csv_path else None
        self.meta = dict(meta or {})
        self.results: list[dict[str, Any]] = []

    def document(self, complete: bool) -> dict[str, Any]:
        return {**self.meta, "complete": complete, "summary": summarize(self.results),
                "tasks": [public(r) for r in self.results]}

    def add(self, result: Mapping[str, Any]) -> None:
        self.results.append(dict(result))
        self.flush(complete=False)

    def flush(self, complete: bool) -> None:
        if self.json_path:
            _write_atomic(self.json_path, json.dumps(self.document(complete), indent=1, default=str) + "\n")
        if self.csv_path:
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=list(CSV_COLUMNS), lineterminator="\n")
            w.writeheader()
            for r in self.results:
                w.writerow(_csv_row(r))
            _write_atomic(self.csv_path, buf.getvalue())


# --- progress ---------------------------------------------------------------------------------------

class _Progress:
    """A progress bar on stderr: rich's when it is importable, else a one-line counter."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total, self.done, self.enabled = total, 0, enabled
        self._rich = None
        if not enabled:
            return
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        except ImportError:
            return
        self._rich = Progress(
            TextColumn("[bold]analyze"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.description}"), console=Console(file=sys.stderr), transient=False,
        )
        self._id = self._rich.add_task("", total=total)

    def __enter__(self) -> "_Progress":
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._rich is not None:
            self._rich.stop()
        elif self.enabled and self.total and sys.stderr.isatty():
            sys.stderr.write("\n")

    def start(self, name: str) -> None:
        if self._rich is not None:
            self._rich.update(self._id, description=name)

    def advance(self, name: str) -> None:
        self.done += 1
        if self._rich is not None:
            self._rich.update(self._id, advance=1, description=name)
        elif self.enabled and sys.stderr.isatty():
            sys.stderr.write(f"\ranalyze [{self.done}/{self.total}] {name[:60]:<60}")
            sys.stderr.flush()


# --- a batch ----------------------------------------------------------------------------------------

def analyze_batch(
    paths: Iterable[str | os.PathLike],
    gpu: GpuChoice | str | None = None,
    dtype: str | None = None,
    *,
    regime: str = "burst",
    strict_fp32: bool = False,
    writer: ResultsWriter | None = None,
    progress: bool = True,
    debug: bool = False,
    measured: Mapping[str, float] | None | bool = True,
    analyze: Callable[..., dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Analyze every task file in ``paths``; a failing task becomes an error result, never a stop.

    Each result goes to ``writer`` (if given) as soon as it exists. ``debug`` prints each failure's
    traceback on stderr (the batch still goes on). ``measured`` as for :func:`analyze_task`, looked
    up once for the whole batch. ``analyze`` replaces :func:`analyze_task` (same
    signature), for callers that add timing. Ctrl-C stops the batch; results so far are kept.
    """
    paths = [Path(p) for p in paths]
    choice = gpu if isinstance(gpu, GpuChoice) else resolve_gpu(gpu)
    analyze = analyze or analyze_task
    # Measured peaks are per GPU, not per task: look them up once.
    if measured is True:
        measured = measured_peaks_for(choice.name, regime, getattr(choice.device, "uuid", None))
    elif measured is False:
        measured = None
    results: list[dict[str, Any]] = []
    with _Progress(len(paths), enabled=progress) as bar:
        for p in paths:
            bar.start(p.name)
            try:
                result = analyze(p, choice, dtype, regime=regime, strict_fp32=strict_fp32, measured=measured)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # SystemExit from a task too; only Ctrl-C ends a batch
                if debug:
                    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
                result = error_result(p, exc)
            results.append(result)
            if writer is not None:
                writer.add(result)
            bar.advance(p.name)
    return results
