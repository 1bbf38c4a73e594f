"""The one-at-a-time engine schedule (harness/bench/one_at_a_time.py): its phase plan, its
refusals, and the order it runs engines and arms in (fake engines). Its machine reading's drift:
tests/analysis/test_machine.py; the real-engine comparison with the side-by-side schedule:
tests/e2e/test_one_at_a_time_engine.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.analysis.machine import MachineReading
from harness.bench.grid import CellSpec
from harness.bench.one_at_a_time import (
    bench_one_at_a_time,
    phase_plan,
    refuse_what_one_at_a_time_cannot_run,
)
from harness.bench.placement import baseline_key
from harness.errors import BadInput
from harness.recipe import load_recipe
from harness.results.manifest import read_manifest_data
from tests.conftest import PLAIN_RECIPE

KIMI = Path(__file__).resolve().parents[2] / "train" / "kimi-k2.5.toml"


def _cell(draft: str, k: int, suite: str = "code", c: int = 1, t: float = 0.0) -> CellSpec:
    return CellSpec(draft, suite, k, c, t)


def test_repeats_split_around_the_speculative_engines_with_one_at_least_after():
    from harness.cluster import baseline_repeats  # the plan prices the same split

    assert [baseline_repeats(r) for r in (1, 2, 3, 4, 5)] == [(1, 1), (1, 1), (2, 1), (2, 2), (3, 2)]
    assert [phase_plan({}, r).baseline_repeats for r in (1, 3)] == [(1, 1), (2, 1)]


def test_the_plan_measures_one_baseline_arm_per_suite_concurrency_temperature():
    a1, a3 = _cell("a", 1), _cell("a", 3)
    a1c4, b3t = _cell("a", 1, c=4), _cell("b", 3, t=1.0)
    plan = phase_plan({("a", 1): [a1, a1c4], ("a", 3): [a3], ("b", 3): [b3t]}, 3)
    assert list(plan.engines) == [("a", 1), ("a", 3), ("b", 3)]
    assert plan.cells == [a1, a1c4, a3, b3t]
    # each arm under the first cell that needs it (the rows' baseline_cell), as bench.shared_baseline shares it
    assert plan.baselines == {baseline_key(a1): a1, baseline_key(a1c4): a1c4, baseline_key(b3t): b3t}
    assert (plan.repeats, plan.baseline_repeats) == (3, (2, 1))


def _recipe(path, *sets: str):
    return load_recipe(path, list(sets))


@pytest.mark.parametrize(
    ("sets", "match"),
    [
        (["bench.dynamic_k=true"], r"cannot run bench.dynamic_k .* set bench.dynamic_k = false"),
        (["bench.race=true"], r"cannot run bench.race \(.*every arm's engine up together\): set bench.race = false"),
        (
            ["bench.shared_baseline=false"],
            r"cannot run bench.shared_baseline = false.* set bench.shared_baseline = true",
        ),
        (
            [
                "bench.engine='attach'",
                "bench.url='http://a'",
                "bench.baseline_url='http://b'",
                "bench.k=[3]",
                "bench.reference_drafts=[]",
            ],
            r'"attach" starts no engine.*bench.engine_schedule = "side_by_side"',
        ),
    ],
)
def test_what_one_at_a_time_cannot_run_is_refused_in_one_line(sets, match):
    with pytest.raises(BadInput, match=match) as e:
        refuse_what_one_at_a_time_cannot_run(_recipe(PLAIN_RECIPE, "bench.engine_schedule='one_at_a_time'", *sets))
    assert "\n" not in e.value.message and 'bench.engine_schedule = "one_at_a_time"' in e.value.message
    refuse_what_one_at_a_time_cannot_run(_recipe(PLAIN_RECIPE, *sets))  # side by side (a CPU's auto): runs


def test_auto_says_why_it_runs_one_at_a_time():
    tp8 = ["engine.device='cuda'", "engine.tensor_parallel_size=8"]  # two of them do not fit an 8-GPU node
    with pytest.raises(BadInput, match=r'"auto" runs engines one at a time .* 8 GPUs each do not fit a node of 8'):
        refuse_what_one_at_a_time_cannot_run(_recipe(PLAIN_RECIPE, *tp8, "bench.shared_baseline=false"))
    refuse_what_one_at_a_time_cannot_run(_recipe(KIMI))  # the production recipe as written: runs


def test_the_bench_refuses_before_any_engine_or_run_folder(tmp_path):
    from harness.bench.loop import run_bench
    from harness.ui import Reporter

    def no_engine(plan, name):
        raise AssertionError(f"engine {name} started")

    recipe = _recipe(PLAIN_RECIPE, "bench.engine_schedule='one_at_a_time'", "bench.dynamic_k=true")
    with pytest.raises(BadInput, match="bench.dynamic_k"):
        run_bench(recipe, [], tmp_path / "run", Reporter(), engine_factory=no_engine)
    assert not (tmp_path / "run").exists()


# ----------------------------------------------------------------------------- the order, on fake engines


class FakeEngine:
    kind = "fake"

    def __init__(self, log: list, name: str):
        self.log, self.name = log, name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.log.append(("close", self.name))


@dataclass
class FakeSteps:
    """Each step logged; sentinels read 100 tok/s on a baseline engine and 250 on a speculative one."""

    run_dir: Path
    verifier: str = "v"
    log: list = field(default_factory=list)
    finished: dict = field(default_factory=dict)
    quiet_drift: float | None = None

    def start(self, engine, phase):
        name = "baseline" if engine is None else f"{engine[0]}-k{engine[1]}"
        self.log.append(("start", name, phase))
        return FakeEngine(self.log, name)

    def warm_up(self, engine):
        self.log.append(("warm_up", engine.name))

    def calibrate(self, engine):
        self.log.append(("calibrate", engine.name))
        return 0.01

    def sentinel(self, engine):
        self.log.append(("sentinel", engine.name))
        return 100.0 if engine.name == "baseline" else 250.0

    def measure(self, engine, cell, arm, repeats):
        self.log.append(("measure", engine.name, cell.id, repeats))
        arm.num_requests += repeats
        return 0.02

    def finish(self, cell, base_engine, arms, baseline_cell, machine):
        self.log.append(("finish", base_engine.name, cell.id))
        self.finished[cell.id] = (arms, baseline_cell, machine)


def test_engines_run_one_at_a_time_baseline_before_and_after(tmp_path):
    a1, a1c4, a3 = _cell("a", 1), _cell("a", 1, c=4), _cell("a", 3)
    steps = FakeSteps(tmp_path)
    bench_one_at_a_time(steps, phase_plan({("a", 1): [a1, a1c4], ("a", 3): [a3]}, 1))
    live, most = 0, 0
    for e in steps.log:
        live += {"start": 1, "close": -1}.get(e[0], 0)
        most = max(most, live)
    assert most == 1 and live == 0
    assert [e[1:] for e in steps.log if e[0] == "start"] == [
        ("baseline", "A1"),
        ("a-k1", "B"),
        ("a-k3", "B"),
        ("baseline", "A2"),
    ]
    a1_log = steps.log[: steps.log.index(("close", "baseline"))]
    assert a1_log == [
        ("start", "baseline", "A1"),
        ("warm_up", "baseline"),
        ("calibrate", "baseline"),
        ("sentinel", "baseline"),
        ("measure", "baseline", a1.id, 1),  # two arms: (code, c=1) and (code, c=4), ceil(1/2) repeats each
        ("measure", "baseline", a1c4.id, 1),
        ("sentinel", "baseline"),
    ]
    b_log = [e for e in steps.log if e[1] == "a-k1"]
    assert b_log == [
        ("start", "a-k1", "B"),
        ("warm_up", "a-k1"),
        ("sentinel", "a-k1"),
        ("measure", "a-k1", a1.id, 1),
        ("measure", "a-k1", a1c4.id, 1),
        ("sentinel", "a-k1"),
        ("close", "a-k1"),
    ]
    tail = steps.log[steps.log.index(("start", "baseline", "A2")) :]
    assert [e[0] for e in tail] == ["start", "warm_up", "sentinel", "measure", "measure", "sentinel"] + [
        "finish"
    ] * 3 + ["close"]
    assert [e[2] for e in tail if e[0] == "finish"] == [a1.id, a1c4.id, a3.id]  # written with the baseline up


def test_every_cell_pairs_its_speculative_arm_with_the_shared_baseline_arm_and_a_reading(tmp_path):
    a1, a3 = _cell("a", 1), _cell("a", 3)
    steps = FakeSteps(tmp_path)
    bench_one_at_a_time(steps, phase_plan({("a", 1): [a1], ("a", 3): [a3]}, 3))
    (b1, s1), owner1, m1 = steps.finished[a1.id]
    (b3, s3), owner3, m3 = steps.finished[a3.id]
    assert b1 is b3 and owner1 == owner3 == a1.id  # one baseline arm, recorded under its first cell
    assert b1.num_requests == 3 and s1.num_requests == s3.num_requests == 3  # 2 in A1 + 1 in A2; R in B
    assert isinstance(m1, MachineReading) and m1.speculative_own_engine
    assert m1.baseline_tok_s == (100.0,) * 4 and m1.speculative_tok_s == (250.0, 250.0)  # A1, A2 / B start, end
    assert m1.drift == 0 and m1.flag() is None and m1.foreign_cpu == 0.02 and m1.noise == 0.01


def test_the_manifest_records_the_phases_in_order(tmp_path):
    steps = FakeSteps(tmp_path)
    bench_one_at_a_time(steps, phase_plan({("a", 1): [_cell("a", 1)]}, 2))
    phases = read_manifest_data(tmp_path, missing_ok=True)["engine_phases"]
    assert [(p["phase"], p["engine"]) for p in phases] == [("A1", "baseline"), ("B", "a-k1"), ("A2", "baseline")]
    times = [t for p in phases for t in (p["started_at"], p["ended_at"])]
    assert times == sorted(times) and all(p["verifier"] == "v" and p["arms"] for p in phases)


def test_a_phase_that_fails_has_no_end_and_writes_no_cell(tmp_path):
    class Broken(FakeSteps):
        def measure(self, engine, cell, arm, repeats):
            if engine.name != "baseline":
                raise RuntimeError("engine died")
            return super().measure(engine, cell, arm, repeats)

    steps = Broken(tmp_path)
    with pytest.raises(RuntimeError):
        bench_one_at_a_time(steps, phase_plan({("a", 1): [_cell("a", 1)]}, 1))
    phases = read_manifest_data(tmp_path, missing_ok=True)["engine_phases"]
    assert [p["phase"] for p in phases] == ["A1", "B"] and "ended_at" not in phases[1]
    assert ("close", "a-k1") in steps.log and not steps.finished


def test_without_sentinels_no_reading(tmp_path):
    class Quiet(FakeSteps):
        def calibrate(self, engine):
            return None  # bench.machine_sentinel off

    steps = Quiet(tmp_path)
    bench_one_at_a_time(steps, phase_plan({("a", 1): [_cell("a", 1)]}, 1))
    assert not any(e[0] == "sentinel" for e in steps.log)
    assert steps.finished[_cell("a", 1).id][2] is None
