"""`harness train`: prompts -> responses -> agreement gate -> hidden states -> vocab -> draft.

Every stage writes its output into the run folder atomically; a rerun resumes at the first
missing output, and nothing complete is recomputed. A run folder remembers the recipe that
made it and refuses another (results of two recipes never mix).

  prompts.jsonl          the training prompts (checked against the bench suites)
  responses/part-*.jsonl the verifier's own answers, regenerated with vLLM (EAGLE-3 learns them)
  responses/timing.json  each engine session's start and generation time (the cost model's measurements)
  agreement.json         vLLM vs the hidden-state source, greedy-token agreement (gate)
  hidden/shard-*.pt      aux-layer states + pre-norm last state per sample (transformers)
  vocab.pt / vocab.json  draft vocabulary (d2t, t2d) and its coverage
  checkpoints/           speculators Trainer checkpoints (resumable, one per epoch)
  draft/                 the final draft, speculators format, loadable by vLLM, + harness.json
  train_report.json      loss curve, per-TTT-step held-out accuracy, predicted acceptance length, and
                         the training-health verdict (harness/train/health.py)

This module runs the stages in order and writes the report; the stages are harness/train/responses.py
(prompts, responses), states.py (agreement gate, hidden states, vocab) and training.py (fit, draft),
the run folder's recipe check harness/train/run_dir.py.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.draft.config import aux_layer_ids, check_draft_vocab
from harness.draft.verifier import resolve_verifier
from harness.provenance import atomic_write_json
from harness.recipe import Recipe
from harness.train.health import training_health
from harness.train.hidden_states import Sample
from harness.train.records import TrainReport, held_out_full_acc, position_acc_key, predicted_al
from harness.train.responses import stage_prompts, stage_responses
from harness.train.run_dir import TRAIN_SECTIONS, prepare_run_dir
from harness.train.states import stage_agreement, stage_hidden, stage_vocab
from harness.train.training import stage_draft, stage_fit
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout


@dataclass
class TrainResult:
    run_dir: Path
    draft_dir: Path
    report: TrainReport
    layout: VerifierLayout


def build_report(
    recipe: Recipe,
    run_dir: Path,
    fit: dict[str, Any],
    agreement: dict[str, Any],
    vocab: dict[str, Any],
    samples: list[Sample],
) -> TrainReport:
    """Training report; predicted AL = 1 + sum over TTT steps of held-out full accuracy."""
    curves = json.loads((run_dir / "train_curve.json").read_text())
    val = curves["val"][-1] if curves["val"] else {}
    steps = range(recipe.train.ttt_steps)
    accs = held_out_full_acc(val, recipe.draft.method, recipe.train.ttt_steps)
    # EAGLE-3: step k given steps < k right; P-EAGLE, DFlash: each position's accuracy alone
    method = recipe.draft.method
    cond_keys = [position_acc_key(method, k) if method != "eagle3" else f"cond_acc_{k}" for k in steps]
    cond = [c for c in (val.get(key + "_epoch") for key in cond_keys) if c is not None]
    train = curves["train"]
    return TrainReport(
        predicted_acceptance_length=predicted_al(val, method, recipe.train.ttt_steps),
        held_out_full_acc=accs,
        held_out_cond_acc=cond,
        held_out_loss=val.get("loss_epoch"),
        train_loss_first=train[0].get("loss") if train else None,
        train_loss_last=train[-1].get("loss") if train else None,
        train_wall_s=fit.get("wall_s"),
        train_tokens=fit.get("train_tokens"),
        train_tok_per_s=fit.get("train_tok_per_s"),
        global_step=fit.get("global_step"),
        num_train_samples=fit.get("num_train_samples"),
        num_val_samples=fit.get("num_val_samples"),
        hidden_states=json.loads((run_dir / "hidden" / "done.json").read_text()),
        agreement=agreement.get("agreement"),
        vocab=vocab,
        init_held_out_full_acc=fit.get("init_held_out_full_acc"),
        train_context_len=max((len(x.input_ids) for x in samples), default=None),
    )


def _plot_training(run_dir: Path, reporter: Reporter) -> None:
    try:
        from harness.train.report_plot import plot_training

        plot_training(run_dir)
    except Exception as e:  # noqa: BLE001 - a plot must not fail a finished training
        reporter.log(f"training plot skipped: {e}")


def run_train(recipe: Recipe, run_dir: Path, reporter: Reporter, spare_hosts: int = 0) -> TrainResult:
    prepare_run_dir(run_dir, recipe, TRAIN_SECTIONS)
    layout = resolve_verifier(recipe, reporter)
    aux_ids = aux_layer_ids(recipe, layout)
    if recipe.train.init_from:  # refuse an init draft that cannot start this training before any stage runs
        from harness.draft.warm_start import check_init_from

        check_init_from(recipe.train.init_from, layout)
    check_draft_vocab(recipe, layout)
    rows = stage_prompts(recipe, run_dir, layout)
    samples = stage_responses(recipe, layout, run_dir, rows, reporter, spare_hosts)
    model = None
    needs_forward = recipe.train.hidden_states_source == "transformers" and (
        not (run_dir / "agreement.json").is_file() or not (run_dir / "hidden" / "done.json").is_file()
    )
    if needs_forward:
        from harness.verifier.hf_text import load_text_model

        model = load_text_model(layout)
    agreement = stage_agreement(recipe, layout, run_dir, samples, model, reporter)
    stage_hidden(recipe, layout, run_dir, samples, model, aux_ids, reporter)
    del model
    vocab = stage_vocab(recipe, layout, run_dir, samples)
    reporter.log(f"draft vocab {vocab['draft_vocab_size']} covers {vocab['coverage']:.1%} of response tokens")
    fit = stage_fit(recipe, layout, run_dir, aux_ids, reporter)
    report_path = run_dir / "train_report.json"
    fresh = not report_path.is_file()
    if fresh:
        report = build_report(recipe, run_dir, fit, agreement, vocab, samples)
    else:
        report = TrainReport.from_dict(json.loads(report_path.read_text()))
    draft = stage_draft(recipe, layout, run_dir, aux_ids, report)
    if report.health is None:  # judged before any bench (a report from before the verdict gets one now)
        report = dataclasses.replace(report, health=training_health(recipe, run_dir, report, samples, draft))
        atomic_write_json(report_path, report.to_dict())
    if fresh:
        _plot_training(run_dir, reporter)
    return TrainResult(run_dir, draft, report, layout)
