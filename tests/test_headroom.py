"""`harness headroom` on real vLLM-CPU engines: a tiny sweep (baseline, the session's trained draft at
its own acceptance and at vLLM's synthetic acceptance, k = 1 and 3, concurrency 1, 2 and 4) fits a cost
model that rises with k and gives a speedup curve rising with AL, and the draft's cells land on it."""

from __future__ import annotations

import json
import time

import pytest

from harness.analysis.headroom import CostFit, StepPoint, expected_al, geometric_rates
from harness.headroom import HeadroomSettings, analyse, run_sweep, write_headroom
from harness.recipe import load_recipe
from harness.results.headroom_view import write_headroom_pages
from harness.ui import Reporter
from tests.conftest import PLAIN_RECIPE

pytestmark = pytest.mark.slow

TINY = HeadroomSettings(ks=(1, 3), concurrencies=(1, 2, 4), profiles=(0.9,), repeats=2, num_prompts=4, max_tokens=24)


def test_tiny_sweep_fits_a_monotone_curve(tmp_path, kimi_trained_run):
    recipe = load_recipe(PLAIN_RECIPE, ["verifier.standin='kimi-k2.5'"])
    t0 = time.perf_counter()
    points, engines = run_sweep(recipe, kimi_trained_run.draft_dir, tmp_path, TINY, Reporter())
    took = time.perf_counter() - t0
    assert len(engines) == TINY.engines()
    kinds = {p.kind for p in points}
    assert kinds == {"baseline", "draft", "synthetic"}
    assert len(points) == TINY.batches()
    # vLLM's synthetic acceptance (harness/engine/cpu_synthetic.py) gives the AL its rates ask for
    for p in (p for p in points if p.kind == "synthetic"):
        assert p.acceptance_length == pytest.approx(expected_al((0.9,) * p.k, p.k), abs=0.6)
        assert p.rates == geometric_rates(0.9, p.k)

    found = analyse(points, TINY)
    fit = CostFit.from_dict(found["fit"])
    for c in TINY.concurrencies:
        steps = [fit.step_s(k, c).value for k in (0, 1, 3)]
        assert steps[0] < steps[1] < steps[2], (c, steps)  # a step costs more with every draft token
        curve = [fit.speedup(al, 3, c).value for al in (1.0, 2.0, 3.0, 4.0)]
        assert curve == sorted(curve) and curve[0] < 1.0  # no acceptance: speculation only costs
    assert len(found["draft_cells"]) == 6
    for cell in found["draft_cells"]:
        assert 0.3 < cell["efficiency"] < 3.0  # the draft's cells sit near what its AL allows
    path = write_headroom(tmp_path, TINY, points, engines, found)
    page = write_headroom_pages(found, tmp_path)
    stored = json.loads(path.read_text())
    assert [StepPoint.from_dict(p) for p in stored["points"]] == points
    assert (tmp_path / "headroom.png").stat().st_size > 10_000 and page.exists()
    print(f"tiny headroom sweep: {took:.0f} s, {TINY.engines()} engines")
