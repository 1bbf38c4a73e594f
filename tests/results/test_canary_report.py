"""`harness report` on a canary folder: verdict, per-cell table and engines, Markdown and HTML."""

from __future__ import annotations

from harness.results.canary import ACCEPTANCE_CHANGED
from tests.results_fixtures import canary_cell, invoke, write_canary


def test_the_report_of_a_changed_canary_names_the_change_and_the_engines(tmp_path):
    folder = write_canary(tmp_path / "canary", [canary_cell(2.5, 3.5, 0.2, 0.5, ACCEPTANCE_CHANGED)])
    code, out, exc = invoke(["report", folder])
    assert code == 0, (out, exc)
    md = (folder / "report" / "report.md").read_text()
    assert "# Upgrade canary: canary" in md and "**fail**: first change beyond noise at new" in md
    assert "| ref → new | code k=3 c=4 T=0 | ACCEPTANCE CHANGED |" in md
    assert "/envs/new" in md and "Definitions" in md
    assert "ACCEPTANCE CHANGED" in (folder / "report" / "report.html").read_text()
