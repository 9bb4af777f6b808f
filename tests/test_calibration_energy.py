"""The energy part of a full calibration's sustained phase, on the CPU: J per FLOP / per byte from
fake kernels on a fake energy counter (the figures, the telemetry and counter facts beside them,
units that fail or cannot run), every reason the part is skipped, the cache (old files without it,
a broken figure), ``calibrate --show``'s table, and the costs ``analyze --energy-costs`` takes from
it; and a replay of the H200's recorded HBM figures (benchmarks/results/energy-h200-2026-12-02.json)
through the phase's own code.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from roofline_ext.calibration import energy_phase as ep
from roofline_ext.calibration import pipeline as cal_run
from roofline_ext.calibration.backend import NativeBackend
from roofline_ext.errors import UserError
from roofline_ext.measure.energy import EnergyCounterError
from roofline_ext.measure.energy_kernels import reps_for
from roofline_ext.model.energy import EnergyCosts, energy_floor
from roofline_ext.peaks import cache as cb
from roofline_ext.peaks.record import CalibrationRecord
from roofline_ext.report.calibration_table import energy_notes, energy_rows

from fakes.calibration import FakeBackend, fake_bandwidth, fake_compute, fake_device, telemetry_summary
from fakes.calibration import fake_gpu  # noqa: F401  (the fixture: the CLI's seam to a fake H200)
from fakes.energy import FakeBoard

H200_JSON = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "energy-h200-2026-12-02.json"
EXAMPLE = Path(__file__).parent / "data" / "calibration-h200-example.json"
IDLE_W = 78.0


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv(cb.CACHE_ENV, str(d))
    return d


# --------------------------------------------------------------------------------------------------
# Fakes: a native core on a fake board, and a backend that adds energy to fakes/calibration.py's fake H200
# --------------------------------------------------------------------------------------------------

class Core:
    """``compute_run`` / ``bandwidth_run`` as the native core returns them, spending fake time and
    energy on a :class:`FakeBoard`: each call its ``overhead_s`` at ``overhead_w`` (allocation,
    seeding, verification), then its launches at the unit's power. Read and write move N bytes per
    launch, copy 2N; ``wrong`` units fail their own verification."""

    LAUNCH_S = 0.002
    OVERHEAD_S = 0.004
    OVERHEAD_W = 150.0

    def __init__(self, board: FakeBoard, watts: dict[str, float], wrong: tuple[str, ...] = ()):
        self.board, self.watts, self.wrong = board, watts, wrong
        self.calls: list[tuple] = []

    def _spend(self, unit: str, launches: int) -> list[float]:
        self.board.advance(self.OVERHEAD_S, self.OVERHEAD_W)
        self.board.advance(launches * self.LAUNCH_S, self.watts[unit])
        return [self.LAUNCH_S * 1e3] * launches

    def compute_run(self, device, precision, path, reps=20, warmup=3, target_ms=2.0, iterations=0, **knobs):
        self.calls.append(("compute", precision, path, dict(knobs)))
        times = self._spend(precision, warmup + reps)[warmup:]
        its = iterations or 1000
        return {"precision": precision, "path": path, "iterations": its, "flop_per_launch": 1e9 * its,
                "reps": reps, "times_ms": times, "instruction": "fake.mma", "config": dict(knobs),
                "verification": {"passed": precision not in self.wrong}}

    def bandwidth_run(self, device, pattern, buffer_bytes, reps, warmup, configs, seed):
        self.calls.append(("bandwidth", pattern, buffer_bytes, dict(configs[0])))
        times = self._spend(pattern, warmup + reps)[warmup:]
        moved = {"read": 1, "write": 1, "copy": 2}[pattern] * buffer_bytes
        return [{"pattern": pattern, "bytes_per_launch": moved, "warmup": warmup, "reps": reps, "times_ms": times,
                 "skipped": None, "config": configs[0], "verification": {"passed": pattern not in self.wrong}}]


#: Each unit's power on the fake board while its kernels run (W; idle is 78).
WATTS = {"fp64": 420.0, "fp32": 330.0, "tf32": 650.0, "fp16": 680.0, "bf16": 660.0, "fp8": 670.0, "int8": 630.0,
         "read": 590.0, "write": 635.0, "copy": 570.0}
#: What NVML's sampler "saw" during every energy window (the fake telemetry's summary).
ENERGY_TELEMETRY = telemetry_summary(sm=1800.0, mem=3201.0, power=655.0, temp=57.0, reasons=("sw_power_cap",))


class Telemetry:
    """fakes/calibration.py's fake sampler (samples for the sustained phase) with the summary the
    package's sampler gives after its block (what the energy phase records)."""

    def __init__(self, inner, summary):
        self.inner, self._summary = inner, summary

    @property
    def samples(self):
        return self.inner.samples

    @property
    def error(self):
        return self.inner.error

    def summary(self):
        return self._summary


