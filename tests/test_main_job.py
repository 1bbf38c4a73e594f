"""The main job's summary (harness/main_job.py) on synthetic run folders: repetitiveness and the margin
over ngram. The whole job on real engines: tests/e2e/test_train_e2e.py."""

from __future__ import annotations

import io

import pytest

from harness.results.table import write_cell
from tests.results_fixtures import BAD, GOOD, make_run, rows_for


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
    deploy, _, raced = _deploy(read_run(folder))
    assert [r[:6] for r in deploy] == [
        ["chat", "1", "0", answer.NONE, "—", "1.00x"],
        ["chat", "4", "0", "draft (eagle3)", "3", "4.00x"],
    ]
    assert deploy[1][-1] == "4.00x, no CI" and raced == []  # a fixed design: no race to tell
    out = io.StringIO()
    result = MainJobResult(folder, list(by_draft.values()), {}, 1.0, deploy=deploy, raced=["chat c=4 T=0: raced over"])
    render_summary(result, Console(file=out, width=300))
    assert "which arm to deploy" in out.getvalue() and "draft (eagle3)" in out.getvalue()
    assert "raced: chat c=4 T=0: raced over" in out.getvalue()
    assert f"1.19x · {draft_tps / (992 / (992 - 140)):.2f}x" in out.getvalue()  # vs ngram: AL · tok/step
