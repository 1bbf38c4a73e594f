"""Is the machine steady enough for a speedup? A fixed sentinel job timed on the baseline engine
around every measured arm, so a speedup never rests on arms the machine ran at different speeds.

Sentinel: the same short batch every time (the run's first prompts, greedy, a fixed number of
  output tokens with EOS ignored, all at once on the baseline engine); its output tok/s is the
  machine's speed index at that moment. Never longer than the arms it brackets
  (`sentinel_tokens`): on a grid of short cells a 48-token sentinel would cost more than the
  cells. The speed of the model under test does not enter it, only
  what the machine gives the engine.
Noise: the spread of CALIBRATION_RUNS sentinels back to back when the baseline engine is warm,
  spread = max / min − 1 (a steady machine's own jitter at this job's size).
Drift of a cell: the spread of the sentinels that bracket the two arms its speedup pairs (before
  and after each arm; for a shared baseline arm, the ones that bracketed it when it was measured).
  With engines one at a time (bench.engine_schedule, harness/bench/one_at_a_time.py) no baseline
  engine is up beside the speculative one, so that engine times the sentinel itself at its start
  and end: its readings compare only with each other (its speed is not the baseline engine's),
  and the drift is the larger of the two engines' own spreads.
Tolerance: NOISE_FACTOR × noise, held between DRIFT_FLOOR and DRIFT_CEILING: the floor so a very
  quiet calibration does not flag a steady machine's jitter, the ceiling so a calibration taken while
  the machine was busy (measured: 12 % read as noise, 36 % tolerance, a 35 % drift passed) cannot
  blind the check. A cell whose drift exceeds it is flagged
  `MACHINE NOISE` with the figures, and its speedup CI is widened by the drift: [low / (1 + d),
  high × (1 + d)] (the speed change seen between the arms bounds the error it can cause). The gate
  never passes a flagged speedup against a floor (harness/results/gate/cell_checks.py).
Quiet drift: where this machine has a record (harness/bench/machine_record.py, measured by
  bench/speedup_reruns.py --record), the 95th percentile of the drift its cells showed over
  back-to-back reruns with no other process taking CPU is the tolerance's floor. Measured on a
  2-core VM: a 4-request sentinel's drift had median 14 % and 26 % of cells over 20 % with nothing
  else running (single short batches there lose up to 30 %), so the calibration-based tolerance
  flagged most cells of a quiet machine; that jitter is what the record's between-run SD adds to
  every speedup CI, and the foreign-CPU check below still catches a neighbour.
Foreign CPU: the share of the machine's CPU time that processes outside the run used while each
  arm ran (the machine's busy CPU time less the run's own process tree's, read with psutil by
  harness/bench/cpu_ticks.py).
  The sentinel alone under-reads contention: it is timed on the baseline engine, and on a 2-core
  machine a CPU-bound neighbour slowed a speculative arm (more, smaller kernels per step, each a
  thread barrier) 12-15 % more than the sentinel moved (README, bench/machine_noise.py). Above
  FOREIGN_CPU_LIMIT the cell is flagged whatever the sentinels read: a speedup measured under
  contention is not the quiet machine's, and widening its CI cannot make it one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CALIBRATION_RUNS = 3
SENTINEL_PROMPTS = 4
SENTINEL_TOKENS = 48


def sentinel_tokens(max_tokens: int) -> int:
    """Output tokens per sentinel request: SENTINEL_TOKENS, or the arms' own max_tokens if shorter
    (calibration times the same job, so the noise it reads is that job's)."""
    return min(SENTINEL_TOKENS, max_tokens)


NOISE_FACTOR = 3.0
DRIFT_FLOOR = 0.10
DRIFT_CEILING = 0.20
FLAG = "MACHINE NOISE"


def noise_flag(flags: Sequence[str] | None) -> str | None:
    """The row's MACHINE NOISE flag, if it carries one."""
    return next((f for f in flags or () if str(f).startswith(FLAG)), None)


FOREIGN_CPU_LIMIT = 0.10  # of all the machine's CPUs: an idle machine's daemons stay near 0.01


@dataclass(frozen=True)
class CpuTimes:
    """Busy CPU seconds (user, nice, system, irq, softirq, steal) of the whole machine and of the
    run's own process tree (the harness and every engine process below it) at monotonic time `t`."""

    t: float
    machine: float
    own: float
    ncpu: int


def foreign_cpu(a: CpuTimes, b: CpuTimes) -> float:
    """The share (0-1) of the machine's CPU time between readings a and b that processes outside
    the run used (a VM's steal counts: it is time someone else had)."""
    span = (b.t - a.t) * a.ncpu
    if span <= 0:
        return 0.0
    return min(1.0, max(0.0, ((b.machine - a.machine) - (b.own - a.own)) / span))


def spread(tok_s: Sequence[float]) -> float:
    """max / min − 1 of positive speeds (0 with fewer than two)."""
    xs = [x for x in tok_s if x and x > 0]
    return max(xs) / min(xs) - 1 if len(xs) >= 2 else 0.0


QUIET_DRIFT_QUANTILE = 0.95


def quiet_drift(drifts: Sequence[float]) -> float | None:
    """The QUIET_DRIFT_QUANTILE of cells' sentinel drifts measured with no other process taking CPU
    (the machine's own jitter; a flag below it would be a false alarm 1 time in 20 at most); None
    with fewer than 20 cells, too few for that quantile."""
    xs = sorted(d for d in drifts if d is not None and d >= 0)
    if len(xs) < 20:
        return None
    return statistics.quantiles(xs, n=20, method="inclusive")[round(QUIET_DRIFT_QUANTILE * 20) - 1]


def tolerance(noise: float, quiet_drift: float | None = None) -> float:
    """The drift a cell may show: NOISE_FACTOR × the calibrated noise within [DRIFT_FLOOR,
    DRIFT_CEILING], and never below `quiet_drift`, the drift this machine's sentinels showed on
    quiet reruns (harness/bench/machine_record.py): below it, a flag is the machine's own jitter."""
    return max(min(max(NOISE_FACTOR * noise, DRIFT_FLOOR), DRIFT_CEILING), quiet_drift or 0.0)


@dataclass(frozen=True)
class MachineReading:
    """The sentinels around one cell's two arms and the machine's calibrated noise."""

    baseline_tok_s: tuple[float, ...]  # sentinels bracketing the baseline arm the speedup uses
    speculative_tok_s: tuple[float, ...]  # sentinels bracketing the speculative arm
    noise: float
    baseline_remeasured: bool = False  # the shared baseline arm was measured again beside this arm
    foreign_cpu: float = 0.0  # the most any of the two arms' runs saw (foreign_cpu)
    speculative_own_engine: bool = False  # speculative_tok_s timed on the speculative engine (one at a time)
    quiet_drift: float | None = None  # this machine's sentinel drift on quiet reruns (tolerance's floor)

    @property
    def sentinels(self) -> tuple[float, ...]:
        return self.baseline_tok_s + self.speculative_tok_s

    @property
    def drift(self) -> float:
        if self.speculative_own_engine:  # two engines' speeds: each compared with itself only
            return max(spread(self.baseline_tok_s), spread(self.speculative_tok_s))
        return spread(self.sentinels)

    @property
    def tolerance(self) -> float:
        return tolerance(self.noise, self.quiet_drift)

    @property
    def steady(self) -> bool:
        return self.drift <= self.tolerance and self.foreign_cpu <= FOREIGN_CPU_LIMIT

    def flag(self) -> str | None:
        if self.steady:
            return None
        again = "; the shared baseline arm was re-measured beside this arm" if self.baseline_remeasured else ""
        why = []
        if self.foreign_cpu > FOREIGN_CPU_LIMIT:
            why.append(
                f"other processes used {self.foreign_cpu:.0%} of the machine's CPUs while its arms ran (limit "
                f"{FOREIGN_CPU_LIMIT:.0%}): contention slows a speculative arm more than a baseline one"
            )
        if self.drift > self.tolerance:
            why.append(
                f"the machine's speed moved {self.drift:.0%} across this cell's arms (sentinel {self._ranges()}; "
                f"steady noise {self.noise:.1%}, tolerance {self.tolerance:.0%}"
                + (
                    ", this machine's quiet-rerun drift"
                    if self.quiet_drift and self.tolerance == self.quiet_drift
                    else ""
                )
                + ")"
            )
        return (
            f"{FLAG}: {'; '.join(why)}; speedup CI widened by the drift{again}: this speedup is not the quiet "
            "machine's, rerun on a quiet machine"
        )

    def _ranges(self) -> str:
        """The sentinels' range in tok/s, per engine when each engine timed its own."""

        def span(tok_s: Sequence[float]) -> str:
            xs = [x for x in tok_s if x > 0]
            return f"{min(xs):.0f}-{max(xs):.0f} tok/s" if xs else "no reading"

        if not self.speculative_own_engine:
            return span(self.sentinels)
        return (
            f"{span(self.baseline_tok_s)} on the baseline engine, {span(self.speculative_tok_s)} on the speculative one"
        )


def widen(
    low: float | None, high: float | None, point: float | None, drift: float
) -> tuple[float | None, float | None]:
    """A speedup CI widened by a machine drift d: [low / (1 + d), high × (1 + d)] (the point value
    stands in for a missing end)."""
    lo, hi = (point if low is None else low), (point if high is None else high)
    return (None if lo is None else lo / (1 + drift), None if hi is None else hi * (1 + drift))