class EnergyBackend(FakeBackend):
    """fakes/calibration.py's fake H200 with an energy counter (a fake board) and the real
    ``NativeBackend.energy_workload`` over a fake core."""

    def __init__(self, knobs, board: FakeBoard, core: Core, counter_error: str | None = None):
        super().__init__(knobs)
        self.board, self.core, self.counter_error = board, core, counter_error
        self.native = NativeBackend(core=core)

    @contextlib.contextmanager
    def sampling(self, device):
        with super().sampling(device) as tel:
            yield Telemetry(tel, ENERGY_TELEMETRY)

    def energy_counter(self, device, dev):
        if self.counter_error:
            raise EnergyCounterError(self.counter_error)
        return self.board

    def energy_workload(self, device, dev, key, spec, *, clock):
        self.knobs["calls"].append(("energy", key))
        return self.native.energy_workload(device, dev, key, spec, clock=clock)


def knobs(**changes):
    k = {"devices": [fake_device()], "nvml": {"compute_processes": 1, "ecc_pending": 1, "sm_clock_mhz": 345,
                                              "temperature_c": 30},
         "calls": [], "reasons": (), "unsupported": set(), "fake_compute": fake_compute,
         "fake_bandwidth": fake_bandwidth}
    k.update(changes)
    return k


def calibrate_with(backend, **kw):
    kw.setdefault("sustained_s", 0.15)
    return cal_run.calibrate(0, backend=backend, **kw)


def above_idle_pj(unit: str) -> float:
    """pJ per unit of work above idle of one fake call whose launches ran reps_for(...) times."""
    reps = reps_for(Core.OVERHEAD_S, Core.LAUNCH_S)
    energy = (Core.OVERHEAD_W - IDLE_W) * Core.OVERHEAD_S + (WATTS[unit] - IDLE_W) * reps * Core.LAUNCH_S
    work = (1e12 if unit not in ("read", "write", "copy") else
            {"read": 1, "write": 1, "copy": 2}[unit] * ep.own_buffer_bytes(fake_device().l2_bytes)) * reps
    return energy / work * 1e12


# --------------------------------------------------------------------------------------------------
# The phase inside a full calibration
# --------------------------------------------------------------------------------------------------

def test_a_longer_energy_window_narrows_each_figures_bound(cache):
    """--energy-window: each unit's window at least that long, and its counter-reading bound
    narrower than at the default (the edge terms stay, the window they are shared over grows)."""
    def run(**kw):
        board = FakeBoard(interval=0.1, idle_w=IDLE_W)
        backend = EnergyBackend(knobs(), board, Core(board, WATTS))
        return calibrate_with(backend, **kw)["energy"]["entries"]
    short, long = run(), run(energy_window_s=8.0)
    for key in ("fp32", "hbm_read"):
        assert short[key]["status"] == long[key]["status"] == "ok"
        assert long[key]["window_s"] >= 8.0 > short[key]["window_s"]
        assert long[key]["relative_uncertainty"] < 0.6 * short[key]["relative_uncertainty"], key
    items = len(ep.ENERGY_KEYS) + sum(len(ep.peer_plan(k, None)) for k in ep.ENERGY_KEYS)
    assert items == len(ep.ENERGY_KEYS) + 6  # cuBLAS tf32/fp16/bf16, torch sum/fill_/copy_
    assert ep.estimated_s(window_s=8.0) - ep.estimated_s() == pytest.approx(7.0 * items)
    assert ep.estimated_s(window_s=8.0, peers=False) - ep.estimated_s(peers=False) == pytest.approx(
        7.0 * len(ep.ENERGY_KEYS))


