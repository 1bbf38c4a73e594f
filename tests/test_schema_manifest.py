"""harness/schema_manifest.py: manifest.json as a type, its fields and the facts read from them."""

from __future__ import annotations

from harness.schema_manifest import Manifest


def test_manifest_fields_and_facts():
    m = Manifest.from_dict(
        {
            "run_id": "r",
            "status": "running",
            "planned_cells": ["a", "b"],
            "owner": {"pid": 7, "pid_start_ticks": 3, "hostname": "h"},
            "provenance": {"git_sha": "abc", "hardware": {"device": "cpu", "cpu": "EPYC"}},
            "recipe": {"verifier": {"standin": "kimi-k2.5"}},
            "drafts": {"d": {"path": "/d", "content_hash": {"sha256": "ff"}, "method": "eagle3"}},
            "suites": {"chat": {"source": "builtin:chat"}},
        }
    )
    assert (m.run_id, m.status, m.planned_cells) == ("r", "running", ["a", "b"])
    assert m.owner is not None and (m.owner.pid, m.owner.hostname) == (7, "h")
    assert m.git_sha == "abc" and m.hardware.describe() == "cpu — EPYC"
    assert m.standin == "kimi-k2.5" and m.suite_sources == {"chat": "builtin:chat"}
    assert m.drafts["d"].content_hash == "ff" and m.drafts["d"].method == "eagle3"  # older {"sha256": ...} form
    killed = m.with_status("interrupted", "its process is gone")
    assert (killed.status, killed.recorded_status, killed.data["status"]) == ("interrupted", "running", "interrupted")
