"""This machine's measured between-run SD of a speedup (harness/analysis/between_runs.py), kept in the
cache and applied to every speedup CI a bench writes on the same machine.

Measured by `bench/speedup_reruns.py --record` from back-to-back reruns of one bench; keyed by the
machine (host, CPU model, core count, device, GPU), so a record made on one machine never widens
another's CIs. A cell widened by it says so: `speedup_between_run_sd` (tau, log scale) and
`speedup_between_run_source` (what the record rests on). Without a record the CI is the run's own
(its requests and repeats), and the run's summary says that a rerun may move it further.
"""

from __future__ import annotations

import math
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.analysis.between_runs import Z95, Speedup, widened
from harness.analysis.machine import noise_flag
from harness.jsonfiles import read_json_file
from harness.paths import cache_root
from harness.provenance import atomic_write_json, hardware
from harness.schema import CellRow


@dataclass(frozen=True)
class MachineRecord:
    """tau and the sentinel's quiet drift, with their provenance: how many runs and cells, which
    recipe and draft, when."""

    tau: float
    runs: int
    cells: int
    recipe: str
    measured_at: str
    run_dirs: tuple[str, ...] = ()
    # the 95th percentile of the sentinel drift across a cell's arms over the reruns' cells that no
    # other process took CPU from: the floor of this machine's drift tolerance (analysis/machine.py)
    sentinel_quiet_drift: float | None = None

    @property
    def source(self) -> str:
        return f"{self.runs} reruns x {self.cells} cells of {self.recipe} on this machine, {self.measured_at[:10]}"


def machine_key() -> str:
    hw = hardware()
    return "|".join(str(x) for x in (platform.node(), hw.get("cpu"), hw.get("cpu_count"), hw["device"], hw.get("gpu")))


def record_path() -> Path:
    """$HARNESS_MACHINE_RECORD (a test suite sets it to read none), else the cache's."""
    override = os.environ.get("HARNESS_MACHINE_RECORD")
    return Path(override) if override else cache_root() / "machine" / "speedup_between_runs.json"


def read_record(path: Path | None = None) -> MachineRecord | None:
    """This machine's record, or None (none measured here)."""
    path = path or record_path()
    if not path.is_file():
        return None
    data = read_json_file(path, f"delete {path} and measure again with bench/speedup_reruns.py --record")
    entry = data.get(machine_key()) if isinstance(data, dict) else None
    if not isinstance(entry, dict):
        return None
    return MachineRecord(**{**entry, "run_dirs": tuple(entry.get("run_dirs", ()))})


def write_record(record: MachineRecord, path: Path | None = None) -> Path:
    """Store `record` as this machine's (other machines' entries kept)."""
    path = path or record_path()
    data = read_json_file(path, f"delete {path}") if path.is_file() else {}
    data = data if isinstance(data, dict) else {}
    data[machine_key()] = {**asdict(record), "run_dirs": list(record.run_dirs)}
    atomic_write_json(path, data)
    return path


def widen_row(row: CellRow, record: MachineRecord | None) -> None:
    """The speculative row's speedup CI widened by this machine's between-run SD (module docstring)."""
    if record is None or row.speedup is None or row.speedup <= 0:
        return
    s = widened(Speedup(row.speedup, row.speedup_ci_low, row.speedup_ci_high), record.tau)
    row.speedup_ci_low, row.speedup_ci_high = s.low, s.high
    row.speedup_between_run_sd, row.speedup_between_run_source = round(record.tau, 5), record.source


def run_own_ci(row: CellRow) -> Speedup:
    """The speedup CI the row's own run reported: this machine's between-run SD (widen_row) taken
    back out, a MACHINE NOISE drift widening kept."""
    assert row.speedup is not None
    s = Speedup(row.speedup, row.speedup_ci_low, row.speedup_ci_high)
    tau = row.speedup_between_run_sd
    if not tau or s.low is None or s.high is None:
        return s
    half = Z95 * max(0.0, s.log_se**2 - tau**2) ** 0.5
    return Speedup(s.value, s.value * math.exp(-half), s.value * math.exp(half))


def request_ci(row: CellRow) -> Speedup:
    """The speedup CI over the row's requests and repeats alone: run_own_ci with a MACHINE NOISE
    flag's drift widening ([low / (1 + d), high × (1 + d)], analysis/machine.py) also taken out.
    What a between-run SD is estimated against: a drift-widened CI would hide the very run-to-run
    spread the estimate is for (measured: 10 reruns' pooled estimate read 0 with them in)."""
    s = run_own_ci(row)
    d = row.machine_drift
    if not d or s.low is None or s.high is None or noise_flag(row.flags) is None:
        return s
    return Speedup(s.value, min(s.value, s.low * (1 + d)), max(s.value, s.high / (1 + d)))


def speedup_ci_note(rows: list[CellRow]) -> str | None:
    """What the speedup CIs carry: this machine's between-run SD (harness/bench/machine_record.py),
    or only this run's requests and repeats, which a rerun's new engine starts can move beyond."""
    timed = [r for r in rows if r.speedup is not None]
    widened = [r for r in timed if r.speedup_between_run_sd is not None]
    if not timed:
        return None
    if widened:
        taus = sorted({r.speedup_between_run_sd for r in widened if r.speedup_between_run_sd is not None})
        return (
            f"speedup CIs include this machine's between-run SD of ln speedup ({', '.join(f'{t:.1%}' for t in taus)}; "
            f"{widened[0].speedup_between_run_source}) in {len(widened)} of {len(timed)} cells"
        )
    return (
        "speedup CIs are this run's own (its requests and repeats on one engine start each): a rerun can move a "
        "speedup beyond them; measure this machine's between-run SD once with bench/speedup_reruns.py --record"
    )
