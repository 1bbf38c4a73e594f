"""JSON inputs (harness/jsonfiles.py): a broken file is bad input naming file:line, never a traceback."""

from __future__ import annotations

import uuid

import pytest

from tests.fault_helpers import _draft, one_line, run_cli


@pytest.mark.parametrize(
    "name, content", [("config.json", "{not json"), ("harness.json", '{"held_out_full_acc": [0.5,')]
)
def test_draft_with_a_malformed_json_file_is_bad_input_naming_it(tmp_path, capsys, monkeypatch, name, content):
    draft = _draft(tmp_path / "draft")
    (draft / name).write_text(content)
    code, err = run_cli(capsys, monkeypatch, "bench", "--draft", str(draft), "--run-id", f"faults-{uuid.uuid4().hex}")
    assert code == 2
    assert f"{draft / name}:1: malformed JSON" in one_line(err)
