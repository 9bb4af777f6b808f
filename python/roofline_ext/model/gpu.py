"""Which GPU an analysis is for: the ``--gpu`` name, the local GPU, or the default SKU.

Analysis needs no GPU; a GPU of this machine adds its derived roof and its own calibration (looked
up by UUID, so a host with two cards of one model never reads the other card's roofs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..device import listing, status
from ..errors import UserError
from ..peaks.datasheet import DEFAULT_SKU, known_names, lookup


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
    """The first GPU of this machine (a ``roofline_ext.device.listing.Device``), or None.

    Any failure of GPU detection (module missing, no native core, NVML trouble) means "no local
    GPU": analysis needs no GPU, so detection must never be what stops it. Devices NVML sees count
    even when this build cannot *measure* them: analysis only needs the name and attributes.
    """
    try:
        found = listing.devices()
    except Exception:
        return None
    return found[0] if found else None


def _no_gpu_reason() -> str:
    try:
        return status.availability().reason.value.replace("_", " ")
    except Exception:
        return "GPU detection unavailable"


def resolve_gpu(name: str | None = None) -> GpuChoice:
    """The GPU ``--gpu NAME`` names, or by default the local GPU, or with none ``DEFAULT_SKU``.

    An unknown ``name`` is a ``UserError`` listing the known SKUs, unless it is the name of a GPU of
    this machine (then its derived roof still applies).
    """
    local = local_device()
    if name is not None:
        sheet = lookup(name)
        local_match = None
        if local is not None:
            same_sku = sheet is not None and lookup(local.name) is sheet
            same_name = str(local.name).strip().lower() == name.strip().lower()
            if same_sku or same_name:
                local_match = local
        if local_match is not None:
            shown = local_match.name
        elif sheet is not None:
            shown = sheet.full_name
        else:
            raise UserError(f"unknown GPU {name!r}; known: {', '.join(known_names())}")
        return GpuChoice(shown, sheet, local_match, "flag")
    if local is not None:
        return GpuChoice(local.name, lookup(local.name), local, "local")
    sheet = lookup(DEFAULT_SKU)
    assert sheet is not None  # DEFAULT_SKU is one of the table's own names
    note = (
        f"no local GPU ({_no_gpu_reason()}): analyzing against the {DEFAULT_SKU} datasheet "
        f"({sheet.full_name}); choose another with --gpu NAME (known names: roofline-ext peaks)"
    )
    return GpuChoice(sheet.full_name, sheet, None, "default", note)
