"""Where the online-trained draft's AL gap comes from: the same prompts and responses trained three
ways, then served side by side in one bench run (the end-to-end test's cells: code and math, 8
prompts x 64 tokens, k = 3, c = 4, T = 0):

- `offline-tf`: hidden states from a transformers forward, stored as shards;
- `offline-vllm`: the same, with states extracted by vLLM (train.hidden_states_source = 'vllm'),
  still stored as shards;
- `online-vllm`: the same states streamed from vLLM's extraction server as training reads them
  (train.hidden_states_mode = 'online', harness/train/online.py).

The run given stands for whichever of the three it is (its hidden/done.json); the other two are
trained again from its prompts and responses. It prints each draft's served pooled AL (per
suite), the training's predicted AL, and how far the offline-vllm and online-vllm weights end
apart. `offline-vllm` vs `online-vllm` differ only in where
the states are kept; `offline-tf` vs `offline-vllm` only in who computed them.

    .venv/bin/python bench/online_vs_offline.py --run RUN_DIR --out OUT_DIR

RUN_DIR: a finished CI-size training of the Kimi stand-in (e.g. the folder HARNESS_TEST_TRAIN_DIR
names; `harness train --out DIR --set verifier.standin='kimi-k2.5' --set train.num_prompts=384 ...`
with tests/conftest.py CI_TRAIN). Takes ~12 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _max_weight_diff(a: Path, b: Path) -> float:
    from safetensors.torch import load_file

    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    return max((wa[k].float() - wb[k].float()).abs().max().item() for k in wa)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="a finished CI-size offline training run")
    ap.add_argument("--out", type=Path, required=True, help="a new folder for the two twins and the bench")
    args = ap.parse_args()

    from harness.bench.loop import run_bench
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.paths import REPO_ROOT
    from harness.recipe import load_recipe
    from harness.results.runs import read_run
    from harness.results.table import rows_to_frame
    from harness.ui import Reporter
    from tests.conftest import CI_TRAIN
    from tests.e2e.test_train_e2e import CI_BENCH, retrain
    from tests.torchrun_runs import VLLM_ONLINE, VLLM_STATES

    ways = {
        "offline-tf": ["train.hidden_states_source='transformers'"],
        "offline-vllm": VLLM_STATES,
        "online-vllm": VLLM_ONLINE,
    }
    given = json.loads((args.run / "hidden" / "done.json").read_text())
    given_way = f"{given.get('mode', 'offline')}-{'tf' if given['source'] == 'transformers' else 'vllm'}"
    runs = {  # the given run stands for its own way; the others are trained again from its data
        label: args.run if label == given_way else retrain(args.run, args.out / label, sets).run_dir
        for label, sets in ways.items()
    }

    sets = [*CI_TRAIN, *CI_BENCH, "bench.reference_drafts=[]", "bench.machine_sentinel=false"]
    recipe = load_recipe(REPO_ROOT / "train" / "tiny-kimi-plain.toml", ["verifier.standin='kimi-k2.5'", *sets])
    layout = resolve_verifier(recipe)
    drafts = [d for label, run in runs.items() for d in resolve_drafts(recipe, layout, run / "draft", label)[:1]]
    run_bench(recipe, drafts, args.out / "bench", Reporter())
    df = rows_to_frame(read_run(args.out / "bench").rows)
    spec = df[df["mode"] == "speculative"]
    print("served AL (pooled over suites: 1 + accepted / drafts) and the training's predicted AL")
    for label, run in runs.items():
        rows = spec[spec["draft"] == label]
        pooled = 1 + rows["num_accepted_tokens"].sum() / rows["num_drafts"].sum()
        suites = ", ".join(f"{s} {al:.3f}" for s, al in zip(rows["suite"], rows["acceptance_length"], strict=True))
        predicted = json.loads((run / "train_report.json").read_text())["predicted_acceptance_length"]
        print(f"  {label:13s} {pooled:.3f} ({suites}); predicted {predicted:.3f}")
    diff = _max_weight_diff(runs["offline-vllm"] / "draft", runs["online-vllm"] / "draft")
    print(f"largest weight difference, offline-vllm vs online-vllm: {diff:.4f}")


if __name__ == "__main__":
    main()
