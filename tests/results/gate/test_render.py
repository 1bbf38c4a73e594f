"""The gate's files (harness/results/gate/render.py): the Markdown summary and JUnit, on synthetic run
folders."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tests.results_fixtures import BAD, MATRIX, invoke


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
