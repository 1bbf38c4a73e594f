"""Comparing runs (harness/results/compare.py, compare_compact.py) on synthetic run folders."""

from __future__ import annotations

import csv
import io
import json

import pytest

from harness.results import compare, report
from harness.results.table import read_cell, write_cell
from tests.results_fixtures import BAD, GOOD, MATRIX, invoke, make_run

# ----------------------------------------------------------------------------- compare


def test_compare_deltas_and_renderers(runs):
    ref, _, more = runs
    worse = more("worse", [dict(m, draft="eagle-v2", per_pos=BAD if i == 0 else GOOD) for i, m in enumerate(MATRIX)])
    res = compare.compare_runs([ref, worse])
    assert res.key_columns == ("suite", "k", "concurrency", "temperature", "mode")
    line = next(
        ln for ln in res.lines if ln.key == ("chat", 3, 1, 0.0, "speculative") and ln.metric == "acceptance_length"
    )
    assert line.values == pytest.approx((2.85, 2.4))
    assert line.delta(1) == pytest.approx(-0.45) and line.rel(1) == pytest.approx(-0.45 / 2.85)
    assert {ln.metric for ln in res.lines} == set(compare.METRICS)
    rows = list(csv.DictReader(io.StringIO(compare.to_csv(res))))
    hit = next(
        r for r in rows if r["suite"] == "chat" and r["concurrency"] == "1" and r["metric"] == "acceptance_length"
    )
    assert float(hit["worse_delta"]) == pytest.approx(-0.45)
    assert "-15.8%" in compare.to_markdown(res)
    code, out, _ = invoke(["compare", ref, worse, "--json"])
    assert code == 0 and json.loads(out)["runs"] == ["ref", "worse"]


@pytest.mark.parametrize(
    "field,change", [("verifier_hash", {"verifier_hash": "vh-b"}), ("max_tokens", {"max_tokens": 256})]
)
def test_compare_refuses_incomparable_runs_unless_forced(runs, tmp_path, field, change):
    ref, _, more = runs
    other = more(f"other-{field}", [dict(m, **change) for m in MATRIX])
    code, _, exc = invoke(["compare", ref, other])
    assert code == 2
    assert f"{field} differs between runs ref" in exc.message and f"other-{field}" in exc.message
    md, out_csv = tmp_path / "c.md", tmp_path / "c.csv"
    code, out, _ = invoke(["compare", ref, other, "--force", "--markdown", md, "--csv", out_csv])
    assert code == 0 and md.is_file() and out_csv.is_file()
    assert "forced" in md.read_text()


def test_compare_key_gains_draft_when_a_run_holds_several(runs):
    ref, _, more = runs
    two = more("two-drafts", [*MATRIX, *(dict(m, draft="ngram") for m in MATRIX)])
    res = compare.compare_runs([ref, two])
    assert "draft" in res.key_columns
    code, _, exc = invoke(["compare", ref, "--by", "suite,bogus"])
    assert code == 2 and "bogus" in exc.message and "concurrency" in exc.message


def test_compare_killed_run_lists_missing_cells(runs):
    ref, _, more = runs
    killed = more("killed", MATRIX[:2], missing=MATRIX[2:], status="interrupted")
    res = compare.compare_runs([ref, killed])
    assert "killed" in res.missing and "2 of 4 planned cells missing" in res.missing["killed"]
    line = next(ln for ln in res.lines if ln.key[0] == "code" and ln.metric == "acceptance_length")
    assert line.values[1] is None and line.delta(1) is None


# ----------------------------------------------------------------------------- compact compare


def test_compact_compare_of_a_run_with_itself_marks_nothing(tmp_path):

    run = make_run(tmp_path, "demo", [dict(m, ci=(2.7, 3.0)) for m in MATRIX])
    res = compare.compare_runs([run, run])
    assert len(res.table.rows) == len(MATRIX) and not res.table.only_in
    deltas = [d for r in res.table.rows for ds in r.deltas.values() for d in ds if d is not None]
    assert deltas and all(d.delta == 0 and d.beyond_noise is False for d in deltas)
    assert res.table.marked == []
    code, out, _ = invoke(["compare", run, run, "--json"])
    data = json.loads(out)
    assert code == 0 and data["marked"] == [] and not any(c.endswith("*") for r in data["rows"] for c in r)
    assert all(c.endswith(" +0.00") or c.endswith(" +0.0") for r in data["rows"] for c in r[4 + 3 :])


def test_compact_compare_marks_separated_cis_and_lists_one_run_cells(tmp_path):

    ref = make_run(tmp_path, "ref", [dict(m, ci=(2.7, 3.0)) for m in MATRIX])
    worse = make_run(
        tmp_path,
        "worse",
        [dict(MATRIX[0], per_pos=BAD, ci=(2.3, 2.5)), dict(MATRIX[1], ci=(2.7, 3.0)), dict(suite="math", c=1)],
    )
    res = compare.compare_runs([ref, worse])
    assert res.table.marked == [(("chat", 3, 1, 0.0), "acceptance_length", 1)]
    assert [run for _, run in res.table.only_in] == ["ref", "ref", "worse"]
    md = tmp_path / "c.md"
    code, out, _ = invoke(["compare", ref, worse, "--markdown", md])
    assert code == 0 and "2.40 [2.30, 2.50] -0.45*" in md.read_text() and "only in worse: suite=math" in md.read_text()
    code, out, _ = invoke(["compare", ref, worse, "--long"])
    assert code == 0 and "draft_acceptance_rate" in out


def test_report_judges_the_dynamic_arm_against_every_fixed_k(tmp_path):
    cells = [dict(k=1, c=c, spec_tok_s=s) for c, s in ((1, 150.0), (4, 120.0))]
    cells += [dict(k=3, c=c, spec_tok_s=s) for c, s in ((1, 180.0), (4, 90.0))]
    cells += [dict(draft="eagle-dynamic", k=3, c=c, spec_tok_s=s) for c, s in ((1, 178.0), (4, 100.0))]
    run = make_run(tmp_path, "dyn", cells)
    for p in (run / "cells").glob("*.json"):  # ±3 % speedup CIs
        rows = read_cell(p)
        rows[1].speedup_ci_low, rows[1].speedup_ci_high = rows[1].speedup * 0.97, rows[1].speedup * 1.03
        write_cell(run, p.stem, rows)
    md = report.write_report(run, tmp_path / "out").markdown.read_text()
    assert "| eagle | chat | 0 | 1 | yes | — |" in md  # 1.78 vs k=3's 1.80: within noise
    assert "| eagle | chat | 0 | 4 | no | k=1 |" in md  # 1.00 [0.97, 1.03] vs k=1's 1.20 [1.16, 1.24]
