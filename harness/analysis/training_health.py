"""Whether a trained draft is worth benching: a verdict from the training's own figures, computed
before any bench engine starts (issue 51). Each reason has its definition and threshold here:

- too few samples: training tokens per epoch ÷ the draft's trainable parameters (every tensor of
  the saved draft but the frozen embeddings and the vocabulary maps) below MIN_TOKENS_PER_PARAM.
  Measured: the CI's Kimi stand-in draft, 72,386 tokens for 1.70 M parameters (0.043), predicted
  AL 3.1; SmolLM2-135M's draft (~9.8 M parameters) with 256 prompts (~0.005) predicted AL 1.13,
  with 1,024 prompts (0.018) 1.45, both losing to ngram. A floor, not a guarantee.
- overfit: held-out loss above OVERFIT_LOSS_RATIO × the last epoch's mean training loss, or
  held-out step-0 accuracy below OVERFIT_ACC_RATIO × the last epoch's mean training step-0
  accuracy (the CI draft reads 0.93 and 0.98; SmolLM2 with 244 samples 17.3 / 13.2 = 1.31).
- loss not falling: the last epoch's mean training loss not below LOSS_FALL_RATIO × the first
  epoch's (a one-epoch run: its last quarter of steps against its first quarter).
- cannot beat a reference arm: predicted AL (1 + held-out full accuracy per TTT step, the draft
  drafting every step) not above the tokens per step the recipe's reference arm is expected to
  give at the same k: ngram's from prompt lookup replayed over the training responses
  (harness/analysis/prompt_lookup.py), the random draft's RANDOM_DRAFT_AL.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

MIN_TOKENS_PER_PARAM = 0.02
OVERFIT_LOSS_RATIO = 1.25
OVERFIT_ACC_RATIO = 0.75
LOSS_FALL_RATIO = 0.9
# an untrained draft proposes the verifier's token by chance only (1 / draft vocabulary per position)
RANDOM_DRAFT_AL = 1.0

TOO_FEW, OVERFIT, NOT_FALLING, CANNOT_BEAT = "too few samples", "overfit", "loss not falling", "cannot beat"


@dataclass(frozen=True)
class TrainingFigures:
    """What the verdict reads: the training's own figures (None where the run did not record one).
    references: per reference arm, its expected tokens per step at k = train.ttt_steps."""

    train_tokens_per_epoch: int | None
    trainable_params: int | None
    num_train_samples: int | None
    loss_first: float | None  # mean training loss, first epoch (or first quarter of a one-epoch run)
    loss_last: float | None  # ... last epoch (or last quarter)
    train_acc0_last: float | None  # mean training step-0 accuracy over the last epoch
    held_out_loss: float | None
    held_out_acc0: float | None
    predicted_al: float | None
    references: dict[str, float] = field(default_factory=dict)
    ngram_acceptance_length: float | None = None  # ngram's own AL (matched steps only), for the record

    @property
    def tokens_per_param(self) -> float | None:
        if not self.train_tokens_per_epoch or not self.trainable_params:
            return None
        return self.train_tokens_per_epoch / self.trainable_params


@dataclass(frozen=True)
class Finding:
    reason: str  # one of TOO_FEW, OVERFIT, NOT_FALLING, CANNOT_BEAT
    detail: str  # the figures against the threshold
    remedy: str  # what would help


@dataclass(frozen=True)
class TrainingHealth:
    figures: TrainingFigures
    findings: tuple[Finding, ...] = ()

    @property
    def healthy(self) -> bool:
        return not self.findings

    def line(self) -> str:
        """One line: the verdict, each reason with its figures and what would help."""
        if self.healthy:
            return "training looks healthy (no reason to expect the draft to lose: harness/analysis/training_health.py)"
        return "training UNHEALTHY: " + " | ".join(f"{f.reason}: {f.detail}; try {f.remedy}" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        figures = asdict(self.figures) | {"tokens_per_param": self.figures.tokens_per_param}
        return {"healthy": self.healthy, "figures": figures, "findings": [asdict(f) for f in self.findings]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainingHealth:
        known = {f.name for f in fields(TrainingFigures)}
        figures = TrainingFigures(**{k: v for k, v in d["figures"].items() if k in known})
        return cls(figures, tuple(Finding(**f) for f in d.get("findings", ())))


@dataclass(frozen=True)
class Knobs:
    """The recipe's settings the remedies name."""

    num_prompts: int | None
    epochs: int
    lr: float


