"""The run folder `harness bench` writes (results/runs/<id>/): resumed, or new with a fresh id."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from harness.errors import BadInput
from harness.recipe import Recipe
from harness.results.table import finished_cells


def bench_run_dir(recipe: Recipe, run_id: str | None, resume: bool) -> Path:
    """The run folder `harness bench` writes: a resumable one (--resume: it must exist), or a new
    one (an unknown id, or a folder whose run finished no cell)."""
    from harness.paths import RUNS_DIR
    from harness.results.manifest import free_unstarted_run, require_resumable

    if resume and not run_id:
        raise BadInput("--resume needs --run-id of the run to complete")
    run_dir = RUNS_DIR / (run_id or new_run_id(recipe))
    if resume:
        require_resumable(run_dir)
    else:
        free_unstarted_run(run_dir, finished_cells(run_dir))
    return run_dir


def new_run_id(recipe: Recipe) -> str:
    return f"{recipe.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