def test_a_full_calibration_measures_energy_per_unit_with_what_it_ran_at(cache):
    board = FakeBoard(interval=0.1, idle_w=IDLE_W)
    k = knobs(unsupported={"fp8"})
    backend = EnergyBackend(k, board, Core(board, WATTS))
    cal = calibrate_with(backend)
    energy = cal["energy"]
    assert energy["status"] == "measured" and energy["reason"] is None
    # After the sustained units (HBM: one runner per pattern, in turn), every energy key in order,
    # fp8 (no burst figure) not run.
    calls = [c[0] if c[0] != "energy" else f"energy:{c[1]}" for c in k["calls"] if c[0] in ("sustain", "energy")]
    assert calls == ["sustain"] * (7 + 3) + [f"energy:{key}" for key in ep.ENERGY_KEYS if key != "fp8"]
    assert list(energy["entries"]) == list(ep.ENERGY_KEYS)
    fp8 = energy["entries"]["fp8"]
    assert fp8["status"] == "unsupported" and fp8["reason"] == "wgmma: not on this GPU" and "j_per_unit" not in fp8
    # The idle power and the counter, measured on the (fake) idle card.
    assert energy["idle"]["power_w"] == pytest.approx(IDLE_W, rel=0.01)
    assert 0 < energy["idle"]["uncertainty_w"] < 1.0
    assert energy["counter"]["update_interval_s"] == pytest.approx(0.1, abs=0.002)
    assert energy["counter"]["resolution_j"] == pytest.approx(1e-3)
    for key in ep.ENERGY_KEYS:
        e = energy["entries"][key]
        if key == "fp8":
            continue
        unit = key.removeprefix("hbm_")
        assert e["status"] == "ok", (key, e.get("reason"))
        assert e["pj_per_unit"] == pytest.approx(above_idle_pj(unit), rel=0.01), key
        assert e["j_per_unit"] == pytest.approx(e["pj_per_unit"] * 1e-12)
        assert e["j_total_per_unit"] > e["j_per_unit"]
        # The uncertainty is the counter-reading bound, and the truth is within it.
        assert 0 < e["uncertainty"] < 0.1 * e["j_per_unit"]
        assert abs(e["j_per_unit"] - above_idle_pj(unit) * 1e-12) <= e["uncertainty"] + 1e-3 * e["j_per_unit"]
        assert e["relative_uncertainty"] == pytest.approx(e["measurement"]["relative_uncertainty"])
        assert e["window_s"] >= 1.0 and e["calls"] >= 1 and e["idle_w"] == pytest.approx(IDLE_W, rel=0.01)
        # The counter as this unit's own idle probe found it (a constant fake idle power makes equal
        # steps, whose gcd can exceed NVML's 1 mJ unit: the probe reports what it saw).
        assert e["resolution_j"] == e["measurement"]["resolution_j"] and 1e-3 <= e["resolution_j"] <= 0.1
        assert e["update_interval_s"] == pytest.approx(0.1, abs=0.002)
        # What the sampler saw during the window: power, clocks, temperature, the reasons by name.
        assert (e["sm_clock_mhz"], e["mem_clock_mhz"], e["temperature_c"]) == (1800.0, 3201.0, 57.0)
        assert e["sampled_power_w"] == 655.0 and e["throttle_reasons"] == ["sw_power_cap"]
        assert e["per"] == ("byte" if key.startswith("hbm") else "OP" if key == "int8" else "FLOP")
        assert e["origin"] == "own" and e["source"].startswith("roofline_ext ")
    # Each precision ran on its burst winner's path, each HBM pattern on its burst winner's
    # configuration, over max(16 x L2, 1 GiB) buffers.
    assert energy["entries"]["bf16"]["path"] == "wgmma" and energy["entries"]["fp64"]["path"] == "simt"
    hbm_calls = [c for c in backend.core.calls if c[0] == "bandwidth"]
    burst_cfg = cal["burst"]["entries"]["hbm"]["patterns"]["read"]["config"]
    assert {c[1] for c in hbm_calls} == {"read", "write", "copy"}
    assert all(c[2] == 1 << 30 and c[3] == burst_cfg for c in hbm_calls)
    # The phase has its own wall time, outside the sustained units'.
    assert cal["timing"]["phases_s"]["energy"] >= 0 and "energy_s" in cal["timing"]
    # It caches, reads back typed, and becomes the costs analyze --energy-costs takes.
    path = cb.save(cal)
    record = cb.load_record(cal["gpu"]["uuid"])
    assert record.energy.status == "measured" and record.energy_entry("bf16").counted
    assert record.energy_entry("bf16").throttle_reasons == ("sw_power_cap",)
    assert cb.cached_energy(gpu_name="NVIDIA H200").idle_w == pytest.approx(IDLE_W, rel=0.01)
    costs = EnergyCosts.from_dict(json.loads(path.read_text()))
    assert set(costs.costs) == set(ep.ENERGY_KEYS) - {"fp8"}
    assert costs.require("bf16").j_per_unit == energy["entries"]["bf16"]["j_per_unit"]
    assert costs.require("hbm_copy").origin == "own" and "calibration" in costs.require("hbm_copy").source
    assert costs.idle_w == energy["idle"]["power_w"]


def test_units_that_fail_or_that_the_counter_cannot_see_are_said_so_and_not_counted(cache):
    board = FakeBoard(interval=0.1, idle_w=IDLE_W)
    watts = dict(WATTS, fp64=IDLE_W - 60.0)  # draws less than idle: nothing above idle to see
    core = Core(board, watts, wrong=("bf16",))
    cal = calibrate_with(EnergyBackend(knobs(), board, core))
    entries = cal["energy"]["entries"]
    assert entries["bf16"]["status"] == "failed" and "verification did not pass" in entries["bf16"]["reason"]
    assert entries["bf16"].get("j_per_unit") is None
    assert entries["fp64"]["status"] == "unresolved" and "too little for the counter" in entries["fp64"]["reason"]
    assert entries["fp64"]["j_per_unit"] is None and entries["fp64"]["measurement"]["calls"] > 0
    assert any(w.startswith("energy BF16: failed: ") for w in cal["warnings"])
    assert any(w.startswith("energy FP64: unresolved: ") for w in cal["warnings"])
    cb.save(cal)  # a figure that did not count does not make the file unusable
    costs = EnergyCosts.from_calibration(cb.load(cal["gpu"]["uuid"]))
    assert "bf16" not in costs.costs and "fp64" not in costs.costs and "fp16" in costs.costs
    rows = {r["key"]: r for r in energy_rows(cal)}
    assert rows["bf16"]["above_idle"] == "failed" and "verification did not pass" in rows["bf16"]["kernel"]


