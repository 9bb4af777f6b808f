"""What a healthy card of each SKU reaches in ``roofline-ext check``: the per-SKU reference.

``check`` compares its quick measurement with the card's own calibration and with this table. A
reference figure is either *measured*: what ``roofline-ext calibrate`` reached on a healthy card
of that SKU with the same kernels (the source says where), or *datasheet-derived*: NVIDIA's figure
times the fraction our kernels reach on the parts we have measured (``DATASHEET_FRACTIONS``), for
SKUs not measured yet. Host-link references are a fraction of the link's theoretical rate, so they
follow the link rather than the SKU. Pure data: no device.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .datasheet import lookup

#: The metrics ``check`` measures, in report order, with their rate units.
CHECK_METRICS: dict[str, str] = {
    "hbm_read": "TB/s", "hbm_copy": "TB/s", "fp32": "TFLOP/s", "bf16": "TFLOP/s", "h2d": "GB/s", "d2h": "GB/s",
}
#: How each metric reads in tables.
METRIC_LABELS: dict[str, str] = {
    "hbm_read": "HBM read", "hbm_copy": "HBM copy", "fp32": "FP32", "bf16": "BF16", "h2d": "host->device",
    "d2h": "device->host",
}

#: Of the datasheet figure, what the verified kernels reached on an H200 (2026-11-30, README):
#: read 4.61 / 4.8, copy 4.32 / 4.8, FP32 65.6 / 66.9, BF16 946 / 989.4. Rounded down a little so that
#: a part we have not measured is not held to the best card we had.
DATASHEET_FRACTIONS: dict[str, float] = {"hbm_read": 0.93, "hbm_copy": 0.87, "fp32": 0.95, "bf16": 0.92}
_DATASHEET_KEYS = {"hbm_read": "bandwidth_tbps", "hbm_copy": "bandwidth_tbps", "fp32": "fp32", "bf16": "bf16"}

#: Of the link's theoretical rate (peaks/link_rate.py), what pinned copies reach on a healthy link:
#: packet headers and flow control take 10-15% of PCIe, so 0.85 of the line rate is a healthy card.
HOSTLINK_FRACTION = 0.85


@dataclass(frozen=True)
class Reference:
    """The reference figures of one SKU and where they come from."""

    sku: str
    values: Mapping[str, float]
    source: str
    kind: str  # "measured" | "datasheet-derived"
    notes: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"sku": self.sku, "values": dict(self.values), "source": self.source, "kind": self.kind,
                "notes": self.notes}


_MEASURED: dict[str, Reference] = {
    "H200": Reference(
        "H200", {"hbm_read": 4.61, "hbm_copy": 4.30, "fp32": 65.6, "bf16": 946.0},
        source="roofline-ext calibrate on an NVIDIA H200 SXM 141GB, driver 580.159.04, CUDA 13.0, "
        "2026-11-30 (README, 'What the H200 measured')",
        kind="measured",
        notes="burst figures: HBM read and copy at 4 GiB buffers, FP32 SIMT, BF16 wgmma"),
}


def reference_for(gpu_name: str | None) -> Reference | None:
    """The reference of the SKU ``gpu_name`` names: measured where we have it, else derived from the
    datasheet; None for a part the datasheet table does not know."""
    sheet = lookup(gpu_name) if gpu_name else None
    if sheet is None:
        return None
    if sheet.name in _MEASURED:
        return _MEASURED[sheet.name]
    values = {}
    for metric, frac in DATASHEET_FRACTIONS.items():
        key = _DATASHEET_KEYS[metric]
        v = sheet.bandwidth_tbps if key == "bandwidth_tbps" else sheet.peak(key)
        if v:
            values[metric] = round(v * frac, 4)
    return Reference(sheet.name, values, source=f"NVIDIA datasheet of the {sheet.name} x the fractions "
                     "our kernels reach on an H200 (peaks/reference.py DATASHEET_FRACTIONS)",
                     kind="datasheet-derived", notes="not measured on this SKU: a looser reference")
