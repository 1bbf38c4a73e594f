"""`harness gate` and `harness compare` on an upgrade canary's folder (issue 54): the canary's verdict
fails the gate (exit 1, JUnit and Markdown as any gate), its engines' runs are compared side by side.
The real canary on two engines: tests/e2e/test_canary_engine.py."""

from __future__ import annotations

import json

import pytest

from harness.errors import BadInput
from harness.results.canary import ACCEPTANCE_CHANGED, OUTPUTS_CHANGED
from harness.results.gate.canary_gate import canary_gate
from tests.results_fixtures import MATRIX, canary_cell, invoke, make_run, write_canary


def test_an_unchanged_engine_passes_and_names_what_else_moved(tmp_path):
    res = canary_gate(write_canary(tmp_path, [canary_cell(2.5, 2.5, 0.0, 0.0, OUTPUTS_CHANGED)]))
    assert res.verdict == "pass" and res.exit_code == 0
    (check,) = res.checks
    assert (check.suite, check.k, check.concurrency, check.baseline, check.value) == ("code", 3, 4, 2.5, 2.5)
    assert "no change beyond noise" in check.message() and OUTPUTS_CHANGED in check.message()


@pytest.mark.parametrize(("cand", "low", "high"), [(2.0, -0.3, -0.1), (3.5, 0.2, 0.5)])
def test_acceptance_changed_either_way_fails(tmp_path, cand, low, high):
    res = canary_gate(write_canary(tmp_path, [canary_cell(2.5, cand, low, high, ACCEPTANCE_CHANGED)]))
    assert res.verdict == "fail" and res.exit_code == 1
    assert ACCEPTANCE_CHANGED in res.failures[0].message() and "ref → new" in res.failures[0].message()


def test_an_engine_that_did_not_serve_fails(tmp_path):
    res = canary_gate(write_canary(tmp_path, [], error="vLLM server exited with code 1 ... unknown flag"))
    assert res.exit_code == 1 and "ENGINE FAILED" in res.failures[0].message()


def test_a_malformed_canary_file_is_one_line_of_bad_input(tmp_path):
    (tmp_path / "canary.json").write_text('{"verdict": "pass"}')
    with pytest.raises(BadInput, match="not a canary result"):
        canary_gate(tmp_path)


def test_the_gate_command_exits_1_on_a_changed_canary_and_writes_its_files(tmp_path):
    folder = write_canary(tmp_path / "c", [canary_cell(2.5, 3.5, 0.2, 0.5, ACCEPTANCE_CHANGED)])
    junit, md = tmp_path / "junit.xml", tmp_path / "gate.md"
    code, out, exc = invoke(["gate", folder, "--junit", junit, "--markdown", md])
    assert code == 1 and ACCEPTANCE_CHANGED in str(exc) and "code" in out
    assert "<failure" in junit.read_text() and "FAIL" in md.read_text()
    code, _, exc = invoke(["gate", folder, "--baseline", tmp_path])
    assert code == 2 and "canary folder" in str(exc)
    code, out, _ = invoke(["gate", write_canary(tmp_path / "ok", [canary_cell(2.5, 2.5, 0.0, 0.0)])])
    assert code == 0 and "gate passed" in out


def test_compare_expands_a_canary_into_its_engines_runs(tmp_path):
    a, b = make_run(tmp_path, "env-a", MATRIX), make_run(tmp_path, "env-b", MATRIX)
    folder = write_canary(tmp_path / "canary", [canary_cell(2.5, 2.5, 0.0, 0.0)], run_dirs=(a, b))
    code, out, _ = invoke(["compare", folder, "--json"])
    assert code == 0, out
    data = json.loads(out[out.index("{") : out.rindex("}") + 1])
    assert "env-a" in json.dumps(data) and "env-b" in json.dumps(data)


def test_a_cell_without_an_estimate_is_listed_not_gated_and_nothing_to_gate_is_bad_input(tmp_path):
    from dataclasses import replace

    bare = replace(canary_cell(2.5, 2.5, 0.0, 0.0), estimates=(), problems=("0 paired requests with drafts",))
    res = canary_gate(write_canary(tmp_path / "a", [canary_cell(2.5, 2.5, 0.0, 0.0), bare]))
    assert res.exit_code == 0 and len(res.checks) == 1 and "0 paired requests" in res.not_gated[0]
    with pytest.raises(BadInput, match="nothing to gate"):
        canary_gate(write_canary(tmp_path / "b", [bare]))