@pytest.mark.parametrize("how, reason", [
    ({"quick": True}, "a quick calibration measures no energy (a full one does)"),
    ({"sustained_s": 0}, "the sustained phase did not run (--sustained 0), and energy is measured in it"),
    ({"energy": False}, "skipped on request (--no-energy)"),
])
def test_the_energy_part_is_skipped_with_its_reason(cache, how, reason):
    board = FakeBoard(interval=0.1, idle_w=IDLE_W)
    k = knobs()
    cal = calibrate_with(EnergyBackend(k, board, Core(board, WATTS)), **how)
    assert cal["energy"] == {"status": "skipped", "reason": reason, "entries": {}}
    assert not [c for c in k["calls"] if c[0] == "energy"] and board.reads == 0
    assert energy_notes(cal) == [f"energy: not measured: {reason}"] and energy_rows(cal) == []
    cb.save(cal)
    with pytest.raises(UserError, match=r"measured no energy: " + reason.replace("(", r"\(").replace(")", r"\)")):
        EnergyCosts.from_calibration(cb.load(cal["gpu"]["uuid"]))


def test_the_command_line_no_energy_flag(fake_gpu, cache, capsys):  # noqa: F811
    from roofline_ext.cli import main

    assert main(["calibrate", "--sustained", "0.1", "--no-energy", "--json", "--no-cache", "--no-progress"]) == 0
    cal = json.loads(capsys.readouterr().out)
    assert cal["mode"] == "full" and cal["sustained"]["entries"]
    assert cal["energy"] == {"status": "skipped", "reason": "skipped on request (--no-energy)", "entries": {}}
    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    assert "--no-energy" in capsys.readouterr().out


def test_no_energy_counter_skips_the_part_with_the_counters_reason(cache):
    board = FakeBoard(interval=0.1, idle_w=IDLE_W)
    why = "this GPU has no NVML total-energy counter (nvmlDeviceGetTotalEnergyConsumption: Not Supported)"
    k = knobs()
    cal = calibrate_with(EnergyBackend(k, board, Core(board, WATTS), counter_error=why))
    assert cal["energy"] == {"status": "skipped", "reason": why, "entries": {}}
    assert not [c for c in k["calls"] if c[0] == "energy"]
    # A backend without an energy counter at all (fakes/calibration.py's fake) says that instead.
    plain = calibrate_with(FakeBackend(knobs()))
    assert plain["energy"]["status"] == "skipped"
    assert plain["energy"]["reason"] == ("the calibration backend (FakeBackend) has no energy counter "
                                         "(energy_counter / energy_workload)")


def test_the_native_backend_without_nvml_says_why():
    # This machine has no NVIDIA driver (and no nvidia-ml-py): the real counter refuses with its reason.
    dev = fake_device()
    with pytest.raises(EnergyCounterError, match=r"^measuring energy needs NVML"):
        NativeBackend().energy_counter(0, dev)
    section, warnings = ep.energy_phase(NativeBackend(), 0, dev, {}, {})
    assert section["status"] == "skipped" and section["reason"].startswith("measuring energy needs NVML")
    assert warnings == []
    with pytest.raises(EnergyCounterError, match="no PCI bus id"):
        NativeBackend().energy_counter(0, fake_device(pci_bus_id=None))


def test_a_counter_that_never_moves_skips_with_the_probes_reason():
    class Stuck:
        clock = FakeBoard().clock

        def __init__(self):
            self.t = 0.0
            self.clock = lambda: self.t

        def sleep(self, s):
            self.t += s

        def read_mj(self):
            return 1234

    class Backend:
        def energy_counter(self, device, dev):
            return Stuck()

        def energy_workload(self, *a, **kw):
            raise AssertionError("nothing may run on a counter that does not move")

        def sampling(self, device):
            return contextlib.nullcontext()

    section, _ = ep.energy_phase(Backend(), 0, fake_device(), {}, {})
    assert section["status"] == "skipped" and "the counter is not updating on this GPU" in section["reason"]


