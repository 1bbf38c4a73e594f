"""The report leads with its verdict and ends with its definitions; a crossover, a best-k schedule or
an AL-vs-k plot appears only where the data supports it (issue 23, items 6 and 7). No engines."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.results import compare, load_view, report
from harness.results import compare_compact as cc
from harness.results.gate.baseline import gate, read_baseline, update_baseline
from harness.results.gate.crossover_checks import crossover_checks
from harness.results.gate.evaluate import GateOptions
from harness.results.gate.render import write_gate_files
from harness.results.runs import read_run
from harness.results.table import read_cell, write_cell
from harness.schema import CellRow
from tests.results_fixtures import invoke, make_run

ONE_POINT = [dict(suite=s, k=k, c=4, spec_tok_s=150.0 + 10 * k) for s in ("chat", "code") for k in (1, 3)]


def _grid(root: Path, run_id: str, speedups=(1.8, 1.4, 1.1, 0.8), ks=(3,)) -> Path:
    """One suite over concurrencies 1, 2, 4, 8 (baseline 100 tok/s), speedup CIs ±5 %."""
    run = make_run(
        root,
        run_id,
        [dict(k=k, c=c, spec_tok_s=100.0 * s - (3 - k)) for k in ks for c, s in zip((1, 2, 4, 8), speedups)],
    )
    _with_speedup_cis(run)
    return run


def _with_speedup_cis(run: Path, half_width: float = 0.05) -> None:
    for p in (run / "cells").glob("*.json"):
        rows = read_cell(p)
        rows[1].speedup_ci_low = rows[1].speedup * (1 - half_width)
        rows[1].speedup_ci_high = rows[1].speedup * (1 + half_width)
        write_cell(run, p.stem, rows)


def _h2(md: str) -> list[str]:
    return re.findall(r"^## (.+)$", md, flags=re.M)


# ----------------------------------------------------------------------------- the rule, in one place


def test_the_rule_needs_two_concurrencies_for_a_crossover_and_two_k_for_a_plot():
    assert not load_view.enough_load_points([4, 4, 4]) and load_view.enough_load_points([1, 4])
    assert not load_view.enough_ks([3]) and load_view.enough_ks([1, 3])
    assert load_view.one_load_point([4, 4]) == "one load point (c=4)"


# ----------------------------------------------------------------------------- one load point


def test_a_one_concurrency_report_says_one_load_point_and_prints_no_schedule(tmp_path):
    run = make_run(tmp_path, "one", ONE_POINT)
    _with_speedup_cis(run)
    files = report.write_report(run, tmp_path / "out")
    md, page = files.markdown.read_text(), files.html.read_text()
    for text in (md, page):
        assert "one load point (c=4)" in text
        assert "above the grid [" not in text and "num_speculative_tokens_per_batch_size =" not in text
        assert "[speculative_config]" not in text
    assert "When speculation pays" not in md
    names = [p.name for p in files.plots]
    assert "acceptance_length_vs_k.png" in names  # k = 1 and 3: two k
    assert "speedup_vs_concurrency.png" not in names  # one concurrency is no axis


def test_one_k_draws_no_al_vs_k_plot(tmp_path):
    run = make_run(tmp_path, "onek", [dict(k=3, c=c) for c in (1, 4)])
    names = [p.name for p in report.write_report(run, tmp_path / "out").plots]
    assert "acceptance_length_vs_k.png" not in names and "per_position_acceptance.png" in names


def test_a_one_concurrency_compare_says_one_load_point(tmp_path):
    a, b = make_run(tmp_path, "a", ONE_POINT), make_run(tmp_path, "b", ONE_POINT)
    res = compare.compare_runs([a, b])
    assert res.crossovers == {} and any("one load point (c=4)" in n for n in res.notes())
    md = cc.to_markdown(res)
    assert "one load point (c=4)" in md and "above the grid" not in md and "Crossover concurrency" not in md
    code, out, _ = invoke(["compare", a, b, "--json"])
    data = json.loads(out)
    assert code == 0 and data["crossovers"] == [] and any("one load point" in n for n in data["notes"])


def test_compare_of_a_grid_run_and_a_one_point_run_names_each(tmp_path):
    grid = _grid(tmp_path, "grid")
    one = make_run(tmp_path, "one", [dict(k=3, c=4, spec_tok_s=110.0)])
    res = compare.compare_runs([grid, one], force=True)
    (texts,) = res.crossovers.values()
    assert texts[0].startswith(f"{2 ** (2 + 0.1 / 0.3):.3g} [") and texts[1] == "one load point (c=4)"
    assert res.load_note is None


def test_a_one_point_baseline_stores_no_crossover_and_is_not_held_to_one(tmp_path):
    one = make_run(tmp_path, "one", [dict(k=3, c=4)])
    base_dir = tmp_path / "b1"
    update_baseline(one, base_dir, max_crossover_drop=0.25)
    (stored,) = json.loads((base_dir / "baseline.json").read_text())["crossovers"]
    assert stored["where"] == "one load point" and stored["crossover"] is None
    assert stored["text"] == "one load point (c=4)"
    res = gate(make_run(tmp_path, "again", [dict(k=3, c=4)]), base_dir)
    assert not [c for c in res.checks if c.metric == "crossover concurrency"]


def test_an_old_one_point_baseline_written_as_above_the_grid_is_not_checked(tmp_path):
    one = make_run(tmp_path, "one", [dict(k=3, c=4)])
    base_dir = tmp_path / "old"
    update_baseline(one, base_dir, max_crossover_drop=0.25)
    data = json.loads((base_dir / "baseline.json").read_text())  # as results/baselines/tiny-kimi holds it
    data["crossovers"][0].update(
        where="above the grid", crossover=4.0, text="above the grid [above the grid, above the grid]"
    )
    (base_dir / "baseline.json").write_text(json.dumps(data))
    res = gate(make_run(tmp_path, "run", [dict(k=3, c=4)]), base_dir)
    assert not [c for c in res.checks if c.metric == "crossover concurrency"]


def test_gating_a_one_point_run_against_a_grid_baseline_says_one_load_point(tmp_path):
    base_dir = tmp_path / "grid-base"
    update_baseline(_grid(tmp_path, "ref"), base_dir, max_crossover_drop=0.25)
    one = make_run(tmp_path, "one", [dict(k=3, c=4, spec_tok_s=110.0)])
    base = read_baseline(base_dir).crossovers
    checks, problems = crossover_checks(base, read_run(one).rows, 0.25)
    assert checks == [] and problems == [
        "chat k=3 T=0: no crossover in the run: one load point (c=4), a crossover "
        "needs 2 or more concurrencies (baseline: 5.04 [4.46, 5.63])"
    ]
    with pytest.raises(BadInput, match="unusable gate input"):
        gate(one, base_dir)
    res = gate(one, base_dir, GateOptions(allow_missing=True))
    assert not [c for c in res.checks if c.metric == "crossover concurrency"]
    assert any("one load point (c=4)" in p for p in res.not_gated)


# ----------------------------------------------------------------------------- two concurrencies still show it


def test_a_two_concurrency_run_still_shows_its_crossover_and_schedule(tmp_path):
    run = make_run(
        tmp_path,
        "two",
        [dict(k=k, c=c, spec_tok_s=s) for k, tok in ((1, (150, 90)), (3, (180, 70))) for c, s in zip((1, 4), tok)],
    )
    _with_speedup_cis(run)
    files = report.write_report(run, tmp_path / "out")
    md = files.markdown.read_text()
    body = md.partition("## Definitions")[0]
    assert "When speculation pays: crossover and best k per load" in body and "one load point" not in body
    # k=1: 1.5x at c=1, 0.9x at c=4 -> 1.0 at log2 position 2 * 0.5/0.6
    assert f"| eagle | chat | 1 | 0 | 1,4 | {2 ** (2 * 0.5 / 0.6):.3g} [" in md
    assert "num_speculative_tokens_per_batch_size = [[1, 2, 3], [3, 4, 0]]" in md
    assert "speedup_vs_concurrency.png" in [p.name for p in files.plots]
    res = compare.compare_runs([run, run])
    assert res.load_note is None and list(res.crossovers.values())[0][0].startswith(f"{2 ** (2 * 0.5 / 0.6):.3g}")


# ----------------------------------------------------------------------------- the report leads with its answer


def test_the_verdict_comes_first_and_the_definitions_last(tmp_path):
    run = _grid(tmp_path, "grid", ks=(1, 3))
    files = report.write_report(run, tmp_path / "out")
    md, page = files.markdown.read_text(), files.html.read_text()
    sections = _h2(md)
    assert sections[0] == "Verdict" and sections[-1].startswith("Definitions")
    assert md.index("## Verdict") < md.index("## Run") < md.index("## Summary by suite") < md.index("## Plots")
    h2 = re.findall(r"<h2>(.+?)</h2>", page)
    assert h2 == [html_escape(s) for s in sections]  # the HTML says the same, in the same order
    assert page.index("<h1>") < page.index("<h2>Verdict</h2>") < page.index("<img")


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


def test_the_verdict_says_faster_or_not_with_cis_gate_and_what_to_distrust(tmp_path):
    run = _grid(tmp_path, "grid")
    for p in (run / "cells").glob("*__c8__*.json"):
        rows = read_cell(p)
        rows[1].flags = ["MACHINE NOISE: baseline repeats differ by 12%", "LOOPING OUTPUTS (41% of tokens)"]
        write_cell(run, p.stem, rows)
    md = report.write_report(run, tmp_path / "out").markdown.read_text()
    verdict = md.partition("## Verdict")[2].partition("\n## ")[0]
    assert "| chat | eagle | yes | 1.80x [1.71, 1.89] | 2.85 |" in verdict  # best speedup: c=1
    assert "k=3, c=1, T=0" in verdict and "0.80–1.80x over 4 cells, 1 below 1.0x" in verdict
    assert "Gate: not gated" in verdict
    assert "- MACHINE NOISE: 1 of 4 cells (eagle__chat__k3__c8__t0)" in verdict
    assert "- LOOPING OUTPUTS: 1 of 4 cells" in verdict


def test_the_verdict_shows_the_gate_result_the_run_folder_holds(tmp_path):
    ref = _grid(tmp_path, "ref")
    base_dir = tmp_path / "base"
    update_baseline(ref, base_dir)
    write_gate_files(gate(ref, base_dir), verdict=ref / report.GATE_VERDICT)
    md = report.write_report(ref, tmp_path / "pass").markdown.read_text()
    assert re.search(r"Gate: passed, \d+ checks against baseline base\.", md)
    worse = make_run(
        tmp_path,
        "worse",
        [
            dict(k=3, c=c, per_pos=[70, 45, 25], spec_tok_s=100.0 * s)
            for c, s in zip((1, 2, 4, 8), (1.8, 1.4, 1.1, 0.8))
        ],
    )
    write_gate_files(gate(worse, base_dir), verdict=worse / report.GATE_VERDICT)
    md = report.write_report(worse, tmp_path / "fail").markdown.read_text()
    assert re.search(r"Gate: FAILED, \d+ of \d+ checks below bound against baseline base: chat k=3 c=1 T=0", md)


def test_a_verdict_without_ci_says_noise_is_unknown_and_a_slower_cell_says_so(tmp_path):
    def faster_or_not(**columns) -> str:
        return report.faster_or_not(CellRow.from_dict(columns))

    assert faster_or_not(speedup=1.2) == "yes (no CI: noise unknown)"
    assert faster_or_not(speedup=0.8, speedup_ci_low=0.7, speedup_ci_high=0.9) == "no, slower"
    assert (
        faster_or_not(speedup=1.02, speedup_ci_low=0.95, speedup_ci_high=1.1) == "no clear difference (CI spans 1.0x)"
    )
    assert faster_or_not(speedup=None) == "not measured (no baseline arm)"
    assert report.flag_name("NOT LOSSLESS: 1/8, first at token 412") == "NOT LOSSLESS"
    assert report.flag_name("LOOPING OUTPUTS (41% of output tokens)") == "LOOPING OUTPUTS"


def test_a_main_job_run_shows_its_training_health_after_the_verdict(tmp_path):
    """The verdict judged before the bench (harness/analysis/training_health.py), read from the
    run's train/train_report.json: each reason with its figures and what would help."""
    from harness.analysis.training_health import Knobs, TrainingFigures, assess

    run = make_run(tmp_path, "one", ONE_POINT)
    assert "Training health" not in report.write_report(run, tmp_path / "plain").markdown.read_text()
    figures = TrainingFigures(44_000, 9_800_000, 244, 30.0, 13.2, 0.2, 17.3, 0.11, 1.13, {"ngram": 1.39})
    health = assess(figures, Knobs(num_prompts=256, epochs=3, lr=3e-3))
    (run / "train").mkdir()
    (run / "train" / "train_report.json").write_text(json.dumps({"health": health.to_dict()}))
    md = report.write_report(run, tmp_path / "out").markdown.read_text()
    assert _h2(md)[:2] == ["Verdict", "Training health (judged before the bench)"]
    section = md.partition("## Training health")[2].partition("\n## ")[0]
    assert "training UNHEALTHY: too few samples" in section
    assert "| overfit |" in section and "train.num_prompts=1141" in section and "deploy ngram" in section
    assert "ngram expected 1.39 tokens per step" in section
