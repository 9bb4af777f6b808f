"""``roofline-ext info``: what this build can do (CUDA compiled in or not), then every NVIDIA GPU,
like a focused ``nvidia-smi -q``."""
from __future__ import annotations

import json
import sys

from ..._version import __version__
from ...device.listing import Device, devices
from ...device import native as device_native
from ...device.status import Reason, availability

EXIT_NO_GPU = 3  # documented in the README and cli.py


def register(sub) -> None:
    p = sub.add_parser("info", help="describe the NVIDIA GPUs on this machine, and what this build can do",
                       description="Say whether this build can measure at all (CUDA compiled in or "
                       "not), then describe every NVIDIA GPU (identity, clocks, memory, power) and "
                       f"whether it can be measured. Exits {EXIT_NO_GPU} when there is none.")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _gib(b: int | None) -> str:
    return "n/a" if b is None else f"{b / 2**30:.1f} GiB"


def _v(x, unit: str = "") -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.1f}{unit}"
    return f"{x}{unit}"


def _lines(d: Device) -> list[tuple[str, str]]:
    bw = d.theoretical_bandwidth_tbps
    return [
        ("UUID", d.uuid),
        ("PCI bus id", d.pci_bus_id),
        ("CUDA index", _v(d.index)),
        ("Compute capability", f"{d.compute_capability} ({d.architecture})"),
        ("SMs / CUDA cores", f"{_v(d.sm_count)} / {_v(d.cuda_cores)}"),
        ("L2 cache", "n/a" if d.l2_bytes is None else f"{d.l2_bytes / 2**20:.0f} MiB"),
        ("Memory total / free", f"{_gib(d.memory_total_bytes)} / {_gib(d.memory_free_bytes)}"),
        ("Memory bus", f"{_v(d.memory_bus_width_bits, ' bit')}"
         + (f" ({bw:.3f} TB/s theoretical at max memory clock)" if bw else "")),
        ("SM clock now / max", f"{_v(d.sm_clock_mhz)} / {_v(d.max_sm_clock_mhz, ' MHz')}"),
        ("Memory clock now / max", f"{_v(d.mem_clock_mhz)} / {_v(d.max_mem_clock_mhz, ' MHz')}"),
        ("Power draw / limit", f"{_v(d.power_draw_w)} / {_v(d.power_limit_w, ' W')}"),
        ("Temperature", _v(d.temperature_c, " C")),
        ("Clock event reasons", ", ".join(d.clock_event_reasons) if d.clock_event_reasons else "none"),
        ("MIG / ECC", f"{_v(d.mig_mode)} / {_v(d.ecc_mode)}"),
        ("PCIe link", f"gen {_v(d.pcie_gen)} x{_v(d.pcie_width)}"),
        ("Compute processes", _v(d.compute_processes)),
        ("Driver / CUDA driver", f"{_v(d.driver_version)} / {_v(d.cuda_driver_version)}"),
        ("Can measure", "yes" if d.can_measure else "no"),
    ]


def _build(devs: list) -> tuple[dict, str]:
    """What this build can do, as JSON and as the first line: whether its CUDA part was compiled in
    decides whether it can measure anything at all, GPU or no GPU. With a GPU listed, the
    availability message (printed after it) says what that means for this GPU."""
    native = device_native.core_or_none()
    if native is None:
        build = {"native_core": False, "cuda_compiled": False, "can_measure": False,
                 "error": device_native.import_error()}
        return build, (f"roofline-ext {__version__}; native core not importable ({device_native.import_error()}): this "
                       "build cannot measure; reinstall with 'pip install .'")
    build = dict(native.build_info(), native_core=True)
    build["can_measure"] = bool(build.get("cuda_compiled"))
    line = f"roofline-ext {__version__}; CUDA compiled in: {'yes' if build['can_measure'] else 'no'}"
    if devs:
        return build, line
    if build["can_measure"]:
        return build, line + " (this build can measure)"
    return build, line + (", this build can identify GPUs but never measure them (it was built without "
                          "nvcc; reinstall with nvcc on PATH and ROOFLINE_ENABLE_CUDA=ON)")


def run(args) -> int:
    avail = availability()
    devs = devices()
    build, build_line = _build(devs)
    if args.json:
        out = avail.to_dict()
        out["build"] = build
        out["package_version"] = __version__
        out["devices"] = [d.to_dict() for d in devs]
        print(json.dumps(out, indent=1, allow_nan=False))
    else:
        print(build_line + (f"; {avail.message}" if devs else ""))
    if not devs:
        print(f"roofline-ext: error: no usable GPU: {avail.message}", file=sys.stderr)
        return EXIT_NO_GPU
    if args.json:
        return 0
    for d in devs:
        print(f"\nGPU {d.index if d.index is not None else '-'}: {d.name}")
        for k, v in _lines(d):
            print(f"  {k:<24}{v}")
    if avail.reason is not Reason.OK:
        print(f"\nnote: {avail.message}", file=sys.stderr)
    return 0