def test_the_plan_runs_burst_winners_and_refuses_the_drivers_copy():
    entries = {"bf16": {"path": "wgmma"}, "fp32": {"path": "simt"},
               "hbm": {"path": "copy", "config": {"load": "memcpy"},
                       "patterns": {"read": {"config": {"threads": 1024, "unroll": 16, "load": "nc_na"}},
                                    "copy": {"config": {"threads": 256, "unroll": 1, "load": "memcpy"}}}}}
    plan = ep.plan(entries, {"fp8": "wgmma: FP8 needs sm_89"}, 50 << 20)
    assert plan["bf16"]["path"] == "wgmma" and plan["bf16"]["config"] is None  # the path's default, as burst
    assert plan["fp8"] == "wgmma: FP8 needs sm_89" and plan["int8"] == "no burst figure to run it from"
    assert plan["hbm_read"]["config"] == {"threads": 1024, "unroll": 16, "load": "nc_na"}
    assert plan["hbm_read"]["buffer_bytes"] == 1 << 30 and plan["hbm_read"]["config_source"] == "burst winner"
    assert plan["hbm_copy"]["config"] is None and "driver's copy" in plan["hbm_copy"]["config_source"]
    assert plan["hbm_write"]["config"] is None and "no burst configuration" in plan["hbm_write"]["config_source"]
    assert ep.plan({}, {}, None)["hbm_read"] == "no HBM burst figure: the bandwidth phase did not measure"
    assert ep.plan({}, {}, 128 << 20)["hbm_read"] == "no HBM burst figure: the bandwidth phase did not measure"
    assert ep.plan({"hbm": {"path": "read"}}, {}, 128 << 20)["hbm_copy"]["buffer_bytes"] == 2 << 30


def test_the_budget_takes_the_energy_part_off_the_sustained_window():
    # An H200's 30 s burst leaves 270 s of the 300; the energy part (~a minute) comes off the units'.
    left = cal_run.FULL_BUDGET_S - 30.0
    units = len(cal_run.SUSTAINED_FAMILIES)
    with_energy = cal_run._fit_window(cal_run.DEFAULT_SUSTAINED_S, left - ep.estimated_s(), units)
    assert 45.0 <= ep.estimated_s(peers=False) <= 75.0 < ep.estimated_s() <= 110.0  # the peers: 6 more windows
    assert cal_run.MIN_SUSTAINED_S < with_energy < cal_run.DEFAULT_SUSTAINED_S
    assert 30.0 + ep.estimated_s() + units * (with_energy + 3.0) + 10.0 <= cal_run.FULL_BUDGET_S + 0.5


# --------------------------------------------------------------------------------------------------
# The cache, --show, and the costs
# --------------------------------------------------------------------------------------------------

def measured_section(**entry_changes) -> dict:
    """A small energy section as the phase writes it (two units, figures as on an H200)."""
    bf16 = {"key": "bf16", "label": "BF16", "per": "FLOP", "unit": "J/FLOP", "origin": "own", "status": "ok",
            "reason": None, "source": "roofline_ext wgmma bf16", "kernel": "roofline_ext wgmma bf16", "path": "wgmma",
            "j_per_unit": 0.67e-12, "j_total_per_unit": 0.83e-12, "uncertainty": 0.03e-12, "pj_per_unit": 0.67,
            "relative_uncertainty": 0.045, "power_w": 658.0, "idle_w": 125.0, "window_s": 3.12, "kernel_duty": 0.9,
            "resolution_j": 0.001, "update_interval_s": 0.1, "sm_clock_mhz": 1800.0, "mem_clock_mhz": 3201.0,
            "temperature_c": 61.0, "throttle_reasons": ["sw_power_cap"]}
    bf16.update(entry_changes)
    read = dict(bf16, key="hbm_read", label="HBM read", per="byte", unit="J/byte", source="roofline_ext HBM read 1 GiB",
                path="read", j_per_unit=116e-12, j_total_per_unit=148e-12, uncertainty=5.7e-12, pj_per_unit=116.0,
                power_w=591.0, sm_clock_mhz=1980.0, temperature_c=51.0, throttle_reasons=[])
    return {"status": "measured", "reason": None,
            "counter": {"update_interval_s": 0.1, "resolution_j": 0.001, "updates": 11, "poll_gap_s": 0.0011},
            "idle": {"power_w": 126.0, "uncertainty_w": 0.13, "window_s": 1.0},
            "entries": {"bf16": bf16, "hbm_read": read}}


def test_an_old_cache_without_energy_still_loads_and_says_so_when_asked_for_costs(cache, capsys):
    old = json.loads(EXAMPLE.read_text())
    assert "energy" not in old
    cb.save(old)
    record = cb.load_record(old["gpu"]["uuid"])
    assert record is not None and record.energy is None and record.energy_entry("bf16") is None
    assert not capsys.readouterr().err  # no warning: an old file is a good file
    assert cb.cached_energy(uuid=old["gpu"]["uuid"]) is None
    assert energy_rows(old) == [] and energy_notes(old) == []
    with pytest.raises(UserError, match="has no energy part"):
        EnergyCosts.from_dict(old)


def test_a_broken_energy_figure_makes_the_cached_file_unusable(cache, capsys):
    cal = json.loads(EXAMPLE.read_text())
    cal["energy"] = measured_section(j_per_unit=-1e-12)
    with pytest.raises(ValueError, match=r"energy.entries.bf16.j_per_unit is -1e-12"):
        cb.save(cal)
    cal["energy"] = measured_section(j_per_unit=2.0)  # two joules per FLOP: no card
    assert "not a finite positive energy" in cb.validate(cal)
    cal["energy"] = measured_section(uncertainty=None)
    assert cb.validate(cal) == "energy.entries.bf16.uncertainty is None, not a finite non-negative number"
    cal["energy"] = measured_section(throttle_reasons="sw_power_cap")  # the shape is checked too
    assert "/energy/entries/bf16/throttle_reasons" in cb.validate(cal)
    # A figure that did not count may hold anything: it is never built on.
    cal["energy"] = measured_section(status="failed", reason="wrong output", j_per_unit=None)
    assert cb.validate(cal) is None


