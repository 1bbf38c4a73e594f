"""What a bench measures: the draft under test (a trained EAGLE-3 folder or vLLM's ngram) and
the recipe's reference drafts, each checked against the verifier before any engine starts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engine.settings import SpecMethod
from harness.errors import BadInput
from harness.provenance import content_hash
from harness.recipe import Recipe
from harness.verifier.layout import VerifierLayout


@dataclass(frozen=True)
class DraftUnderTest:
    label: str
    method: SpecMethod
    verifier: VerifierLayout
    path: str | None = None
    held_out_full_acc: tuple[float, ...] = ()
    content_hash: dict[str, str] | None = None
    # The oracle's verifier emits one token at any temperature, so outputs must match the
    # baseline's even when sampling: a lossless check that also works at T > 0.
    deterministic_verifier: bool = False
    # tokens of the longest training sample (harness.json `train_context_len`; None for older drafts)
    train_context_len: int | None = None

    def predicted_al(self, k: int) -> float | None:
        """1 + sum of held-out full accuracies of draft steps < k (known for k <= TTT steps)."""
        if self.method != "eagle3" or not self.held_out_full_acc or k > len(self.held_out_full_acc):
            return None
        return 1.0 + sum(self.held_out_full_acc[:k])


def check_draft_for_verifier(draft_dir: Path, layout: VerifierLayout) -> dict[str, Any]:
    """Refuse a draft that cannot draft for this verifier (any format vLLM serves; the checks are
    harness/draft/fit_check.py); returns its harness metadata (may be empty)."""
    from harness.draft.guard import require_fit

    return require_fit(draft_dir, layout).harness_meta


def verifier_identity(path: str) -> str:
    """What makes two runs' verifiers the same: a stand-in is its spec fingerprint (rebuilt
    bit-for-bit from the same spec on the same kind of machine, and comparable across machines
    where float rounding differs); any other checkpoint is its content hash."""
    meta = Path(path) / "standin.json"
    if meta.is_file():
        return "standin:" + json.loads(meta.read_text())["fingerprint"]
    return content_hash(path)["sha256"]


def _reference_drafts(recipe: Recipe, layout: VerifierLayout, names: Sequence[str]) -> list[DraftUnderTest]:
    from harness.draft import reference
    from harness.draft.config import aux_layer_ids, draft_layer_config
    from harness.paths import cache_root

    ids = aux_layer_ids(recipe, layout)
    dcfg = draft_layer_config(recipe, layout, recipe.engine.max_model_len)
    out = []
    for r in names:
        if r == "random":
            p = reference.random_draft(layout, dcfg, ids, cache_root())
            out.append(DraftUnderTest("random", "eagle3", layout, str(p), (), content_hash(p)))
        elif r == "oracle":
            v, p = reference.oracle_pair(layout, dcfg, ids, cache_root())
            out.append(DraftUnderTest("oracle", "eagle3", v, str(p), (), content_hash(p), deterministic_verifier=True))
        elif r == "ngram":
            out.append(DraftUnderTest("ngram", "ngram", layout))
        elif r == "suffix":
            require_suffix_decoding()
            out.append(DraftUnderTest("suffix", "suffix", layout))
        elif r == "draft_model":
            p = reference.truncated_verifier(layout, recipe.bench.draft_model_layers, cache_root())
            out.append(DraftUnderTest("draft_model", "draft_model", layout, str(p), (), content_hash(p)))
        elif r == "mtp":
            require_mtp_layers(layout)
            out.append(DraftUnderTest("mtp", "mtp", layout, layout.path))
    return out


def require_mtp_layers(layout: VerifierLayout) -> None:
    """vLLM's mtp method drafts with the verifier's own MTP layers: refuse one without them before any engine starts."""
    nextn = layout.text_config.get("num_nextn_predict_layers") or 0
    if nextn < 1:
        raise BadInput(
            f"bench.reference_drafts has 'mtp', but the verifier {layout.path} has no MTP layers "
            f"(num_nextn_predict_layers = {nextn}; Kimi-K2.5 ships none, DeepSeek-V3 one): remove 'mtp'"
        )


def require_suffix_decoding() -> None:
    """vLLM's suffix method imports Arctic Inference inside the engine: refuse before any engine starts."""
    import importlib.util

    if importlib.util.find_spec("arctic_inference") is None:
        raise BadInput(
            "bench.reference_drafts has 'suffix', but arctic-inference (vLLM's suffix decoding) is not installed: "
            "scripts/setup_env.sh builds it from its source release; elsewhere "
            "`pip install --no-build-isolation arctic-inference==0.3.0` (needs cmake and a C++ compiler)"
        )


BASELINE_DRAFT = "baseline_draft"  # the label of gate.baseline_draft's cells


def _baseline_draft(path: Path, layout: VerifierLayout) -> DraftUnderTest:
    """gate.baseline_draft as a draft under test, checked like the candidate (any format vLLM serves)."""
    from harness.draft.guard import require_fit
    from harness.paths import REPO_ROOT

    path = path if path.is_dir() or path.is_absolute() else REPO_ROOT / path
    if not path.is_dir():
        raise BadInput(
            f"gate.baseline_draft {path}: no such folder (the baseline's draft, benched beside the candidate)"
        )
    info = require_fit(path, layout)
    return DraftUnderTest(BASELINE_DRAFT, info.method, layout, str(path), (), info.content_hash)


def resolve_drafts(
    recipe: Recipe, layout: VerifierLayout, draft_dir: Path | None, label: str = "draft"
) -> list[DraftUnderTest]:
    """The draft under test (a trained EAGLE-3 folder, or vLLM's ngram) plus the recipe's
    reference drafts."""
    out: list[DraftUnderTest] = []
    if draft_dir is not None:
        from harness.draft.guard import require_fit

        info = require_fit(draft_dir, layout)  # any format vLLM serves, checked before any engine starts
        meta = info.harness_meta
        out.append(
            DraftUnderTest(
                label,
                info.method,
                layout,
                str(draft_dir),
                tuple(meta.get("held_out_full_acc") or ()),
                info.content_hash,
                train_context_len=meta.get("train_context_len"),
            )
        )
    elif recipe.bench.method == "ngram":
        out.append(DraftUnderTest("ngram", "ngram", layout))
    if recipe.gate.baseline_draft:  # the paired gate's baseline: the old draft, on the same prompts
        out.append(_baseline_draft(Path(recipe.gate.baseline_draft), layout))
    ngram_is_main = recipe.bench.method == "ngram" and draft_dir is None
    refs = [r for r in recipe.bench.reference_drafts if not (r == "ngram" and ngram_is_main)]
    out += _reference_drafts(recipe, layout, refs)
    if not out:
        raise BadInput("nothing to bench: pass --draft DIR, set bench.method = 'ngram', or list bench.reference_drafts")
    return out
