"""The compare model (harness/results/compare.py): one builder, and renderers that show what it holds.

Runs are built in memory from synthetic rows (tests/results_fixtures.py's rows_for): no folders, no engines.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import pytest

from harness.analysis import compare_marks as cm
from harness.errors import BadInput
from harness.results import compare, runs
from harness.results import compare_compact as cc
from harness.results import published as pub
from harness.results.runs import Run
from harness.schema import CellRow
from harness.schema_manifest import Manifest
from harness.ui import MISSING, fmt
from tests.results_fixtures import BAD, rows_for


def _run(label: str, cells: list[dict], missing: list[str] = (), manifest: dict | None = None) -> Run:
    """A loaded run: a baseline and a speculative row per cell (kwargs of rows_for), speedup CIs ±3 %."""
    rows = [r for c in cells for r in rows_for(label, **c)]
    for r in rows:
        if r["speedup"] is not None:
            r["speedup_ci_low"], r["speedup_ci_high"] = r["speedup"] * 0.97, r["speedup"] * 1.03
    man = {
        "run_id": label,
        "status": "interrupted" if missing else "complete",
        "planned_cells": [f"cell{i}" for i in range(len(cells) + len(missing))],
        **(manifest or {}),
    }
    return Run(Path(label), label, Manifest.from_dict(man), [CellRow.from_dict(r) for r in rows], list(missing))


# ref: chat at c = 1, 2, 4, 8 (speedup 1.8 … 0.8: a crossover) and code at c = 1
REF = [dict(c=c, spec_tok_s=s, ci=(2.75, 2.95)) for c, s in ((1, 180.0), (2, 140.0), (4, 110.0), (8, 80.0))]
REF += [dict(suite="code", c=1, ci=(2.75, 2.95))]
# new: chat c=1 worse beyond noise, c=2 a shift inside the CIs, c=4 and c=8 unchanged; no code; math only here
NEW = [
    dict(c=1, per_pos=BAD, ci=(2.30, 2.50)),
    dict(c=2, spec_tok_s=138.0, ci=(2.75, 2.95)),
    *REF[2:4],
    dict(suite="math", c=1),
]


@pytest.fixture
def model() -> compare.Comparison:
    return compare.build([_run("ref", REF), _run("new", NEW, missing=["code-c4"])], published=[])


def _line(c: compare.Comparison, key: tuple, metric: str) -> compare.Line:
    return next(ln for ln in c.lines if ln.key == key and ln.metric == metric)


def _md_rows(md: str, first_header: str) -> tuple[list[str], list[list[str]]]:
    """The Markdown table whose header row starts with `first_header`: (headers, rows of cells)."""
    lines = md.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {first_header} |"))
    table = []
    for ln in lines[start:]:
        if not ln.startswith("|"):
            break
        table.append([x.strip() for x in ln.strip("|").split(" | ")])
    return table[0], table[2:]


def _rich_rows(table) -> list[list[str]]:
    cols = [list(col.cells) for col in table.columns]
    return [[str(col[i]) for col in cols] for i in range(table.row_count)]


# ----------------------------------------------------------------------------- the model


def test_lines_hold_each_run_value_and_the_deltas_against_the_first(model):
    assert model.runs == ("ref", "new") and model.drafts == ("eagle", "eagle")
    assert model.key_columns == ("suite", "k", "concurrency", "temperature", "mode")
    al = _line(model, ("chat", 3, 1, 0.0, "speculative"), "acceptance_length")
    assert al.values == pytest.approx((2.85, 2.40))
    assert al.deltas == pytest.approx((-0.45,)) and al.rels == pytest.approx((-0.45 / 2.85,))
    assert (al.delta(1), al.rel(1)) == (al.deltas[0], al.rels[0])
    # a cell one run lacks: its value is None and so is the delta, never 0
    code = _line(model, ("code", 3, 1, 0.0, "speculative"), "acceptance_length")
    assert code.values[1] is None and code.deltas == (None,) and code.rels == (None,)
    # a metric no run has is no line (the baseline arm has no AL)
    assert not [ln for ln in model.lines if ln.key[-1] == "baseline" and ln.metric == "acceptance_length"]
    keys = list(dict.fromkeys(ln.key for ln in model.lines))
    assert keys == sorted(keys, key=lambda k: (k[0], k[2], k[4]))  # suite, then concurrency as a number


def test_the_compact_table_is_the_speculative_part_of_the_same_alignment(model):
    t = model.table
    assert t.runs == model.runs and t.key_columns == model.key_columns[:-1]
    assert [k for k, _ in t.only_in] == [("code", 3, 1, 0.0), ("math", 3, 1, 0.0)]
    assert [r for _, r in t.only_in] == ["ref", "new"]
    for row in t.rows:
        for m, values in row.values.items():
            line = _line(model, (*row.key, "speculative"), m)
            assert [v.value for v in values] == list(line.values)
            assert [d.delta for d in row.deltas[m]] == list(line.deltas)
            assert [d.rel for d in row.deltas[m]] == list(line.rels)


def test_noise_marks_only_where_the_cis_separate(model):
    chat1 = ("chat", 3, 1, 0.0)
    assert model.table.marked == [(chat1, "acceptance_length", 1)]  # [2.30, 2.50] vs [2.75, 2.95]
    by_key = {r.key: r for r in model.table.rows}
    shift = by_key[("chat", 3, 2, 0.0)].deltas["speedup"][0]
    assert shift.delta == pytest.approx(-0.02) and shift.beyond_noise is False and shift.test == "CI overlap"
    same = by_key[("chat", 3, 4, 0.0)].deltas["acceptance_length"][0]
    assert same.delta == 0 and same.beyond_noise is False
    # tok/s carries no CI here: its mark is unknown, not "no"
    tok_s = by_key[("chat", 3, 2, 0.0)].deltas["output_tok_per_s"][0]
    assert tok_s.delta == pytest.approx(-2.0) and tok_s.beyond_noise is None and tok_s.test == "no CI"


def test_crossovers_per_run_and_the_notes(model):
    chat, code = ("eagle", "chat", 3, 0.0), ("eagle", "code", 3, 0.0)
    assert set(model.crossovers) == {chat, code, ("eagle", "math", 3, 0.0)}
    ref_text, new_text = model.crossovers[chat]
    assert ref_text == new_text and ref_text[0].isdigit() and "[" in ref_text  # crosses 1.0 between c=4 and 8
    assert model.crossovers[code] == ("one load point (c=1)", MISSING)
    assert model.load_note is None
    assert model.missing == {"new": "new (interrupted): 1 of 6 planned cells missing: code-c4"}
    assert model.notes() == [
        "only in ref: suite=code k=3 concurrency=1 temperature=0.0",
        "only in new: suite=math k=3 concurrency=1 temperature=0.0",
        model.missing["new"],
    ]
    assert compare.long_notes(model) == [model.missing["new"]]


def test_one_load_point_everywhere_is_a_note_not_a_table():
    c = compare.build([_run("a", [dict(c=4)]), _run("b", [dict(c=4)])], published=[])
    assert c.crossovers == {} and c.load_note.startswith("one load point (c=4)")
    assert f"crossover: {c.load_note}" in c.notes()
    assert "Crossover concurrency" not in cc.to_markdown(c)


def test_incomparable_cells_are_refused_unless_forced_and_then_listed():
    runs_ = [_run("a", [dict(c=1)]), _run("b", [dict(c=1, max_tokens=256)])]
    with pytest.raises(BadInput, match="max_tokens differs between runs a"):
        compare.build(runs_)
    c = compare.build(runs_, force=True, published=[])
    assert len(c.forced) == 2  # the baseline and the speculative row of the cell
    assert c.notes()[-1].startswith("forced (not comparable): max_tokens differs")
    assert compare.long_notes(c)[-1].startswith("forced: max_tokens differs")


def test_a_run_with_several_drafts_keys_on_the_draft():
    c = compare.build([_run("a", [dict(c=1), dict(c=1, draft="ngram")])], published=[])
    assert c.key_columns == ("suite", "k", "concurrency", "temperature", "draft", "mode")
    assert c.drafts == ("eagle, ngram",) and len(c.table.rows) == 2 and c.table.only_in == ()


def test_published_rows_come_with_the_model():
    manifest = {
        "recipe": {"verifier": {"standin": "kimi-k2.5"}},
        "suites": {"gsm8k": {"source": "gsm8k:/data/gsm8k/test.jsonl"}},
    }
    c = compare.build([_run("kimi", [dict(suite="gsm8k", c=1)], manifest=manifest)], published=pub.load_published())
    assert c.published and all(row[0] == "kimi" for row in c.published)
    headers, body = _md_rows(compare.to_markdown(c), "run")
    assert headers == ["run", *pub.HEADERS] and body == [list(r) for r in c.published]
    assert cc.to_dict(c)["published"] == c.to_dict()["published"] == compare.published_dicts(c)


# ----------------------------------------------------------------------------- renderers agree with the model


def test_compact_markdown_json_and_rich_show_the_same_cells(model):
    headers, body = cm.table(model.table)
    assert _md_rows(cc.to_markdown(model), "suite") == (headers, body)
    data = cc.to_dict(model)
    assert (data["headers"], data["rows"]) == (headers, body)
    table = cc.to_rich(model).renderables[0]  # with a crossover table: a group of two
    assert [str(c.header) for c in table.columns] == headers and _rich_rows(table) == body


def test_compact_cells_are_the_model_values_formatted(model):
    _, body = cm.table(model.table)
    for row, cells in zip(model.table.rows, body):
        assert cells[:4] == cm.key_cells(row.key)
        for i in range(len(model.runs)):
            for j, m in enumerate(row.values):
                cell, v = cells[4 + 3 * i + j], row.values[m][i]
                digits = cm.DIGITS[m]
                assert cell.startswith(fmt(v.value, f"{{:.{digits}f}}"))
                d = row.deltas[m][i - 1] if i else None
                if d is not None:
                    assert fmt(d.delta, f"{{:+.{digits}f}}") in cell
                    assert cell.endswith(cm.MARK) == bool(d.beyond_noise)
    assert "2.40 [2.30, 2.50] -0.45*" in cc.to_markdown(model)


def test_crossover_table_shows_the_model_texts(model):
    heads, rows = _md_rows(cc.to_markdown(model), "draft")
    assert heads == ["draft", "suite", "k", "T", "ref crossover [95% CI]", "new crossover [95% CI]"]
    assert [r[4:] for r in rows] == [list(v) for v in model.crossovers.values()]
    assert cc.to_dict(model)["crossovers"] == [
        {"cell": list(k), "per_run": list(v)} for k, v in model.crossovers.items()
    ]
    assert _rich_rows(cc.to_rich(model).renderables[1]) == rows


def test_deploy_table_names_each_runs_best_arm_per_suite_and_load(model):
    """Which arm to deploy (harness/results/answer.py), a column per run, in every renderer."""
    assert model.answers[("chat", 1, 0.0)] == (
        "eagle (eagle3) k=3 1.80x [1.75, 1.85]; 1.80x, clear",
        "eagle (eagle3) k=3 1.80x [1.75, 1.85]; 1.80x, clear",
    )
    # chat at c=8 is slower with speculation in both runs: no speculation is the answer
    assert model.answers[("chat", 8, 0.0)][0] == "no speculation 1.00x; 1.25x, clear"
    assert model.answers[("code", 1, 0.0)][1] == MISSING  # the new run has no code cell
    md = cc.to_markdown(model).split(cc.ANSWER_TITLE)[1]
    heads, rows = _md_rows(md, "suite")
    assert heads == ["suite", "c", "T", "ref: deploy", "new: deploy"]
    assert rows == [[s, str(n), f"{t:g}", *v] for (s, n, t), v in model.answers.items()]
    assert cc.to_dict(model)["deploy"][0]["per_run"] == list(model.answers[("chat", 1, 0.0)])
    assert _rich_rows(cc.to_rich(model).renderables[2]) == rows


def test_long_markdown_csv_json_and_rich_show_the_same_lines(model):
    headers, body = _md_rows(compare.to_markdown(model), "suite")
    assert headers[-2:] == ["ref [eagle]", "new [eagle] Δ vs first"] and len(body) == len(model.lines)
    assert _rich_rows(compare.to_rich(model)) == body
    csv_rows = list(csv.DictReader(io.StringIO(compare.to_csv(model))))
    data = model.to_dict()
    for ln, cells, row, js in zip(model.lines, body, csv_rows, data["lines"]):
        digits = compare.DIGITS.get(ln.metric, 3)
        assert cells[:5] == cm.key_cells(ln.key) and cells[5] == ln.metric
        assert cells[6] == fmt(ln.values[0], digits) and cells[7].startswith(fmt(ln.values[1], digits))
        if ln.deltas[0] is not None:
            assert fmt(ln.deltas[0], f"{{:+.{digits}f}}") in cells[7]
        assert [row["ref"], row["new"]] == ["" if v is None else str(v) for v in ln.values]
        assert row["new_delta"] == ("" if ln.deltas[0] is None else str(ln.deltas[0]))
        assert (js["values"], js["delta"], js["rel_delta"]) == (list(ln.values), list(ln.deltas), list(ln.rels))
    # the run that lacks a cell shows the one missing mark there
    code = next(cells for ln, cells in zip(model.lines, body) if ln.key[0] == "code")
    assert code[7] == MISSING


# ----------------------------------------------------------------------------- the one formatter


def test_one_formatter_for_numbers_and_missing_values():
    assert not hasattr(runs, "fmt")  # harness.ui's, not re-exported under results/
    assert fmt(None) == fmt(math.nan) == fmt(None, "{:.2f}x") == fmt(math.nan, "{:.0%}") == MISSING == "—"
    # decimals: floats get them, ints and labels print as they are
    assert (fmt(2.5), fmt(2.5, 1), fmt(3), fmt("eagle")) == ("2.500", "2.5", "3", "eagle")
    # a format string applies to ints and floats alike
    assert (fmt(3, "{:.2f}"), fmt(1.5, "{:.2f}x"), fmt(0.25, "{:.0%}"), fmt("x", "{:.2f}")) == (
        "3.00",
        "1.50x",
        "25%",
        "x",
    )


def test_key_cells_use_the_one_missing_mark():
    assert cm.key_cells(("chat", 3, None, 0.5, 0.0)) == ["chat", "3", MISSING, "0.5", "0"]
