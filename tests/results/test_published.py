"""Published figures (docs/published_figures.csv) shown beside measured cells, never mixed in."""

from __future__ import annotations

import csv
import json

import pytest

from harness.errors import BadInput
from harness.results import compare, published, report
from harness.results.runs import read_run
from harness.schema_manifest import Manifest
from tests.results_fixtures import invoke, make_run


def test_every_published_row_has_a_source_and_numbers_that_parse():
    rows = published.load_published()
    with published.FIGURES.open(encoding="utf-8") as f:
        raw = list(csv.DictReader(f))
    assert len(rows) == len(raw) >= 30
    assert all(r.source.strip() for r in rows)
    assert {r.family for r in rows} == {"kimi-k2", "kimi-k2.5", "kimi-k2.6"}
    # spot checks against docs: the SpecForge K2.5 card, the K2 SGLang k=7 row, the SPEED-Bench curve
    by = {(r.model, r.draft, r.dataset, r.k, r.thinking): r for r in rows}
    assert by[("Kimi-K2.5", "lightseekorg/kimi-k2.5-eagle3", "mt-bench", 3, "")].acceptance_length == 2.69
    k2 = by[("Kimi-K2-Instruct", "AQ-MedAI EAGLE-3", "math500", 7, "")]
    assert (k2.acceptance_length, k2.speedup) == (5.38, 2.08)
    curve = [
        by[("Kimi-K2.5-NVFP4", "lightseekorg/kimi-k2.5-eagle3-mla", "speed-bench/coding", k, "on")] for k in range(1, 9)
    ]
    assert [c.acceptance_length for c in curve] == [1.83, 2.43, 2.88, 3.24, 3.46, 3.62, 3.71, 3.77]
    assert all(c.temperature == 1.0 for c in curve)


@pytest.mark.parametrize(
    "change,msg",
    [
        ({"source": ""}, "needs its source"),
        ({"acceptance_length": "2,69"}, "acceptance_length '2,69' is not a number"),
        ({"acceptance_length": "4.5"}, "must lie in 1 … k\\+1"),
        ({"k": "3.5"}, "k '3.5' must be a whole number"),
    ],
)
def test_a_bad_published_row_is_bad_input_with_its_line(tmp_path, change, msg):
    row = dict.fromkeys(published.COLUMNS, "") | {
        "model": "Kimi-K2.5",
        "dataset": "gsm8k",
        "k": "3",
        "acceptance_length": "3.2",
        "source": "a card",
    }
    path = tmp_path / "p.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, published.COLUMNS)
        w.writeheader()
        w.writerow(row)
        w.writerow(row | change)
    with pytest.raises(BadInput, match=f"p.csv:3: .*{msg}"):
        published.load_published(path)


def family_of_recipe_verifier(section: dict) -> str | None:
    return published.verifier_family(Manifest.from_dict({"recipe": {"verifier": section}}))


def test_family_of_model_and_of_a_run(tmp_path):
    assert published.family_of_model("Kimi-K2.5-NVFP4") == "kimi-k2.5"
    assert published.family_of_model("Kimi-K2-Instruct") == "kimi-k2"
    assert family_of_recipe_verifier({"standin": "kimi-k2.5"}) == "kimi-k2.5"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"model_type": "kimi_k25"}))
    assert family_of_recipe_verifier({"path": str(ckpt)}) == "kimi-k2.5"
    assert family_of_recipe_verifier({"path": str(tmp_path / "gone")}) is None


def _run(tmp_path, family="kimi-k2.5", suites=None):
    """A synthetic run whose suites come from benchmark files (gsm8k, mt-bench) and a built-in one."""
    cells = [{"suite": s, "k": k} for s in ("gsm8k", "mt-bench-writing", "math") for k in (3, 4)]
    folder = make_run(tmp_path, f"run-{family}", cells)
    m = json.loads((folder / "manifest.json").read_text())
    m["recipe"] = {"verifier": {"standin": family}}
    m["suites"] = suites or {
        "gsm8k": {"source": "gsm8k:/data/gsm8k/test.jsonl"},
        "mt-bench-writing": {"source": "mt-bench/writing:/q.jsonl#category=writing"},
        "math": {"source": "builtin:math.jsonl"},
    }
    (folder / "manifest.json").write_text(json.dumps(m))
    return folder


def test_matching_needs_family_dataset_and_k(tmp_path):
    figures = published.load_published()
    run = read_run(_run(tmp_path))
    pairs = published.matches(run.rows, run.manifest, figures)
    # gsm8k at k=3 has four K2.5 rows (two cards, ATOM); mt-bench-writing is not all of MT-Bench;
    # the built-in math suite is ours; k=4 has no published gsm8k row
    assert {(r.suite, r.k) for r, _ in pairs} == {("gsm8k", 3)}
    assert sorted(p.acceptance_length for _, p in pairs) == [3.02, 3.04, 3.20]
    assert all(r.mode == "speculative" for r, _ in pairs)
    other = read_run(_run(tmp_path, family="llama"))
    assert published.matches(other.rows, other.manifest, figures) == []


def test_report_and_compare_show_published_figures_apart_from_ours(tmp_path):
    folder = _run(tmp_path)
    md = report.write_report(folder, tmp_path / "out").markdown.read_text()
    head, _, section = md.partition("## Published figures for comparison")
    assert section and "3.20 (published)" in section and "model card of lightseekorg/kimi-k2.5-eagle3" in section
    assert "(published)" not in head and "3.20" not in head  # never in the measured tables
    assert "tiny stand-in" in section
    result = compare.compare_runs([folder])
    assert len(result.published) == 3 and all(row[0] == "run-kimi-k2.5" for row in result.published)
    assert "### Published figures for comparison" in compare.to_markdown(result)
    assert "published" in result.to_dict() and "3.20" not in compare.to_csv(result)
    code, out, _ = invoke(["compare", folder])
    assert code == 0 and "Published figures for comparison" in out


def test_runs_without_a_match_show_no_published_section(tmp_path):
    folder = make_run(tmp_path, "plain", [{"suite": "chat"}])
    md = report.write_report(folder, tmp_path / "out").markdown.read_text()
    assert "Published figures" not in md
    assert compare.compare_runs([folder]).published == ()