def test_show_prints_the_energy_table(cache, capsys):
    from roofline_ext.cli import main

    cal = json.loads(EXAMPLE.read_text())
    cal["energy"] = measured_section()
    cal["energy"]["entries"]["fp8"] = {"key": "fp8", "label": "FP8", "per": "FLOP", "status": "unsupported",
                                       "reason": "wgmma: FP8 needs sm_89 or later"}
    cb.save(cal)
    assert main(["calibrate", "--show"]) == 0
    out = capsys.readouterr().out
    assert "Energy per unit of work (sustained phase, above idle)" in out
    bf16 = next(line for line in out.splitlines() if "BF16" in line and "pJ/FLOP" in line)
    for text in ("0.67 pJ/FLOP ±4.5%", "0.83 pJ/FLOP", "658 W (idle 125)", "1800 MHz", "61 C", "sw_power_cap",
                 "3.12 s, kernels 90%", "roofline_ext wgmma bf16"):
        assert text in bf16, text
    read = next(line for line in out.splitlines() if "HBM read" in line)
    assert "116 pJ/byte" in read and "mem 3201 MHz" in read
    fp8 = next(line for line in out.splitlines() if line.strip("│ ").startswith("FP8") and "unsupported" in line)
    assert "FP8 needs sm_89" in fp8
    assert "idle 126 W ±0.13 W" in out and "steps every 100 ms, resolution 1 mJ" in out


def test_show_of_a_calibration_that_skipped_energy_says_why(cache, capsys):
    from roofline_ext.cli import main

    cal = json.loads(EXAMPLE.read_text())
    cal["energy"] = ep.skipped("measuring energy needs NVML's Python bindings, which are not installed")
    cb.save(cal)
    assert main(["calibrate", "--show"]) == 0
    out = capsys.readouterr().out
    assert "Energy per unit" not in out
    assert "energy: not measured: measuring energy needs NVML's Python bindings" in out


def test_analyze_energy_costs_takes_the_cached_calibration_file(cache):
    from roofline_ext.cli.commands.analyze import _energy_costs

    cal = json.loads(EXAMPLE.read_text())
    cal["energy"] = measured_section()
    path = cb.save(cal)
    costs = _energy_costs(str(path))
    assert set(costs.costs) == {"bf16", "hbm_read"} and costs.idle_w == 126.0
    assert costs.require("bf16").uncertainty == 0.03e-12
    # The floor of a 1 GFLOP BF16 task moving 10 MB: the calibration's costs, term by term.
    floor = energy_floor(costs, flops=1e9, nbytes=1e7, dtype="bfloat16")
    assert floor.e_min_j == pytest.approx(1e9 * 0.67e-12 + 1e7 * 116e-12)
    with pytest.raises(UserError, match="no measured energy per FLOP for fp32 .*a full 'roofline-ext calibrate'"):
        energy_floor(costs, flops=1e9, nbytes=0, dtype="float32", strict_fp32=True)


# --------------------------------------------------------------------------------------------------
# A replay of the H200's recorded HBM figures through the phase's own code
# --------------------------------------------------------------------------------------------------

class ReplayCore:
    """The native core's ``bandwidth_run`` as the H200 ran it on 2026-12-02: per pattern the recorded
    per-launch time and bytes, the sizing calls' recorded overhead (so the phase sizes the calls as
    the H200 run did), the window's calls as long as the H200's were (window / calls), and the
    window's mean power over them; the board's idle power is the one recorded before that window."""

    def __init__(self, board: FakeBoard, recorded: dict[str, dict]):
        self.board, self.recorded = board, recorded
        self.seen: set[str] = set()

    def bandwidth_run(self, device, pattern, buffer_bytes, reps, warmup, configs, seed):
        r = self.recorded[pattern]
        info = r["info"]
        if pattern not in self.seen:  # the card as it was before this pattern's window
            self.seen.add(pattern)
            self.board.idle_w = r["idle_w"]
        launch_s = info["launch_ms"] * 1e-3
        call_s = r["window_s"] / r["calls"]
        overhead = info["overhead_s"] if reps == 3 else call_s - info["reps_per_call"] * launch_s
        self.board.advance(overhead + reps * launch_s, r["power_w"])
        return [{"pattern": pattern, "bytes_per_launch": r["work_per_call"] / info["reps_per_call"], "warmup": warmup,
                 "reps": reps, "times_ms": [info["launch_ms"]] * reps, "skipped": None, "config": configs[0],
                 "verification": {"passed": True}}]


