"""The gate, the CI verdict (harness/results/gate/evaluate.py over baseline.py, docs/gate.md), on
synthetic run folders: no engines, literal numbers. One cell's checks: test_cell_checks.py; the
crossover: test_crossover_checks.py; the files it writes: test_render.py; the baseline folder:
test_baseline.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.results.gate.baseline import gate, update_baseline
from harness.results.gate.evaluate import GateOptions
from harness.results.runs import read_run
from harness.results.table import write_cell
from harness.ui import fmt
from tests.results_fixtures import BAD, MATRIX, REPO, invoke, make_run, rows_for

# ----------------------------------------------------------------------------- fixture sanity


def test_fixture_counters_give_pooled_al(runs):
    ref, _, _ = runs
    spec = [r for r in read_run(ref).rows if r.mode == "speculative"]
    assert len(spec) == 4
    assert spec[0].acceptance_length == pytest.approx(2.85)
    assert spec[0].draft_acceptance_rate == pytest.approx(185 / 300)
    assert spec[0].per_position_rates == pytest.approx([0.8, 0.6, 0.45])


# ----------------------------------------------------------------------------- gate


def test_unchanged_run_passes_even_with_another_draft_label(runs):
    _, base_dir, more = runs
    run = more("same", [dict(m, draft="eagle-v2") for m in MATRIX])
    res = gate(run, base_dir)
    assert res.exit_code == 0 and len(res.checks) == 4 * 4  # AL + 3 positions per cell
    code, out, _ = invoke(["gate", run, "--baseline", base_dir])
    assert code == 0, out
    assert "gate passed" in out


def test_planted_regression_exits_1_and_names_the_cell(runs):
    _, base_dir, more = runs
    run = more("worse", [dict(MATRIX[0], per_pos=BAD), *MATRIX[1:]])
    res = gate(run, base_dir)
    assert res.exit_code == 1
    al = next(c for c in res.failures if c.metric == "acceptance_length")
    assert (al.suite, al.k, al.concurrency, al.temperature) == ("chat", 3, 1, 0.0)
    assert al.baseline == pytest.approx(2.85) and al.value == pytest.approx(2.4)
    assert al.bound == pytest.approx(2.7075)
    code, out, exc = invoke(["gate", run, "--baseline", base_dir])
    assert code == 1
    for s in ("chat", "acceptance_length", fmt(2.85), fmt(2.4), fmt(2.85 * 0.95), "FAIL"):
        assert s in out
    assert "gate failed" in exc.message and "chat k=3 c=1 T=0" in exc.message


def test_noise_aware_passes_when_ci_upper_end_clears_the_bound(runs):
    _, base_dir, more = runs
    # AL 2.65 < bound 2.7075, but the CI reaches 2.75
    noisy = dict(MATRIX[0], per_pos=[76, 52, 37], ci=(2.55, 2.75))
    run = more("noisy", [noisy, *MATRIX[1:]])
    assert gate(run, base_dir).exit_code == 1
    res = gate(run, base_dir, GateOptions(noise_aware=True))
    assert res.exit_code == 0
    al = next(c for c in res.checks if c.metric == "acceptance_length" and c.concurrency == 1 and c.suite == "chat")
    assert al.value == pytest.approx(2.65) and al.compared == pytest.approx(2.75) and al.passed
    # without a CI, noise-aware falls back to the point value
    run2 = more("noisy-no-ci", [dict(noisy, ci=None), *MATRIX[1:]])
    assert gate(run2, base_dir, GateOptions(noise_aware=True)).exit_code == 1


def test_gate_refuses_incomparable_cells_unless_allow_missing(runs):
    _, base_dir, more = runs
    run = more("other-suite", [dict(MATRIX[0], suite_sha="sha-new"), *MATRIX[1:]])
    with pytest.raises(BadInput, match="suite_sha sha-chat vs sha-new"):
        gate(run, base_dir)
    res = gate(run, base_dir, GateOptions(allow_missing=True))
    assert res.exit_code == 0 and len(res.checks) == 12 and "not comparable" in res.not_gated[0]
    other = more("other-verifier", [dict(m, verifier_hash="vh-b") for m in MATRIX])
    code, out, exc = invoke(["gate", other, "--baseline", base_dir])
    assert code == 2 and "verifier_hash" in exc.message
    code, _, exc = invoke(["gate", other, "--baseline", base_dir, "--allow-missing"])
    assert code == 2 and "nothing to gate" in exc.message


def test_killed_run_gates_finished_cells_and_names_the_missing(runs, tmp_path):
    _, base_dir, more = runs
    killed = more("killed", MATRIX[:3], missing=MATRIX[3:], status="interrupted")
    with pytest.raises(BadInput, match=r"code k=3 c=4 T=0: no finished speculative cell.*--resume"):
        gate(killed, base_dir)
    md = tmp_path / "k.md"
    code, out, _ = invoke(["gate", killed, "--baseline", base_dir, "--allow-missing", "--markdown", md])
    assert code == 0, out
    text = md.read_text()
    assert "not gated: code k=3 c=4 T=0" in text and "eagle__code__k3__c4__t0" in text
    with pytest.raises(BadInput, match="planned cells missing"):
        update_baseline(killed, tmp_path / "b2")


# ----------------------------------------------------------------------------- exit code through a process


def test_gate_exit_code_through_a_process(runs):
    _, base_dir, more = runs
    run = more("worse", [dict(MATRIX[0], per_pos=BAD), *MATRIX[1:]])
    script = (
        "import sys, typer\nfrom harness.errors import HarnessError\n"
        "from harness.results.commands import register\n"
        "app = typer.Typer(); register(app)\n"
        "try:\n    app(args=sys.argv[1:], standalone_mode=False)\n"
        "except HarnessError as e:\n    print('error: ' + e.message, file=sys.stderr); sys.exit(e.exit_code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, "gate", str(run), "--baseline", str(base_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: gate failed")
    ok = subprocess.run(
        [sys.executable, "-c", script, "gate", str(more("same")), "--baseline", str(base_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr


# ----------------------------------------------------------------------------- gate power


def test_gate_on_8_prompts_says_it_cannot_detect_a_5_percent_drop(tmp_path):
    ci = (2.6, 3.1)  # AL 2.85 measured on 8 prompts (rows_for: num_requests 8, repeats 1)
    ref = make_run(tmp_path, "ref8", [dict(MATRIX[0], ci=ci)])
    base_dir = tmp_path / "b8"
    update_baseline(ref, base_dir, tolerance=0.05)
    run = make_run(tmp_path, "same8", [dict(MATRIX[0], ci=ci)])
    res = gate(run, base_dir)
    se = (ci[1] - ci[0]) / (2 * 1.959964)
    mdd = (1.644854 + 0.841621) * (2 * se * se) ** 0.5 / 2.85  # run and baseline each carry this SE
    al_check = next(c for c in res.checks if c.metric == "acceptance_length")
    assert al_check.min_detectable_drop == pytest.approx(mdd, rel=1e-4) and mdd > 0.05
    needed = -(-8 * (mdd / 0.05) ** 2 // 1)
    assert res.power_warnings == [
        f"chat k=3 c=1 T=0: cannot detect a 5% AL drop with 8 prompts (smallest detectable "
        f"{mdd:.1%} at 95.0% confidence, 80% power); about {int(needed)} prompts would"
    ]
    code, out, _ = invoke(["gate", run, "--baseline", base_dir])
    assert code == 0 and "⚠" in out and f"{mdd:.1%}" in out
    code, _, err = invoke(["gate", run, "--baseline", base_dir, "--strict-power"])
    assert code == 2 and "cannot detect a 5% AL drop with 8 prompts" in str(err)


# ----------------------------------------------------------------------------- gate on the crossover


# ----------------------------------------------------------------------------- gate per segment


def _segment_run(root: Path, run_id: str, thinking: float | None, answer: float) -> Path:
    """One cell whose speculative row splits AL into thinking and answer segments (no thinking
    segment when `thinking` is None: a run with thinking off)."""
    folder = make_run(root, run_id, [dict(MATRIX[0])])
    rows = rows_for(run_id, **MATRIX[0])
    segs = [("thinking", thinking), ("answer", answer)] if thinking is not None else [("answer", answer)]
    rows[1].update(
        segments=[s for s, _ in segs],
        al_by_segment=[a for _, a in segs],
        al_by_segment_ci_high=[a + 0.2 for _, a in segs],
    )
    write_cell(folder, rows[1]["cell_id"], rows)
    return folder


def test_a_baseline_pins_floors_per_thinking_and_answer_segment(tmp_path):
    base_dir = tmp_path / "base"
    update_baseline(_segment_run(tmp_path, "ref", 2.0, 3.0), base_dir, tolerance=0.1)
    cell = json.loads((base_dir / "baseline.json").read_text())["cells"][0]
    assert cell["segment_floors"] == pytest.approx({"thinking": 1.8, "answer": 2.7})

    def seg_checks(run, **kw):
        return {
            c.metric: c
            for c in gate(run, base_dir, GateOptions(**kw)).checks
            if "[" in c.metric and "rate" not in c.metric
        }

    ok = seg_checks(_segment_run(tmp_path, "ok", 1.85, 2.9))
    assert set(ok) == {"acceptance_length[thinking]", "acceptance_length[answer]"} and all(
        c.passed for c in ok.values()
    )
    worse = seg_checks(_segment_run(tmp_path, "worse", 1.7, 2.9))  # thinking fell 15 %, answer held
    assert not worse["acceptance_length[thinking]"].passed and worse["acceptance_length[answer]"].passed
    assert seg_checks(_segment_run(tmp_path, "worse2", 1.7, 2.9), noise_aware=True)[
        "acceptance_length[thinking]"
    ].passed  # its CI reaches the floor
    off = seg_checks(_segment_run(tmp_path, "off", None, 2.9))
    assert not off["acceptance_length[thinking]"].passed
    assert "no thinking segment" in off["acceptance_length[thinking]"].message()
    # floors pinned by hand in baseline.json hold unless a tolerance is given
    data = json.loads((base_dir / "baseline.json").read_text())
    data["cells"][0]["segment_floors"]["thinking"] = 1.6
    (base_dir / "baseline.json").write_text(json.dumps(data))
    assert seg_checks(tmp_path / "worse")["acceptance_length[thinking]"].passed
    assert not seg_checks(tmp_path / "worse", tolerance=0.1)["acceptance_length[thinking]"].passed
