"""The host link's theoretical rate: PCIe from generation x width, NVLink-C2C from the part.

Pure arithmetic and a small table, no device. Per direction, in GB/s (10^9 bytes/s):

    PCIe   GB/s = per-lane rate [GT/s] x lanes x encoding efficiency / 8 bits per byte

with the encoding of each generation (8b/10b up to Gen 2, 128b/130b for Gen 3-5, 242B/256B FLIT
for Gen 6, whose PAM4 symbols carry 64 GT/s). Gen 5 x16: 32 x 16 x 128/130 / 8 = 63.0 GB/s. This
counts the line code only: packet headers and flow control cost another 10-15% on real transfers,
which is why pinned copies top out near 85-90% of it.

Grace Hopper and Grace Blackwell attach the GPU over NVLink-C2C instead, 450 GB/s per direction
(NVIDIA's 900 GB/s is both directions together).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: Generation -> (GT/s per lane, encoding efficiency, encoding name).
PCIE_GENERATIONS: dict[int, tuple[float, float, str]] = {
    1: (2.5, 8 / 10, "8b/10b"),
    2: (5.0, 8 / 10, "8b/10b"),
    3: (8.0, 128 / 130, "128b/130b"),
    4: (16.0, 128 / 130, "128b/130b"),
    5: (32.0, 128 / 130, "128b/130b"),
    6: (64.0, 242 / 256, "FLIT 242B/256B"),
}

#: NVLink-C2C per direction, GB/s (NVIDIA Grace Hopper / Grace Blackwell datasheets: 900 GB/s total).
C2C_GBPS_PER_DIRECTION = 450.0
#: Name fragments of parts whose host link is NVLink-C2C when NVML cannot say.
_C2C_PARTS = ("gh200", "gb200", "gb300")

PCIE_FORMULA = "GT/s per lane x lanes x encoding efficiency / 8"


@dataclass(frozen=True)
class HostLink:
    """The link between host memory and the GPU, and its theoretical rate per direction."""

    kind: str  # "pcie" | "c2c" | "unknown"
    gen: int | None
    width: int | None
    max_gen: int | None
    max_width: int | None
    theoretical_gbps: float | None
    formula: str

    @property
    def degraded(self) -> bool:
        """Whether a PCIe link trained below what both ends support (generation or lanes)."""
        if self.kind != "pcie":
            return False
        return bool((self.gen and self.max_gen and self.gen < self.max_gen)
                    or (self.width and self.max_width and self.width < self.max_width))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["degraded"] = self.degraded
        return d


def pcie_gbps(gen: int | None, width: int | None) -> float | None:
    """Theoretical PCIe rate per direction in GB/s, or None for an unknown generation or width."""
    if not gen or not width or gen not in PCIE_GENERATIONS:
        return None
    rate, efficiency, _ = PCIE_GENERATIONS[gen]
    return rate * width * efficiency / 8


def is_c2c_part(name: str | None) -> bool:
    low = (name or "").lower().replace("-", "").replace(" ", "")
    return any(p in low for p in _C2C_PARTS)


def host_link(*, gen: int | None, width: int | None, max_gen: int | None = None, max_width: int | None = None,
              c2c_enabled: bool | None = None, gpu_name: str | None = None) -> HostLink:
    """The host link of a GPU from what NVML reports (NVML's own C2C flag first, the part second)."""
    if c2c_enabled or (c2c_enabled is None and is_c2c_part(gpu_name)):
        return HostLink("c2c", gen, width, max_gen, max_width, C2C_GBPS_PER_DIRECTION,
                        f"NVLink-C2C, {C2C_GBPS_PER_DIRECTION:g} GB/s per direction")
    theoretical = pcie_gbps(gen, width)
    if theoretical is None:
        return HostLink("unknown", gen, width, max_gen, max_width, None,
                        "the PCIe generation or width is not reported")
    assert gen is not None  # pcie_gbps gave a rate, so the generation is known
    rate, eff, enc = PCIE_GENERATIONS[int(gen)]
    return HostLink("pcie", gen, width, max_gen, max_width, theoretical,
                    f"{rate:g} GT/s x {width} lanes x {enc} / 8 = {theoretical:.1f} GB/s ({PCIE_FORMULA})")