def assess(f: TrainingFigures, knobs: Knobs) -> TrainingHealth:
    """The verdict: every reason the figures show, in the order above."""
    found = [_too_few(f, knobs), _overfit(f, knobs), _not_falling(f, knobs)]
    found += [_cannot_beat(f, arm, tps) for arm, tps in f.references.items()]
    return TrainingHealth(f, tuple(x for x in found if x is not None))


def _too_few(f: TrainingFigures, knobs: Knobs) -> Finding | None:
    ratio = f.tokens_per_param
    if ratio is None or ratio >= MIN_TOKENS_PER_PARAM:
        return None
    now = knobs.num_prompts or f.num_train_samples or 0
    need = math.ceil(now * MIN_TOKENS_PER_PARAM / ratio)
    return Finding(
        TOO_FEW,
        f"{f.num_train_samples} samples, {f.train_tokens_per_epoch:,} tokens per epoch for {f.trainable_params:,} "
        f"trainable draft parameters = {ratio:.4f} tokens per parameter, below the floor {MIN_TOKENS_PER_PARAM}",
        f"more prompts: train.num_prompts={need} reaches the floor (now {now}); or more tokens per prompt "
        "(train.max_new_tokens, train.conversations, train.long_documents), or a smaller draft",
    )


def _overfit(f: TrainingFigures, knobs: Knobs) -> Finding | None:
    loss = _ratio(f.held_out_loss, f.loss_last)
    acc = _ratio(f.held_out_acc0, f.train_acc0_last)
    over_loss = loss is not None and loss > OVERFIT_LOSS_RATIO
    over_acc = acc is not None and acc < OVERFIT_ACC_RATIO
    if not (over_loss or over_acc):
        return None
    parts = []
    if over_loss:
        parts.append(f"held-out loss {f.held_out_loss:.3g} = {loss:.2f} × training loss (limit {OVERFIT_LOSS_RATIO})")
    if over_acc:
        parts.append(
            f"held-out step-0 accuracy {f.held_out_acc0:.3f} = {acc:.2f} × training accuracy "
            f"{f.train_acc0_last:.3f} (floor {OVERFIT_ACC_RATIO})"
        )
    fewer = f" or fewer epochs (train.epochs={knobs.epochs - 1})" if knobs.epochs > 1 else ""
    return Finding(OVERFIT, "; ".join(parts), f"more data (train.num_prompts){fewer}")


def _not_falling(f: TrainingFigures, knobs: Knobs) -> Finding | None:
    fell = _ratio(f.loss_last, f.loss_first)
    if fell is None or fell < LOSS_FALL_RATIO:
        return None
    what = (
        f"lower the learning rate (train.lr={knobs.lr / 3:.2g}, now {knobs.lr:g}): the loss rose"
        if fell > 1
        else f"a higher learning rate (train.lr={knobs.lr * 3:.2g}, now {knobs.lr:g}) or more epochs "
        f"(train.epochs={knobs.epochs + 1})"
    )
    return Finding(
        NOT_FALLING,
        f"training loss {f.loss_first:.3g} -> {f.loss_last:.3g} (mean over the first vs the last epoch, or "
        f"quarter of a one-epoch run: {fell:.2f}×, must fall below {LOSS_FALL_RATIO}×)",
        what,
    )


def _cannot_beat(f: TrainingFigures, arm: str, tokens_per_step: float) -> Finding | None:
    if f.predicted_al is None or f.predicted_al > tokens_per_step:
        return None
    return Finding(
        f"{CANNOT_BEAT} {arm}",
        f"predicted AL {f.predicted_al:.2f} is not above the {tokens_per_step:.2f} tokens per step {arm} is "
        "expected to give",
        f"a better draft (more data: train.num_prompts; any other reason here names its knob), or deploy {arm}",
    )


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None
