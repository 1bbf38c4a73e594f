"""`harness gate / report / compare` (harness/results/commands.py): their arguments checked before any
run is read."""

from __future__ import annotations

import pytest

from tests.fault_helpers import one_line, run_cli


@pytest.mark.parametrize("tolerance", ["-1", "1", "2"])
def test_gate_tolerance_outside_0_1_is_bad_input_not_a_verdict(capsys, monkeypatch, tolerance):
    code, err = run_cli(capsys, monkeypatch, "gate", "some-run", "--baseline", "tiny-kimi-ci", "--tolerance", tolerance)
    assert code == 2 and "--tolerance" in one_line(err)
