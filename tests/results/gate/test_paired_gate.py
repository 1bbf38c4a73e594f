"""The paired gate on a run folder (harness/results/gate/paired_run.py, evaluate, render): the
candidate's cells matched to the baseline draft's in the same run, read from their side files."""

from __future__ import annotations

import json

import numpy as np

from harness.results.gate.baseline import gate_run, update_baseline
from harness.results.gate.evaluate import GateOptions
from harness.results.gate.render import to_junit, to_markdown, verdict_dict
from harness.results.runs import read_run
from harness.results.table import cell_id
from tests.results_fixtures import make_run

CELLS = [dict(draft=d, suite=s) for d in ("eagle", "baseline_draft") for s in ("chat", "code")]


def _records(seed: int, keep: float, n: int = 40) -> list[dict]:
    """Per-request records with per-step accepted/drafted arrays (k = 3); `keep` thins acceptance."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        p = float(np.clip(rng.normal(0.6, 0.2), 0.05, 0.95))
        acc = np.minimum(rng.geometric(1 - p, 30) - 1, 3)
        thin = np.random.default_rng(1000 + seed * 100 + i)
        acc = [int(thin.binomial(a, keep)) if keep < 1 else int(a) for a in acc]
        out.append({"request_id": f"q{i}", "repeat": 0, "output_token_ids": [], "accepted": acc, "drafted": [3] * 30})
    return out


def _paired_run(tmp_path, keep: float):
    folder = make_run(tmp_path, f"paired-{keep}", CELLS)
    req = folder / "cells" / "requests"
    req.mkdir(parents=True, exist_ok=True)
    for d in ("eagle", "baseline_draft"):
        for j, s in enumerate(("chat", "code")):
            recs = _records(j, keep if d == "eagle" else 1.0)
            (req / f"{cell_id(d, s, 3, 1, 0.0)}.json").write_text(json.dumps({"speculative": recs}))
    return folder


def test_a_draft_against_itself_passes_and_the_stored_al_checks_give_way(tmp_path):
    run = read_run(_paired_run(tmp_path, 1.0))
    base_dir = tmp_path / "baselines" / "b"
    update_baseline(make_run(tmp_path, "ref", [dict(draft="eagle", suite=s) for s in ("chat", "code")]), base_dir)
    res = gate_run(run, base_dir, GateOptions(draft="eagle", baseline_draft="baseline_draft"))
    assert res.verdict == "pass" and res.exit_code == 0 and res.baseline_kind == "paired"
    assert len(res.paired) == 2 and all(c.verdict == "pass" for c in res.paired)
    assert not [c for c in res.checks if c.metric.startswith(("acceptance_length", "per_position_rate"))]
    v = verdict_dict(res)
    assert v["verdict"] == "pass" and v["baseline_kind"] == "paired" and v["detectable_drop"] is not None
    assert "baseline: paired" in to_markdown(res)


def test_a_much_weaker_candidate_fails_paired_without_a_stored_baseline(tmp_path):
    run = read_run(_paired_run(tmp_path, 0.6))
    res = gate_run(run, None, GateOptions(draft="eagle", baseline_draft="baseline_draft"))
    assert res.verdict == "fail" and res.exit_code == 1
    assert all(c.estimates[0].high < -0.05 for c in res.paired)
    assert "gate fail (paired" in res.summary()
    # a CI system reading junit.xml sees the paired verdicts: the AL drop of each cell is a failure
    import xml.etree.ElementTree as ET

    suite = ET.fromstring(to_junit(res)).find("testsuite")
    assert suite is not None and int(suite.get("failures") or 0) >= 2
    failed = [tc.get("name") for tc in suite.iter("testcase") if tc.find("failure") is not None]
    assert failed.count("acceptance_length") == 2


def test_without_the_baseline_draft_the_stored_gate_is_used(tmp_path):
    ref = make_run(tmp_path, "ref", [dict(draft="eagle", suite=s) for s in ("chat", "code")])
    base_dir = tmp_path / "baselines" / "b"
    update_baseline(ref, base_dir)
    res = gate_run(read_run(ref), base_dir, GateOptions(draft="eagle", baseline_draft="baseline_draft"))
    assert res.baseline_kind == "stored" and res.verdict == "pass" and not res.paired
    assert verdict_dict(res)["baseline_kind"] == "stored"


def test_the_report_reads_the_paired_verdict_back(tmp_path):
    from harness.results.gate.render import write_gate_files
    from harness.results.report import gate_line, read_gate

    folder = _paired_run(tmp_path, 1.0)
    res = gate_run(read_run(folder), None, GateOptions(draft="eagle", baseline_draft="baseline_draft"))
    write_gate_files(res, verdict=folder / "gate" / "gate.json")
    line = gate_line(read_gate(folder))
    assert line.startswith("Gate: pass (paired against the baseline's draft; tolerance 5.0%")


def test_a_stored_number_gate_that_cannot_see_its_tolerance_reads_inconclusive(tmp_path):
    wide = [dict(draft="eagle", suite=s, ci=(1.6, 3.4)) for s in ("chat", "code")]
    ref = make_run(tmp_path, "ref", wide)
    base_dir = tmp_path / "baselines" / "b"
    update_baseline(ref, base_dir)
    res = gate_run(read_run(make_run(tmp_path, "again", wide)), base_dir, GateOptions(draft="eagle"))
    assert not res.failures and res.power_warnings and res.exit_code == 0
    assert res.verdict == "inconclusive" and res.detectable_drop is not None and res.detectable_drop > 0.05
    assert res.summary().startswith("gate inconclusive:")
    assert verdict_dict(res)["verdict"] == "inconclusive"


def _drawn_in_rounds(folder, **fields) -> None:
    for f in (folder / "cells").glob("*.json"):
        data = json.loads(f.read_text())
        for row in data["rows"]:
            row.update(prompts_budget=80, sequential_planned=80, sequential_stop="pass", num_prompts=40, **fields)
        f.write_text(json.dumps(data))


def test_a_cell_drawn_in_rounds_is_judged_at_the_look_it_stopped_on(tmp_path):
    """Rows that say the bench drew the cell in rounds (sequential_planned, sequential_looks) get that
    look's repeated confidence interval for every metric, and the gate's table says how many prompts
    were drawn."""
    folder = _paired_run(tmp_path, 1.0)
    _drawn_in_rounds(folder, sequential_looks=[16, 24, 32, 40])
    res = gate_run(read_run(folder), None, GateOptions(draft="eagle", baseline_draft="baseline_draft"))
    assert res.verdict == "pass" and all(e.sequential for c in res.paired for e in c.estimates)
    assert all(c.sequential is not None and c.sequential.looks == 4 for c in res.paired)
    md = to_markdown(res)
    assert "drawn in rounds: 40 of 80 prompts, stopped on pass" in md and "repeated confidence interval" in md


def test_a_cell_drawn_in_rounds_without_its_looks_is_not_judged_as_if_fixed(tmp_path):
    """Rows from a bench that drew rounds but did not record its looks: the boundary it stopped on cannot
    be rebuilt, and a fixed t interval would not hold after the stop, so the cell says so and is
    inconclusive."""
    folder = _paired_run(tmp_path, 1.0)
    _drawn_in_rounds(folder)
    res = gate_run(read_run(folder), None, GateOptions(draft="eagle", baseline_draft="baseline_draft"))
    assert res.verdict == "inconclusive"
    assert all(c.problem and "looks recorded" in c.problem and "rerun the bench" in c.problem for c in res.paired)


def test_the_paired_gate_reads_the_runs_own_tolerance_unless_given(tmp_path):
    """A run benched with gate.tolerance = 0.025 (its sequential rounds stopped on it) is gated at 0.025
    by `harness gate RUN`, not at the stored-baseline default; --tolerance still wins."""
    folder = _paired_run(tmp_path, 1.0)
    manifest = folder / "manifest.json"
    data = json.loads(manifest.read_text())
    data.setdefault("recipe", {}).setdefault("gate", {})["tolerance"] = 0.025
    manifest.write_text(json.dumps(data))
    opts = GateOptions(draft="eagle", baseline_draft="baseline_draft")
    assert gate_run(read_run(folder), None, opts).tolerance == 0.025
    assert (
        gate_run(
            read_run(folder), None, GateOptions(tolerance=0.1, draft="eagle", baseline_draft="baseline_draft")
        ).tolerance
        == 0.1
    )
    assert gate_run(read_run(_paired_run(tmp_path / "plain", 1.0)), None, opts).tolerance == 0.05
