"""The machine's clock (harness/bench/clock.py) on a scripted engine: which job the sentinel is,
how its tok/s is read, and how calibration turns a few runs into the machine's noise."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.analysis import machine
from harness.bench.clock import Clock, calibrate_clock, sentinel_tok_s
from harness.engine.base import BatchResult, GenOutput, GenRequest, Sampling
from harness.engine.counters import SpecCounters
from harness.recipe import load_recipe
from tests.conftest import PLAIN_RECIPE


class ScriptedEngine:
    """Answers every request with its max_tokens tokens in the next scripted wall time."""

    def __init__(self, walls: list[float], fail: bool = False):
        self.walls, self.fail, self.calls = list(walls), fail, []

    def generate(self, reqs, sampling, concurrency):
        self.calls.append((reqs, sampling, concurrency))
        outs = [
            GenOutput(r.request_id, len(r.prompt_token_ids), [1] * r.max_tokens, error="boom" if self.fail else None)
            for r in reqs
        ]
        return BatchResult(outs, self.walls.pop(0), SpecCounters())


def _prompts(n: int):
    return [(SimpleNamespace(id=f"p{i}"), [i, i + 1]) for i in range(n)]


def test_calibration_times_the_first_prompts_greedy_at_a_fixed_length_and_keeps_their_spread():
    recipe = load_recipe(PLAIN_RECIPE, ["bench.machine_sentinel=true"])
    engine = ScriptedEngine([1.0, 1.25, 1.1])
    clock = calibrate_clock(engine, _prompts(machine.SENTINEL_PROMPTS + 2), recipe)
    assert clock is not None
    assert len(engine.calls) == machine.CALIBRATION_RUNS
    reqs, sampling, concurrency = engine.calls[0]
    assert [r.prompt_token_ids for r in reqs] == [(i, i + 1) for i in range(machine.SENTINEL_PROMPTS)]
    assert {r.max_tokens for r in reqs} == {machine.sentinel_tokens(recipe.bench.max_tokens)}
    assert concurrency == len(reqs)  # all at once
    assert sampling.temperature == 0.0 and sampling.ignore_eos and sampling.seed == recipe.engine.seed
    assert clock.noise == pytest.approx(0.25)  # max / min - 1 of the three runs' tok/s (walls 1.0 and 1.25)


def test_no_clock_when_the_sentinel_is_off():
    recipe = load_recipe(PLAIN_RECIPE, ["bench.machine_sentinel=false"])
    engine = ScriptedEngine([])
    assert calibrate_clock(engine, _prompts(4), recipe) is None
    assert engine.calls == []


def test_a_failed_or_instant_sentinel_reads_nothing():
    clock = Clock((GenRequest("sentinel-0", (1, 2), 8),), Sampling(), 0.0)
    assert sentinel_tok_s(ScriptedEngine([0.5]), clock) == 16.0
    assert sentinel_tok_s(ScriptedEngine([0.5], fail=True), clock) == 0.0  # spread ignores 0
    assert sentinel_tok_s(ScriptedEngine([0.0]), clock) == 0.0
