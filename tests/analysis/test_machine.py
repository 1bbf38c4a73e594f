"""A busy machine cannot fake a speedup: the sentinel arithmetic (harness/analysis/machine.py),
the row it flags and widens (harness/bench/rows.py); the gate that never passes a flagged speedup
against a floor: tests/results/gate/test_cell_checks.py; the CPU time read from /proc:
tests/bench/test_cpu_ticks.py."""

from __future__ import annotations

import pytest

from harness.analysis import machine
from harness.analysis.machine import MachineReading, spread, tolerance, widen


def test_spread_and_tolerance():
    assert spread([400.0, 440.0, 420.0]) == pytest.approx(0.10)
    assert spread([400.0]) == 0.0 and spread([]) == 0.0
    assert tolerance(0.01) == machine.DRIFT_FLOOR  # a very quiet calibration still allows the floor
    assert tolerance(0.05) == pytest.approx(machine.NOISE_FACTOR * 0.05)
    # a calibration the machine disturbed (12 % read as noise) cannot raise the bar past the ceiling:
    # a 35 % drift is flagged (bench/machine_noise.py's quiet run let one pass at a 36 % tolerance)
    assert tolerance(0.12) == machine.DRIFT_CEILING
    assert not MachineReading((100.0, 100.0), (100.0, 135.2), noise=0.12).steady


def test_a_machine_s_quiet_drift_is_the_tolerance_s_floor():
    """On a VM whose short sentinels move 14 % (median) with nothing else running, the calibrated
    tolerance (10-20 %) flagged most cells of a quiet machine; its recorded quiet-rerun drift is
    the floor, and a neighbour on the CPUs still flags the cell whatever the sentinels read."""
    quiet = [0.02 * i for i in range(1, 21)]  # 2 % .. 40 %
    assert machine.quiet_drift(quiet) == pytest.approx(0.381)  # the 95th percentile (interpolated)
    assert machine.quiet_drift(quiet[:19]) is None  # too few cells for that quantile
    assert tolerance(0.01, 0.381) == 0.381 and tolerance(0.05, None) == pytest.approx(0.15)
    jitter = MachineReading((100.0, 100.0), (100.0, 130.0), noise=0.02, quiet_drift=0.381)
    assert jitter.steady and jitter.flag() is None
    assert not MachineReading((100.0, 100.0), (100.0, 130.0), noise=0.02).steady  # without the record
    moved = MachineReading((100.0, 100.0), (100.0, 150.0), noise=0.02, quiet_drift=0.381)
    assert "tolerance 38%, this machine's quiet-rerun drift" in (moved.flag() or "")
    busy = MachineReading((100.0, 100.0), (100.0, 101.0), noise=0.02, foreign_cpu=0.4, quiet_drift=0.381)
    assert not busy.steady


def test_own_engine_sentinels_compare_only_with_their_own_engine():
    """Engines one at a time (harness/bench/one_at_a_time.py): the speculative engine times the
    sentinel itself, so its readings compare with each other and the baseline engine's with theirs."""
    steady = MachineReading((100.0, 101.0, 99.0, 100.0), (250.0, 252.0), 0.01, speculative_own_engine=True)
    assert steady.drift == pytest.approx(101 / 99 - 1) and steady.flag() is None
    # the same figures read as one engine's: a 150 % "drift" (the speculative engine's own speed)
    assert MachineReading(steady.baseline_tok_s, steady.speculative_tok_s, 0.01).drift > 1
    moved = MachineReading((100.0, 100.0, 70.0, 70.0), (250.0, 252.0), 0.01, speculative_own_engine=True)
    assert moved.drift == pytest.approx(100 / 70 - 1)
    flag = moved.flag()
    assert flag is not None and flag.startswith(machine.FLAG)
    assert "70-100 tok/s on the baseline engine, 250-252 tok/s on the speculative one" in flag
    within = MachineReading((100.0, 100.0), (250.0, 180.0), 0.01, speculative_own_engine=True)
    assert within.drift == pytest.approx(250 / 180 - 1) and within.flag() is not None  # moved during B


def test_sentinel_is_never_longer_than_the_arms_it_brackets():
    assert machine.sentinel_tokens(512) == machine.SENTINEL_TOKENS  # production cells: the fixed job
    assert machine.sentinel_tokens(12) == 12  # short cells: no longer than they are


def test_steady_cell_is_not_flagged():
    r = MachineReading((460.0, 455.0), (455.0, 470.0), noise=0.02)
    assert r.steady and r.flag() is None


def test_busy_baseline_is_flagged_with_its_figures():
    """The issue's case: the shared baseline read 215 tok/s-worth of machine, the arm 467."""
    r = MachineReading((215.0, 230.0), (460.0, 467.0), noise=0.03)
    assert not r.steady and r.drift == pytest.approx(467 / 215 - 1)
    flag = r.flag()
    assert flag.startswith("MACHINE NOISE") and "117%" in flag and "215-467 tok/s" in flag


def test_a_neighbour_on_the_cpus_flags_the_cell_even_when_the_sentinels_held():
    """bench/machine_noise.py's busy cells: sentinels within 10 % (drift 6 %), speedup moved 15 %;
    what gave the contention away was the CPU other processes took while the arms ran."""
    quiet = MachineReading((460.0, 455.0), (470.0, 450.0), noise=0.013, foreign_cpu=0.02)
    busy = MachineReading((460.0, 455.0), (470.0, 450.0), noise=0.013, foreign_cpu=0.48)
    assert quiet.steady and not busy.steady
    flag = busy.flag()
    assert flag.startswith("MACHINE NOISE") and "48% of the machine's CPUs" in flag and "moved" not in flag


def test_foreign_cpu_is_the_machine_s_busy_time_less_the_run_s_own():
    a = machine.CpuTimes(t=0.0, machine=10.0, own=4.0, ncpu=2)
    b = machine.CpuTimes(t=2.0, machine=10.0 + 3.0, own=4.0 + 2.0, ncpu=2)  # 4 CPU seconds of room
    assert machine.foreign_cpu(a, b) == pytest.approx(1.0 / 4.0)
    assert machine.foreign_cpu(a, a) == 0.0
    assert machine.foreign_cpu(a, machine.CpuTimes(2.0, 11.0, 7.0, 2)) == 0.0  # skew between readings: never < 0


def test_widen_by_drift():
    lo, hi = widen(1.06, 1.21, 1.13, 0.5)
    assert lo == pytest.approx(1.06 / 1.5) and hi == pytest.approx(1.21 * 1.5)
    assert widen(None, None, 1.13, 1.0) == (pytest.approx(0.565), pytest.approx(2.26))


def test_flagged_row_has_a_widened_ci_that_covers_the_quiet_speedup():
    """The random draft read 1.13x [1.06, 1.21] against a busy baseline; its quiet speedup was 0.62x.
    With the drift the sentinels saw, the CI covers the quiet figure."""
    from harness.bench.rows import CellRow, _machine

    row = CellRow.from_dict({})  # every column empty
    row.speedup, row.speedup_ci_low, row.speedup_ci_high = 1.13, 1.06, 1.21
    flags = _machine(row, MachineReading((215.0, 230.0), (460.0, 467.0), noise=0.03))
    assert len(flags) == 1 and flags[0].startswith("MACHINE NOISE")
    assert row.speedup_ci_low <= 0.62 <= row.speedup_ci_high
    assert row.machine_sentinels_baseline == [215.0, 230.0] and row.machine_drift > 1
