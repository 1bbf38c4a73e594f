"""Warm start, end to end (issue 12): a SpecForge-format copy of a trained draft, loaded through
`train.init_from` into a fresh speculators draft, scores on the held-out split at step 0 what the
trained draft scored, far above a fresh draft. Real speculators, real hidden states."""

from __future__ import annotations

import dataclasses
import json

import pytest

pytestmark = pytest.mark.slow


def test_warm_start_from_specforge_draft_starts_where_training_ended(tmp_path, kimi_trained_run):
    from harness.draft.convert import to_specforge
    from harness.draft.formats import inspect_draft
    from harness.train.fit import evaluate_draft
    from harness.train.records import FitConfig

    run = kimi_trained_run.run_dir
    plan = FitConfig.from_dict(json.loads((run / "fit_plan.json").read_text()))
    specforge = to_specforge(kimi_trained_run.draft_dir, tmp_path / "specforge")
    assert inspect_draft(specforge).format == "specforge"

    fresh = evaluate_draft(dataclasses.replace(plan, init_from=None))
    warm = evaluate_draft(dataclasses.replace(plan, init_from=str(specforge)))
    trained = kimi_trained_run.report.held_out_full_acc
    warm_acc = [warm[f"full_acc_{k}_epoch"] for k in range(len(trained))]
    assert fresh["full_acc_0_epoch"] < 0.05  # a fresh draft guesses
    assert warm_acc[0] > fresh["full_acc_0_epoch"] + 0.3, (warm_acc, fresh)
    # the same weights on the same held-out split: the trained draft's own figures
    assert all(abs(w - t) < 0.02 for w, t in zip(warm_acc, trained)), (warm_acc, trained)
