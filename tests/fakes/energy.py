"""Fakes for the energy tests: the costs and measurement records of the H200 feasibility run, and
a board whose energy counter and clock move only when a test says so.

Figures labelled "issue 27" are the H200 feasibility run of 2026-12-01 (idle 78 W; cuBLAS BF16
8192^3 at 666 TFLOP/s, 687 W = 1.03 pJ/FLOP, 0.91 above idle; copy_ of 4 GiB at 4.27 TB/s, 594 W =
139 pJ/byte, 121 above idle). They are example inputs, not values the package holds.
"""
from __future__ import annotations

from roofline_ext.measure.energy import EnergyMeasurement
from roofline_ext.model.energy import EnergyCost, EnergyCosts

# issue 27 figures (H200, 2026-12-01), as J per unit above idle and in total
ISSUE_IDLE_W = 78.0
ISSUE_BF16_ABOVE = 0.91e-12
ISSUE_BF16_TOTAL = 1.03e-12
ISSUE_COPY_ABOVE = 121e-12
ISSUE_COPY_TOTAL = 139e-12


def issue_costs(**extra: EnergyCost) -> EnergyCosts:
    costs = {"bf16": EnergyCost("bf16", ISSUE_BF16_ABOVE, 0.01e-12, "issue 27: cuBLAS BF16 8192^3", "library",
                                ISSUE_BF16_TOTAL),
             "hbm_copy": EnergyCost("hbm_copy", ISSUE_COPY_ABOVE, 2e-12, "issue 27: torch copy_ 4 GiB", "library",
                                    ISSUE_COPY_TOTAL)}
    costs.update(extra)
    return EnergyCosts(costs, idle_w=ISSUE_IDLE_W)


def record(j_above: float, *, calls: int = 100, window_s: float = 2.0, idle_w: float = 78.0,
           sigma: float = 0.0) -> EnergyMeasurement:
    """A measurement record with the given J per call above idle (fields consistent with it)."""
    window_j = j_above * calls + idle_w * window_s
    return EnergyMeasurement(calls=calls, window_s=window_s, window_j=window_j, power_w=window_j / window_s,
                             idle_w=idle_w, idle_window_s=1.0, j_per_call_total=window_j / calls,
                             j_per_call_above_idle=j_above, resolution_j=1e-3, update_interval_s=0.1,
                             poll_gap_s=0.001, idle_poll_gap_s=0.001, updates=20, uncertainty_total_j=sigma,
                             uncertainty_above_idle_j=sigma, uncertainty_idle_w=0.0)


class FakeBoard:
    """A board whose counter holds the energy at its last update (every ``interval`` s), quantised
    to ``quantum_mj``; time passes only when the fake work or the fake sleep says so."""

    def __init__(self, interval: float = 0.1, quantum_mj: int = 1, idle_w: float = 78.0):
        self.t = 0.0
        self.energy = 0.0  # J, exact
        self.interval = interval
        self.quantum = quantum_mj
        self.idle_w = idle_w
        self.snapshot = 0.0
        self.next_update = interval
        self.reads = 0

    def advance(self, dt: float, watts: float) -> None:
        end = self.t + dt
        while self.next_update <= end:
            self.energy += watts * (self.next_update - self.t)
            self.t = self.next_update
            self.snapshot = self.energy
            self.next_update += self.interval
        self.energy += watts * (end - self.t)
        self.t = end

    def read_mj(self) -> int:
        self.reads += 1
        mj = int(self.snapshot * 1000)
        return mj - mj % self.quantum

    def clock(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.advance(s, self.idle_w)
