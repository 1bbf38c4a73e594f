"""What a bench measures: the draft under test (a trained EAGLE-3 folder or vLLM's ngram) and
the recipe's reference drafts, each checked against the verifier before any engine starts."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.provenance import content_hash
from harness.recipe import Recipe
from harness.verifier.layout import VerifierLayout


@dataclass(frozen=True)
class DraftUnderTest:
    label: str
    method: str  # eagle3 | ngram
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


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: not valid JSON ({e}); restore the file or re-export the draft") from e


def _check_recorded_verifier(draft_dir: Path, cfg: dict[str, Any], meta: dict[str, Any],
                             layout: VerifierLayout) -> None:
    recorded = (meta.get("verifier") or {}).get("content_hash")
    if recorded:
        served = content_hash(layout.path)
        if recorded.get("sha256") != served["sha256"]:
            raise BadInput(
                f"{draft_dir} was trained for verifier {meta['verifier'].get('name_or_path')} "
                f"(content {recorded.get('sha256')}) but the served verifier {layout.path} has content "
                f"{served['sha256']}; bench it against the verifier it was trained for, or retrain")
        return
    archs = ((cfg.get("speculators_config") or {}).get("verifier") or {}).get("architectures") or []
    if archs and layout.architectures and list(archs) != list(layout.architectures):
        raise BadInput(f"{draft_dir}: draft records verifier architectures {archs}, served verifier is "
                       f"{list(layout.architectures)}; this draft was trained for another verifier")


def check_draft_for_verifier(draft_dir: Path, layout: VerifierLayout) -> dict[str, Any]:
    """Refuse a draft trained for another verifier; returns its harness metadata (may be empty)."""
    cfg_path = draft_dir / "config.json"
    if not cfg_path.is_file():
        raise BadInput(f"{draft_dir}: not a draft checkpoint (no config.json)")
    cfg = read_json(cfg_path)
    if cfg.get("speculators_model_type") != "eagle3":
        raise BadInput(f"{draft_dir}: not an EAGLE-3 speculators checkpoint (speculators_model_type="
                       f"{cfg.get('speculators_model_type')!r})")
    hidden = (cfg.get("transformer_layer_config") or {}).get("hidden_size")
    if hidden is not None and hidden != layout.hidden_size:
        raise BadInput(f"{draft_dir}: draft hidden size {hidden} does not match the verifier's {layout.hidden_size}; "
                       "this draft was trained for another verifier")
    meta_path = draft_dir / "harness.json"
    meta = read_json(meta_path) if meta_path.is_file() else {}
    _check_recorded_verifier(draft_dir, cfg, meta, layout)
    ids = cfg.get("eagle_aux_hidden_state_layer_ids") or []
    if ids and max(ids) >= layout.num_layers:
        raise BadInput(f"{draft_dir}: aux layer ids {ids} do not exist in a {layout.num_layers}-layer verifier")
    return meta


def verifier_identity(path: str) -> str:
    """What makes two runs' verifiers the same: a stand-in is its spec fingerprint (rebuilt
    bit-for-bit from the same spec on the same kind of machine, and comparable across machines
    where float rounding differs); any other checkpoint is its content hash."""
    meta = Path(path) / "standin.json"
    if meta.is_file():
        return "standin:" + json.loads(meta.read_text())["fingerprint"]
    return content_hash(path)["sha256"]


def _reference_drafts(recipe: Recipe, layout: VerifierLayout, names: list[str]) -> list[DraftUnderTest]:
    from harness.draft import reference
    from harness.draft.config import aux_layer_ids, draft_layer_config
    from harness.verifier.standins.build import cache_root

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
    return out


def resolve_drafts(recipe: Recipe, layout: VerifierLayout, draft_dir: Path | None,
                   label: str = "draft") -> list[DraftUnderTest]:
    """The draft under test (a trained EAGLE-3 folder, or vLLM's ngram) plus the recipe's
    reference drafts."""
    out: list[DraftUnderTest] = []
    if draft_dir is not None:
        meta = check_draft_for_verifier(draft_dir, layout)
        out.append(DraftUnderTest(label, "eagle3", layout, str(draft_dir),
                                  tuple(meta.get("held_out_full_acc") or ()), content_hash(draft_dir),
                                  train_context_len=meta.get("train_context_len")))
    elif recipe.bench.method == "ngram":
        out.append(DraftUnderTest("ngram", "ngram", layout))
    ngram_is_main = recipe.bench.method == "ngram" and draft_dir is None
    refs = [r for r in recipe.bench.reference_drafts if not (r == "ngram" and ngram_is_main)]
    out += _reference_drafts(recipe, layout, refs)
    if not out:
        raise BadInput("nothing to bench: pass --draft DIR, set bench.method = 'ngram', or list bench.reference_drafts")
    return out
