"""The report and the main job's summary (harness/results/report.py, plots.py) on synthetic run
folders."""

from __future__ import annotations

import io

import pytest

from harness.results import plots, report
from harness.results.table import read_cell, write_cell
from tests.results_fixtures import BAD, GOOD, MATRIX, invoke, make_run, rows_for

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


def test_main_job_summary_prints_repetitiveness_and_the_margin_over_ngram(tmp_path):
    from rich.console import Console

    from harness.main_job import MainJobResult, _deploy, _summary_rows, render_summary
    from harness.results import answer
    from harness.results.runs import read_run

    folder = make_run(tmp_path, "sum", [])
    for draft, per_pos, c, share in (("draft", GOOD, 1, 0.5), ("draft", GOOD, 4, 0.1), ("ngram", BAD, 1, 0.5)):
        rows = rows_for("sum", draft=draft, per_pos=per_pos, c=c, spec_tok_s=100.0 * c)
        rows[1].update(method="ngram" if draft == "ngram" else "eagle3", repetition_share=share)
        side = None
        if draft == "draft":  # per-step records with a real </think> (id 99): thinking steps, then answer steps
            rows[1].update(segments=["thinking", "answer"], al_by_segment=[0.0, 0.0], drafts_by_segment=[0, 0])
            pattern = [((3, 3, 0, 0), 8), ((3, 3, 1, 1), 8)] if c == 1 else [((2, 2, 0, 0), 6)]
            side = {
                "baseline": [],
                "speculative": [
                    {
                        "request_id": f"p{i}#0",
                        "repeat": 0,
                        "prompt_tokens": 20,
                        "latency_s": 1.0,
                        "output_token_ids": [1] * before + [99] + [2] * (sum(acc) + len(acc) - before),
                        "accepted": list(acc),
                        "drafted": [3] * len(acc),
                        "num_spec_tokens": 3,
                        "steps": True,
                    }
                    for i, (acc, before) in enumerate(pattern)
                ],
            }
        write_cell(folder, rows[1]["cell_id"], rows, side)
    by_draft = {r["draft"]: r for r in _summary_rows(read_run(folder), None, end_think_id=99)}
    # draft: cells of 1000 and 4000 output tokens loop 50 % and 10 %: token-weighted 18 %
    assert by_draft["draft"]["repetition_share"] == pytest.approx((0.5 * 1000 + 0.1 * 4000) / 5000)
    assert by_draft["draft"]["ngram_al"] == pytest.approx(2.40)
    assert by_draft["draft"]["al_over_ngram"] == pytest.approx(2.85 / 2.40)
    assert by_draft["ngram"]["al_over_ngram"] == pytest.approx(1.0)
    # per decode step, drafted or not, pooled over the draft's two cells (1,000 and 4,000 output
    # tokens of 8 generations each) against ngram's one cell (1,000 tokens)
    draft_tps = (992 + 3992) / ((992 - 185) + (3992 - 185))
    assert by_draft["draft"]["tokens_per_step"] == pytest.approx(draft_tps)
    assert by_draft["draft"]["tokens_per_step_over_ngram"] == pytest.approx(draft_tps / (992 / (992 - 140)))
    # pooled over both cells' requests: thinking steps accept 3+3, 3+3, 2+2 of 6 drafts; answer 0+0, 1+1, 0+0
    seg = by_draft["draft"]["al_by_segment"]
    assert seg["thinking"][0] == pytest.approx(1 + 16 / 6) and seg["answer"][0] == pytest.approx(1 + 2 / 6)
    for al, lo, hi in seg.values():  # with its bootstrap CI over the three requests
        assert lo <= al <= hi and lo < hi
    assert by_draft["ngram"]["al_by_segment"] == {}
    # which arm to deploy: at c=1 both arms tie no speculation (1.0x: the cheaper wins), at c=4 the draft
    deploy, _ = _deploy(read_run(folder))
    assert [r[:6] for r in deploy] == [
        ["chat", "1", "0", answer.NONE, "—", "1.00x"],
        ["chat", "4", "0", "draft (eagle3)", "3", "4.00x"],
    ]
    assert deploy[1][-1] == "4.00x, no CI"
    out = io.StringIO()
    render_summary(MainJobResult(folder, list(by_draft.values()), {}, 1.0, deploy=deploy), Console(file=out, width=300))
    assert "which arm to deploy" in out.getvalue() and "draft (eagle3)" in out.getvalue()
    assert f"1.19x · {draft_tps / (992 / (992 - 140)):.2f}x" in out.getvalue()  # vs ngram: AL · tok/step


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