def test_replay_of_the_h200_hbm_figures(cache, monkeypatch):
    # The recorded run sized its calls by the rules of its day (duty 0.9, at least 20 ms of kernels);
    # the replay sizes them the same way, or its calls would not be the H200's.
    from roofline_ext.measure import energy_kernels

    rules_then = energy_kernels.reps_for
    monkeypatch.setattr(energy_kernels, "reps_for",
                        lambda overhead, launch, duty=0.9: rules_then(overhead, launch, duty=0.9, min_kernel_s=0.02))
    doc = json.loads(H200_JSON.read_text())
    own = {f["key"]: f for f in doc["figures"] if f["origin"] == "own" and f["status"] == "ok"}
    recorded = {own[k]["repeats"][0]["info"]["pattern"]: own[k]["repeats"][0] for k in ep.HBM_ENERGY_KEYS}
    board = FakeBoard(interval=0.1)
    native = NativeBackend(core=ReplayCore(board, recorded))

    class Backend:
        def energy_counter(self, device, dev):
            return board

        def energy_workload(self, device, dev, key, spec, *, clock):
            return native.energy_workload(device, dev, key, spec, clock=clock)

        @contextlib.contextmanager
        def sampling(self, device):
            yield Telemetry(None, {"power_w": {"median": recorded["read"]["telemetry"]["power_w"]},
                                   "sm_clock_mhz": {"median": 1980}, "mem_clock_mhz": {"median": 3201},
                                   "temperature_c": {"median": 51}, "throttle_reasons": []})

    h200 = fake_device(l2_bytes=doc["gpu"]["l2_bytes"])
    # The example calibration's burst entries (no recorded per-pattern winners): each pattern's
    # first default configuration, which is exactly what the H200 benchmark ran.
    entries = json.loads(EXAMPLE.read_text())["burst"]["entries"]
    section, warnings = ep.energy_phase(Backend(), 0, h200, entries, {}, keys=ep.HBM_ENERGY_KEYS)
    assert section["status"] == "measured" and warnings == []
    for key in ep.HBM_ENERGY_KEYS:
        got, want = section["entries"][key], recorded[own[key]["repeats"][0]["info"]["pattern"]]
        assert got["info"]["config"] == want["info"]["config"], key
        assert got["info"]["buffer_bytes"] == want["info"]["buffer_bytes"] == 1 << 30
        assert got["info"]["reps_per_call"] == want["info"]["reps_per_call"], key  # sized as the H200 run was
        assert got["work_per_call"] == pytest.approx(want["work_per_call"])
        # The H200's J per byte above idle (116 pJ read, 135 write, 123 copy) from its power and rates,
        # within 1% and within the figure's own uncertainty.
        assert got["pj_per_unit"] == pytest.approx(want["pj_per_unit"], rel=0.01), key
        assert abs(got["j_per_unit"] - want["j_per_unit"]) <= got["uncertainty"]
        assert got["power_w"] == pytest.approx(want["power_w"], rel=0.01)
        assert got["idle_w"] == pytest.approx(want["idle_w"], rel=0.01)
    assert section["entries"]["hbm_read"]["pj_per_unit"] == pytest.approx(116.4, abs=1.2)
    # The costs a floor is then built on: a copy-like task of 1 GiB read + 1 GiB written.
    cal = json.loads(EXAMPLE.read_text())
    cal["energy"] = section
    record = CalibrationRecord.from_dict(json.loads(json.dumps(cal)))
    costs = EnergyCosts.from_calibration(record)
    floor = energy_floor(costs, flops=0, nbytes=2 << 30, dtype="float32", read_bytes=1 << 30, write_bytes=1 << 30)
    cheapest = min((costs.require("hbm_copy").j_per_unit * 2,
                    costs.require("hbm_read").j_per_unit + costs.require("hbm_write").j_per_unit))
    assert floor.e_min_j == pytest.approx(cheapest * (1 << 30))


# --------------------------------------------------------------------------------------------------
# The library peers beside the own kernels (the floor must not be beaten by a kernel already seen)
# --------------------------------------------------------------------------------------------------

class PeerBackend(EnergyBackend):
    """EnergyBackend with library peers on the same fake board: each peer call spends ``PEER_S`` at
    its power and does ``PEER_WORK`` units; ``wrong`` peers fail their output check."""

    PEER_S = 0.02
    PEER_WORK = {"tf32": 1e13, "fp16": 1e13, "bf16": 1e13, "hbm_read": 1e11, "hbm_write": 1e11, "hbm_copy": 1e11}

    def __init__(self, *args, peer_watts: dict[str, float], wrong: tuple[str, ...] = (), **kw):
        super().__init__(*args, **kw)
        self.peer_watts, self.wrong = peer_watts, wrong
        self.peer_specs: list[dict] = []

    def energy_peer_workload(self, device, dev, key, spec, *, clock):
        from roofline_ext.measure.energy_workload import EnergyWorkload

        self.peer_specs.append(dict(spec))

        def call():
            self.board.advance(self.PEER_S, self.peer_watts[key])
            return self.PEER_WORK[key], None

        return EnergyWorkload(call=call, call_s=self.PEER_S,
                              check=lambda: "destination differs from the source" if key in self.wrong else None,
                              info={"hbm_bytes_per_call": 3e8} if key in ("tf32", "fp16", "bf16") else {})


