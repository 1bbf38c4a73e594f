"""The training-health verdict of a finished training run (harness/analysis/training_health.py has
the reasons and thresholds): its figures gathered from the run folder, and what the recipe's
`train.on_unhealthy` does with it before the bench starts any engine ("warn": a flag line, the job
carries on; "stop": one line, exit 2, the trained draft and the run folder kept)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import fmean
from typing import Any

from harness.analysis import prompt_lookup
from harness.analysis.training_health import RANDOM_DRAFT_AL, Knobs, TrainingFigures, TrainingHealth, assess
from harness.errors import BadInput
from harness.recipe import Recipe
from harness.train.hidden_states import Sample
from harness.train.records import TrainReport, position_acc_key
from harness.verifier.safetensors_index import read_header, read_weight_map


def _frozen(key: str) -> bool:
    """Saved with the draft but not trained: the verifier's embeddings (speculators freezes them),
    the vocabulary maps, the verifier's final norm that makes the targets."""
    parts = key.split(".")
    return "embed_tokens" in parts or parts[-1] in ("d2t", "t2d") or any(p.startswith("verifier_") for p in parts)


def trainable_params(draft_dir: Path) -> int:
    """Elements of the saved draft's tensors, the frozen ones left out; from the headers only."""
    shards = sorted(read_weight_map(draft_dir).present)
    infos = (item for shard in shards for item in read_header(draft_dir / shard).items())
    return sum(math.prod(info.shape) for key, info in infos if not _frozen(key))


def _epoch_means(steps: list[dict[str, Any]], key: str) -> tuple[float | None, float | None]:
    """The metric's mean over the first and the last epoch; a one-epoch run: its first and last quarter."""
    rows = [s for s in steps if s.get(key) is not None]
    if not rows:
        return None, None
    epochs = sorted({s.get("epoch", 0) for s in rows})
    if len(epochs) > 1:
        first = [s[key] for s in rows if s.get("epoch", 0) == epochs[0]]
        last = [s[key] for s in rows if s.get("epoch", 0) == epochs[-1]]
    else:
        q = max(1, len(rows) // 4)
        first, last = [s[key] for s in rows[:q]], [s[key] for s in rows[-q:]]
    return fmean(first), fmean(last)


# ngram's replay reads this many training responses at most (the first ones): a pure-Python pass over
# every token, ~1 s per 500 responses of a few hundred tokens; a production set would take minutes.
NGRAM_SAMPLES = 512


def references(recipe: Recipe, samples: list[Sample]) -> tuple[dict[str, float], float | None]:
    """Per reference arm of the recipe with an offline expectation, its expected tokens per step at
    k = train.ttt_steps (ngram: replayed over the first NGRAM_SAMPLES training responses, every one of
    them held out from ngram, which trains on nothing); and ngram's own AL (None without ngram)."""
    out: dict[str, float] = {}
    ngram_al = None
    k = recipe.train.ttt_steps
    for arm in recipe.bench.reference_drafts:
        if arm == "ngram":
            c = prompt_lookup.expected(((s.prompt_ids, s.output_ids) for s in samples[:NGRAM_SAMPLES]), k)
            if c.tokens_per_step is not None:
                out[arm], ngram_al = c.tokens_per_step, c.acceptance_length
        elif arm == "random":
            out[arm] = RANDOM_DRAFT_AL
    return out, ngram_al


def training_health(
    recipe: Recipe, run_dir: Path, report: TrainReport, samples: list[Sample], draft_dir: Path
) -> TrainingHealth:
    """The verdict from the run folder's curves (train_curve.json), the report and the draft."""
    curves = json.loads((run_dir / "train_curve.json").read_text())
    acc0 = position_acc_key(recipe.draft.method, 0)
    loss_first, loss_last = _epoch_means(curves["train"], "loss")
    _, acc_last = _epoch_means(curves["train"], acc0)
    refs, ngram_al = references(recipe, samples)
    per_epoch = report.train_tokens // recipe.train.epochs if report.train_tokens else None
    figures = TrainingFigures(
        train_tokens_per_epoch=per_epoch,
        trainable_params=trainable_params(draft_dir),
        num_train_samples=report.num_train_samples,
        loss_first=loss_first,
        loss_last=loss_last,
        train_acc0_last=acc_last,
        held_out_loss=report.held_out_loss,
        held_out_acc0=report.held_out_full_acc[0] if report.held_out_full_acc else None,
        predicted_al=report.predicted_acceptance_length,
        references=refs,
        ngram_acceptance_length=ngram_al,
    )
    return assess(figures, Knobs(recipe.train.num_prompts, recipe.train.epochs, recipe.train.lr))


def act_on_health(recipe: Recipe, health: TrainingHealth | None, draft_dir: Path, log) -> str | None:
    """What train.on_unhealthy does: the verdict line is logged (`log`) and returned (a note of the
    run) when the draft is unhealthy; "stop" then refuses in one line, the draft kept."""
    if health is None or health.healthy:
        return None
    line = health.line()
    if recipe.train.on_unhealthy == "stop":
        raise BadInput(
            f"{line} -- stopped before the bench (train.on_unhealthy = 'stop'); the trained draft is kept at "
            f"{draft_dir}: rerun with --set train.on_unhealthy=warn to bench it anyway"
        )
    log(f"{line} (train.on_unhealthy = 'warn': benching it anyway)")
    return line
