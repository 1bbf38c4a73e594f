"""A bench run's manifest.json: what ran (provenance, recipe, planned cells, drafts, suites)
and its status, kept truthful when the run ends, fails or is interrupted."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.draft.under_test import DraftUnderTest
from harness.errors import BadInput
from harness.provenance import atomic_write_json, git_sha, hardware, package_versions
from harness.recipe import Recipe
from harness.results.manifest import owner_fields, read_manifest_data
from harness.results.table import MANIFEST, finished_cells
from harness.suites import Suite
from harness.ui import Reporter

BENCH_SECTIONS = ("verifier", "engine", "bench")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def update_manifest(run_dir: Path, **fields: Any) -> dict[str, Any]:
    data = read_manifest_data(run_dir, missing_ok=True)
    data.update(fields)
    atomic_write_json(run_dir / MANIFEST, data)
    return data


def open_run(run_dir: Path, recipe: Recipe, resume: bool) -> None:
    """Refuse to overwrite a run, or to resume one made by another bench recipe."""
    manifest = read_manifest_data(run_dir, missing_ok=True)
    if manifest and not resume and finished_cells(run_dir):
        raise BadInput(f"{run_dir} already holds a run; pass --resume to complete it, or choose another run id")
    if resume and manifest and manifest.get("recipe_fingerprint") != recipe.fingerprint(*BENCH_SECTIONS):
        raise BadInput(f"{run_dir} was made by a different bench recipe; resume it with the same recipe")
    run_dir.mkdir(parents=True, exist_ok=True)


def start_manifest(
    run_dir: Path,
    recipe: Recipe,
    planned: list[str],
    drafts: list[DraftUnderTest],
    suites: list[Suite],
    verifier_hash: dict[str, str],
) -> None:
    previous = read_manifest_data(run_dir, missing_ok=True)
    update_manifest(
        run_dir,
        run_id=run_dir.name,
        status="running",
        **owner_fields(),
        started_at=previous.get("started_at") or _now(),
        resumed_at=_now() if previous else None,
        ended_at=None,
        recipe=recipe.model_dump(mode="json"),
        recipe_fingerprint=recipe.fingerprint(*BENCH_SECTIONS),
        planned_cells=planned,
        provenance={
            "git_sha": git_sha(),
            "packages": package_versions(),
            "hardware": hardware(),
            "seeds": {"engine": recipe.engine.seed, "train": recipe.train.seed},
        },
        verifier={p: {"path": p, "content_hash": h} for p, h in verifier_hash.items()},
        drafts={
            d.label: {
                "path": d.path,
                "method": d.method,
                "verifier": d.verifier.path,
                "content_hash": d.content_hash,
                "held_out_full_acc": list(d.held_out_full_acc),
            }
            for d in drafts
        },
        suites={
            s.name: {"version": s.version, "sha": s.sha, "source": s.source, "num_prompts": len(s.records)}
            for s in suites
        },
    )


def record_engine(run_dir: Path, name: str, engine) -> None:
    """Each engine the run started, as it was started (arguments, environment, startup seconds)."""
    engines = read_manifest_data(run_dir, missing_ok=True).get("engines") or {}
    update_manifest(run_dir, engines={**engines, name: engine.describe()})


@contextlib.contextmanager
def run_status(run_dir: Path, reporter: Reporter) -> Iterator[None]:
    """Mark the run complete, interrupted or failed, whichever way the block ends."""
    status = "complete"
    try:
        yield
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException:
        status = "failed"
        raise
    finally:
        update_manifest(run_dir, status=status, ended_at=_now())
        reporter.done()
