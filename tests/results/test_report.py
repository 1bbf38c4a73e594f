"""The report (harness/results/report.py, plots.py) on synthetic run folders. The main job's summary:
tests/test_main_job.py."""

from __future__ import annotations

from harness.results import plots, report
from harness.results.table import read_cell, write_cell
from tests.results_fixtures import GOOD, MATRIX, invoke, make_run, rows_for

# ----------------------------------------------------------------------------- report


def _report_matrix():
    cells = []
    for suite, good, faster in (("chat", GOOD, 0.0), ("code", [90, 75, 62], 25.0)):
        for k in (1, 2, 3):
            al = 1 + sum(good[:k]) / 100
            for c, spec_tok_s in ((1, 180.0), (4, 130.0), (16, 85.0)):
                cells.append(
                    dict(
                        suite=suite,
                        k=k,
                        c=c,
                        per_pos=good,
                        spec_tok_s=spec_tok_s + 10 * k + faster,
                        base_tok_s=100.0 + c,
                        ci=(al - 0.08, al + 0.07),
                    )
                )
    return cells


def test_report_writes_plots_markdown_and_html(tmp_path):
    run = make_run(tmp_path, "full", _report_matrix())
    files = report.write_report(run, tmp_path / "out")
    assert len(files.plots) == 4
    for p in files.plots:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = files.markdown.read_text()
    assert "1 + num_accepted_tokens / num_drafts" in md and "Summary by suite" in md and "lacks" not in md
    html = files.html.read_text()
    assert html.count("data:image/png;base64,") == 4 and "src='per_position" not in html
    code, out, _ = invoke(["report", run, "--out", tmp_path / "cli"])
    assert code == 0 and (tmp_path / "cli" / "report.html").is_file()


def test_report_of_killed_run_states_what_is_missing(tmp_path):
    cells = _report_matrix()
    run = make_run(tmp_path, "killed", cells[:7], missing=cells[7:], status="interrupted")
    files = report.write_report(run)
    md = files.markdown.read_text()
    assert "Incomplete run (status interrupted): 7 of 18 planned cells finished" in md
    assert "eagle__code__k3__c16__t0" in md
    assert files.markdown.parent == run / "report"


def test_report_of_run_with_no_finished_cell(tmp_path):
    run = make_run(tmp_path, "empty", [], missing=MATRIX, status="interrupted")
    files = report.write_report(run)
    # no placeholder plots: a plot is drawn only where the data supports it
    assert files.plots == () and "nothing measured yet" in files.markdown.read_text()


def test_first_below_one():
    assert plots.first_below([(4, 0.9), (1, 1.5), (16, 0.7)]) == (4, 0.9)
    assert plots.first_below([(1, 1.2)]) is None


# ----------------------------------------------------------------------------- load: crossover, best k


def test_report_names_the_crossover_with_a_ci_and_the_best_k_schedule(tmp_path):
    cells = []
    for k, tok in ((1, (150, 120, 90)), (3, (180, 110, 70))):
        for c, s in zip((1, 4, 16), tok):
            cells.append(dict(k=k, c=c, base_tok_s=100.0, spec_tok_s=float(s)))
    run = make_run(tmp_path, "load", cells)
    for p in (run / "cells").glob("*.json"):  # give every speedup a ±5 % CI
        rows = read_cell(p)
        rows[1].speedup_ci_low, rows[1].speedup_ci_high = rows[1].speedup * 0.95, rows[1].speedup * 1.05
        write_cell(run, p.stem, rows)
    md = report.write_report(run, tmp_path / "out").markdown.read_text()
    # k=1: 1.2x at c=4, 0.9x at c=16 -> crossing log2 position 2 + 2 * 0.2/0.3
    assert f"{2 ** (2 + 2 * 0.2 / 0.3):.3g} [" in md
    assert "num_speculative_tokens_per_batch_size = [[1, 2, 3], [3, 8, 1], [9, 16, 0]]" in md
    assert "[speculative_config]\nnum_speculative_tokens_per_batch_size = [[1, 2, 3], [3, 8, 1], [9, 16, 0]]" in md


# ----------------------------------------------------------------------------- main job summary


def test_report_explains_acceptance_per_thinking_and_answer_segment(tmp_path):
    folder = make_run(tmp_path, "think", [])
    rows = rows_for("think", suite="chat@think")
    rows[1].update(
        output_position_buckets=["0-63"],
        al_by_output_position=[2.85],
        drafts_by_output_position=[100],
        segments=["thinking", "answer"],
        al_by_segment=[3.9, 2.4],
        al_by_segment_ci_low=[3.8, 2.2],
        al_by_segment_ci_high=[4.0, 2.6],
        drafts_by_segment=[40, 60],
    )
    write_cell(folder, rows[1]["cell_id"], rows)
    files = report.write_report(folder, tmp_path / "out")
    md = files.markdown.read_text()
    assert "thinking: 3.90 [3.80, 4.00]; answer: 2.40 [2.20, 2.60]" in md
    assert any(p.name == "acceptance_breakdown.png" for p in files.plots)
