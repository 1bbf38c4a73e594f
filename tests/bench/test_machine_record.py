"""This machine's between-run SD of a speedup (harness/bench/machine_record.py): stored per machine in
the cache, applied to a bench row's speedup CI, and said in the row and the run's summary."""

from __future__ import annotations

import json

import pytest

from harness.bench import machine_record as M
from harness.schema import CellRow


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    monkeypatch.delenv("HARNESS_MACHINE_RECORD", raising=False)  # conftest points it at nothing
    return tmp_path


def _record(tau: float = 0.05) -> M.MachineRecord:
    return M.MachineRecord(tau, 10, 6, "tiny-kimi", "2026-12-07T08:00:00+00:00", ("results/runs/a",))


def _row(speedup: float | None = 1.5, low: float | None = 1.45, high: float | None = 1.55) -> CellRow:
    ci = {"speedup_ci_low": low, "speedup_ci_high": high}
    return CellRow.from_dict({"mode": "speculative", "speedup": speedup, **ci})


def test_a_record_is_read_back_on_this_machine_only(cache):
    assert M.read_record() is None  # nothing measured here yet
    path = M.write_record(_record())
    assert path == cache / "machine" / "speedup_between_runs.json"
    assert M.read_record() == _record()
    data = json.loads(path.read_text())
    other = {"tau": 0.5, "runs": 3, "cells": 1, "recipe": "x", "measured_at": "2026-01-01"}
    path.write_text(json.dumps({"another-host|cpu|64|cpu|None": other}))
    assert M.read_record() is None  # another machine's spread never widens this one's CIs
    path.write_text(json.dumps({**data, "another-host|cpu|64|cpu|None": other}))
    assert M.read_record() == _record()


def test_a_broken_record_is_one_line_naming_the_fix(cache):
    path = cache / "machine" / "speedup_between_runs.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(Exception, match="speedup_reruns.py --record"):
        M.read_record()


def test_a_row_is_widened_and_says_by_what():
    row = _row()
    M.widen_row(row, _record(0.05))
    assert row.speedup_ci_low < 1.45 and row.speedup_ci_high > 1.55
    assert row.speedup_between_run_sd == 0.05
    assert "10 reruns x 6 cells of tiny-kimi" in row.speedup_between_run_source
    point = _row(0.65, None, None)  # no CI of its own (one request's worth): the record gives it one
    M.widen_row(point, _record(0.05))
    assert point.speedup_ci_low < 0.65 < point.speedup_ci_high
    untouched = _row()
    M.widen_row(untouched, None)
    assert (untouched.speedup_ci_low, untouched.speedup_between_run_sd) == (1.45, None)


def test_the_summary_says_what_the_speedup_cis_carry():
    own = M.speedup_ci_note([_row()])
    assert own is not None and "this run's own" in own and "speedup_reruns.py --record" in own
    row = _row()
    M.widen_row(row, _record(0.05))
    assert "between-run SD of ln speedup (5.0%" in M.speedup_ci_note([row, _row()])
    assert "in 1 of 2 cells" in M.speedup_ci_note([row, _row()])
    assert M.speedup_ci_note([_row(None, None, None)]) is None


def test_request_ci_takes_both_widenings_back_out():
    """A between-run SD estimated against drift-widened CIs hides the spread it is for: the rerun
    study reads each row back to the CI over its requests alone."""
    from harness.analysis.machine import FLAG, widen

    row = _row(1.5, 1.45, 1.55)
    row.machine_drift = 0.3
    row.flags = [f"{FLAG}: the machine's speed moved 30%"]
    row.speedup_ci_low, row.speedup_ci_high = widen(1.45, 1.55, 1.5, 0.3)
    M.widen_row(row, _record(0.09))
    assert row.speedup_ci_low < 1.45 / 1.3  # both widenings are in the reported CI
    # the tau step is undone on the log scale (a symmetric CI about the point, as widen_row made it)
    own = M.run_own_ci(row)
    assert own.log_se == pytest.approx(M.Speedup(1.5, 1.45 / 1.3, 1.55 * 1.3).log_se)
    req = M.request_ci(row)
    assert req.log_se == pytest.approx(M.Speedup(1.5, 1.45, 1.55).log_se, rel=0.05)
    assert req.low < 1.5 < req.high
    row.flags = []  # an unflagged row's CI was never drift-widened: nothing more to take out
    assert M.request_ci(row) == own


def test_an_older_record_without_the_quiet_drift_still_reads(cache):
    path = M.write_record(_record())
    data = json.loads(path.read_text())
    (entry,) = data.values()
    del entry["sentinel_quiet_drift"]
    path.write_text(json.dumps(data))
    assert M.read_record().sentinel_quiet_drift is None


def test_the_suite_reads_no_record(cache, monkeypatch):
    """$HARNESS_MACHINE_RECORD (tests/conftest.py sets it): a developer's record cannot move the
    suite's CIs and flags away from a fresh CI machine's."""
    M.write_record(_record())
    monkeypatch.setenv("HARNESS_MACHINE_RECORD", "/dev/null")
    assert M.read_record() is None
