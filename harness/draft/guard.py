"""The gate `bench` (and `draft inspect --verifier`) put in front of every draft folder."""

from __future__ import annotations

from pathlib import Path

from harness.draft.fit_check import draft_problems
from harness.draft.formats import DraftInfo, inspect_draft
from harness.errors import BadInput
from harness.provenance import content_hash
from harness.verifier.layout import VerifierLayout


def served_verifier_sha(info: DraftInfo, layout: VerifierLayout) -> str | None:
    """The served verifier's content hash, computed only when a check needs it (it reads the files)."""
    recorded = info.verifier.get("content_hash")
    needs = (isinstance(recorded, dict) and recorded.get("sha256")) or (
        info.format == "mtp" and info.path != layout.path
    )
    return content_hash(layout.path)["sha256"] if needs else None


def fit_problems(draft_dir: Path, layout: VerifierLayout) -> tuple[DraftInfo, list[str]]:
    info = inspect_draft(draft_dir)
    return info, draft_problems(info, layout, served_verifier_sha(info, layout))


def require_fit(draft_dir: Path, layout: VerifierLayout) -> DraftInfo:
    """The draft's description, or BadInput with the first reason it cannot draft for `layout`."""
    info, problems = fit_problems(draft_dir, layout)
    if problems:
        more = (
            f" (+{len(problems) - 1} more: harness draft inspect {draft_dir} --verifier {layout.path})"
            if len(problems) > 1
            else ""
        )
        raise BadInput(problems[0] + more)
    return info
