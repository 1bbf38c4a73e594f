"""The upgrade canary catches and names a planted engine difference (issue 54). The second
"environment" costs no install: a venv whose site-packages points at this project's (a .pth file) and
whose sitecustomize.py patches vLLM's rejection sampler to accept every draft token (the patch lives
here, applied when vLLM imports the module). The same vLLM version, so the version table knows it;
one tiny cell (the Kimi stand-in, the cached random draft, 4 prompts, 32 tokens, T = 0) on the real
engine and on the patched one. Four server starts in all."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from harness.recipe import load_recipe
from tests.conftest import PLAIN_RECIPE

pytestmark = pytest.mark.slow

CELL = [
    "verifier.standin='kimi-k2.5'",
    "bench.suites=['chat']",
    "bench.num_prompts=4",
    "bench.max_tokens=32",
    "bench.k=[3]",
    "bench.concurrency=[4]",
    "bench.temperature=[0.0]",
    "bench.repeats=1",
    "bench.warmup_requests=1",
    "bench.reference_drafts=['random']",
    "bench.machine_sentinel=false",
]

# vLLM's rejection sampler, patched to accept every draft token (lossy: the draft's tokens are emitted)
PATCH = """
import importlib.abc, importlib.util, sys

TARGET = "vllm.v1.sample.rejection_sampler"


def _patch(m):
    orig = m.rejection_sample

    def accept_all(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs,
                   target_logits, bonus_token_ids, *args, **kwargs):
        out = orig(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs,
                   target_logits, bonus_token_ids, *args, **kwargs)
        start = 0
        for i, n in enumerate(num_draft_tokens):
            out[i, :n] = draft_token_ids[start:start + n]
            out[i, n] = bonus_token_ids[i, 0]
            start += n
        return out

    m.rejection_sample = accept_all


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Finder())
"""


def patched_env(folder: Path) -> Path:
    """A venv on this project's packages, with PATCH in its sitecustomize."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(folder), "platbase": str(folder)}))
    (site / "project.pth").write_text(sysconfig.get_path("purelib") + "\n")
    (site / "sitecustomize.py").write_text(PATCH)
    return folder


@pytest.fixture(scope="module")
def canary(tmp_path_factory, kimi_standin):
    from harness.canary import resolve_envs, run_canary
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.ui import Reporter

    env = patched_env(tmp_path_factory.mktemp("env") / "patched")
    envs = resolve_envs(["current", str(env)])
    recipe = load_recipe(PLAIN_RECIPE, CELL)
    drafts = resolve_drafts(recipe, resolve_verifier(recipe), None)
    return run_canary(recipe, drafts, envs, tmp_path_factory.mktemp("canary"), Reporter())


def test_the_patched_sampler_is_caught_and_named(canary):
    ((name, cells, missing),) = canary.steps
    cell = cells[0]
    assert missing == [] and len(cells) == 1
    assert "ACCEPTANCE CHANGED" in cell.flags and "OUTPUTS CHANGED" in cell.flags
    al = cell.estimates[0]
    assert al.metric == "acceptance_length" and al.candidate == pytest.approx(4.0) and al.low > 0
    assert canary.verdict == "fail" and canary.first_change == name


def test_divergences_are_the_speculative_paths_not_the_verifiers(canary):
    """The no-speculation outputs are the same on both engines: every divergence is speculation's."""
    out = canary.steps[0][1][0].outputs
    # chat's 4 prompts are conversations: every turn is a request (9 here)
    assert out is not None and out.compared >= 4 and out.identical < out.compared
    assert {d["arm"] for d in out.divergences} == {"speculative"}
    assert all(d["kind"].startswith("speculation") and "new engine" in d["kind"] for d in out.divergences)


def test_each_run_records_its_environment(canary):
    import json

    for r in canary.runs:
        data = json.loads((r.run_dir / "manifest.json").read_text())
        assert data["engine_env"]["python"] == r.env.python
        assert data["engine_env"]["vllm"] == "0.32.0" and data["engine_env"]["torch"].startswith("2.13.0")


def test_the_gate_report_and_compare_read_the_canary_folder(canary, tmp_path):
    """The canary's verdict fails `harness gate` (exit 1, JUnit for CI), `harness report` renders it and
    `harness compare` lays its engines' runs side by side: read from canary.json, nothing re-measured."""
    from tests.results_fixtures import invoke

    code, _, exc = invoke(["gate", canary.folder, "--junit", tmp_path / "junit.xml"])
    assert code == 1 and "ACCEPTANCE CHANGED" in str(exc)
    assert "<failure" in (tmp_path / "junit.xml").read_text()
    code, out, exc = invoke(["report", canary.folder])
    assert code == 0, (out, exc)
    md = (canary.folder / "report" / "report.md").read_text()
    assert "**fail**" in md and "ACCEPTANCE CHANGED" in md and "OUTPUTS CHANGED" in md
    code, out, exc = invoke(["compare", canary.folder, "--json"])
    assert code == 0 and all(r.run_dir.name in out for r in canary.runs), (out, exc)