def peer_pj(key: str, watts: float) -> float:
    return (watts - IDLE_W) * PeerBackend.PEER_S / PeerBackend.PEER_WORK[key] * 1e12


def test_library_peers_are_measured_beside_the_own_kernels_and_the_floor_takes_the_lowest(cache):
    board = FakeBoard(interval=0.1, idle_w=IDLE_W)
    # copy's peer more frugal than the own copy kernel (as torch's was on the H200), bf16's costlier.
    peer_watts = {"tf32": 700.0, "fp16": 700.0, "bf16": 700.0, "hbm_read": 700.0, "hbm_write": 700.0,
                  "hbm_copy": 250.0}
    backend = PeerBackend(knobs(), board, Core(board, WATTS), peer_watts=peer_watts, wrong=("hbm_write",))
    cal = calibrate_with(backend)
    energy = cal["energy"]
    # One peer per unit that has one, named as the issue names them, HBM on the own kernels' buffer.
    assert sorted(energy["peers"]) == sorted(["tf32", "fp16", "bf16", "hbm_read", "hbm_write", "hbm_copy"])
    assert [s["name"] for s in backend.peer_specs if s["key"] == "bf16"] == ["torch.matmul bf16 8192^3 (cuBLAS)"]
    assert {s["nbytes"] for s in backend.peer_specs} == {energy["entries"]["hbm_copy"]["info"]["buffer_bytes"]}
    copy = energy["peers"]["hbm_copy"][0]
    assert copy["origin"] == "library" and copy["status"] == "ok" and copy["source"] == "torch copy_ 1 GiB float32"
    assert copy["pj_per_unit"] == pytest.approx(peer_pj("hbm_copy", 250.0), rel=0.02)
    assert copy["pj_per_unit"] < energy["entries"]["hbm_copy"]["pj_per_unit"]
    # A peer whose output is wrong is said so and does not count.
    write = energy["peers"]["hbm_write"][0]
    assert write["status"] == "failed" and "differs from the source" in write["reason"] and write.get("j_per_unit") is None
    assert any(w.startswith("energy torch fill_ 1 GiB float32: failed: ") for w in cal["warnings"])
    # Cached, read back validated, and the costs: per unit the lowest of own and peers.
    path = cb.save(cal)
    record = CalibrationRecord.from_dict(json.loads(path.read_text()))
    assert [e.origin for e in record.energy.counted_peers()] == ["library"] * 5
    costs = EnergyCosts.from_calibration(record)
    assert costs.require("hbm_copy").origin == "library"
    assert costs.require("hbm_copy").j_per_unit == copy["j_per_unit"]
    assert "torch copy_" in costs.require("hbm_copy").source and "calibration" in costs.require("hbm_copy").source
    assert costs.require("bf16").origin == "own"  # the peer drew more: the own kernel's figure stands
    assert costs.require("hbm_write").origin == "own"  # the failed peer is not weighed in
    assert [c.origin for c in costs.considered["hbm_copy"]] == ["library", "own"]
    # A GEMM peer's figure holds its bytes' energy too: the cost says how many, so the floor takes them out.
    gemm = next(c for c in costs.considered["bf16"] if c.origin == "library")
    assert gemm.bytes_per_unit == pytest.approx(3e8 / PeerBackend.PEER_WORK["bf16"])
    assert costs.require("hbm_copy").bytes_per_unit == 0.0
    # A broken peer figure makes the file unusable, as a broken own figure does.
    doc = json.loads(path.read_text())
    doc["energy"]["peers"]["hbm_copy"][0]["j_per_unit"] = -1.0
    with pytest.raises(Exception, match=r"energy\.peers\.hbm_copy\.0\.j_per_unit"):
        CalibrationRecord.from_dict(doc)


def test_a_calibration_made_before_the_peers_gives_the_own_kernels_costs(cache):
    board = FakeBoard(interval=0.1, idle_w=IDLE_W)
    cal = calibrate_with(EnergyBackend(knobs(), board, Core(board, WATTS)))
    assert "peers" not in cal["energy"]  # a backend without peers measures none
    costs = EnergyCosts.from_calibration(CalibrationRecord.from_dict(json.loads(json.dumps(cal))))
    assert {c.origin for c in costs.costs.values()} == {"own"}


def test_the_native_backend_says_why_a_peer_cannot_run_without_torch(monkeypatch):
    import builtins

    from roofline_ext.measure.energy_workload import Unsupported

    real_import = builtins.__import__

    def no_torch(name, *args, **kw):
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    spec = ep.peer_plan("hbm_copy", 50 << 20)[0]
    with pytest.raises(Unsupported, match="torch copy_ 1 GiB float32: torch is not installed"):
        NativeBackend(core=object()).energy_peer_workload(0, None, "hbm_copy", spec)
    assert ep.peer_plan("fp64", 50 << 20) == [] and ep.peer_plan("int8", None) == []
