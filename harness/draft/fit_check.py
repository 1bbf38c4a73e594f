"""Does a draft fit a verifier? Pure checks over a DraftInfo and a VerifierLayout (no I/O: the
caller passes the served verifier's content hash when it has one).

Each problem is one line saying what is wrong and how to fix it; `bench` refuses a draft with
the first one (exit 2) before any engine starts. What is checked, and why vLLM needs it:
  - widths: the fc layer reads the verifier's aux states, so its input must be
    verifier hidden x number of aux states, and the draft's target width the verifier's;
  - vocabulary: d2t maps draft ids to verifier ids (target = draft + d2t[draft]), every one
    must land inside the verifier's vocab; t2d and the embeddings must be the verifier's size;
  - aux ids: id i is the residual stream entering decoder layer i, so ids must be < L
    (id L is never collected); id 0 crashes DeepSeek/Kimi verifiers in vLLM (docs/draft-formats.md);
  - the verifier it records: its content hash when the draft records one, else its architectures;
  - MTP: the prediction layers are the verifier's own, so the "draft" must be the served checkpoint.
"""

from __future__ import annotations

from harness.draft.formats import DraftInfo
from harness.verifier.layout import VerifierLayout

ANOTHER = "this draft was trained for another verifier"


def aux_ids_in_use(info: DraftInfo, layout: VerifierLayout) -> tuple[int, ...]:
    """The aux ids vLLM will collect: the draft's own, else the verifier's default."""
    return info.aux_layer_ids or tuple(layout.default_aux_layer_ids)


def draft_problems(info: DraftInfo, layout: VerifierLayout, verifier_sha: str | None = None) -> list[str]:
    """Every reason `info` cannot draft for `layout`, most fundamental first ([] = it fits)."""
    if info.format == "mtp":
        return _mtp_problems(info, layout, verifier_sha)
    out = _recorded_verifier_problems(info, layout, verifier_sha)
    out += _width_problems(info, layout)
    out += _vocab_problems(info, layout)
    out += _aux_problems(info, layout)
    if info.format == "mla-eagle3" and info.model_type in MTP_REWRITTEN_TYPES:
        out.append(MLA_AS_MTP.format(path=info.path, model_type=info.model_type))
    return out


# Seen on vLLM 0.32 (CPU): SpeculativeConfig.hf_config_override turns every deepseek_v3 config,
# the draft's too, into its MTP model, so an MLA EAGLE-3 draft becomes "Eagle3DeepSeekMTPModel".
MTP_REWRITTEN_TYPES = ("deepseek_v3", "deepseek_v32", "glm_moe_dsa")
MLA_AS_MTP = (
    "{path}: vLLM 0.32 rewrites a model_type {model_type} draft config into its MTP model and then "
    "refuses it ('Eagle3DeepSeekMTPModel are not supported'); set model_type to deepseek_v2 in its config.json"
)


def _recorded_verifier_problems(info: DraftInfo, layout: VerifierLayout, verifier_sha: str | None) -> list[str]:
    rec = info.verifier
    recorded = (rec.get("content_hash") or {}).get("sha256") if isinstance(rec.get("content_hash"), dict) else None
    if recorded:
        if verifier_sha is not None and recorded != verifier_sha:
            return [
                f"{info.path} was trained for verifier {rec.get('name_or_path')} (content {recorded}) but the "
                f"served verifier {layout.path} has content {verifier_sha}; bench it against the verifier it "
                "was trained for, or retrain"
            ]
        return []
    archs = list(rec.get("architectures") or [])
    if archs and layout.architectures and archs != list(layout.architectures):
        return [
            f"{info.path}: draft records verifier architectures {archs}, served verifier is "
            f"{list(layout.architectures)}; {ANOTHER}"
        ]
    return []


def _width_problems(info: DraftInfo, layout: VerifierLayout) -> list[str]:
    out = []
    h = layout.hidden_size
    if info.target_hidden_size != h:
        out.append(
            f"{info.path}: draft hidden size {info.target_hidden_size} does not match the verifier's {h}; {ANOTHER}"
        )
    n_aux = len(aux_ids_in_use(info, layout))
    if info.fc_shape is not None:
        if len(info.fc_shape) != 2 or info.fc_shape[1] != h * n_aux:
            out.append(
                f"{info.path}: fc weight {list(info.fc_shape)} reads {info.fc_shape[-1]} features but the "
                f"verifier gives hidden {h} x {n_aux} aux states = {h * n_aux}; {ANOTHER}"
            )
        elif info.fc_shape[0] != info.hidden_size:
            out.append(
                f"{info.path}: fc weight {list(info.fc_shape)} outputs {info.fc_shape[0]} features, the draft "
                f"layer is {info.hidden_size} wide; the checkpoint is inconsistent, re-export it"
            )
    elif info.weights:
        out.append(
            f"{info.path}: no fc.weight in the draft's weights; an EAGLE-3 draft needs the fc layer "
            "that reads the verifier's aux states"
        )
    return out


def _vocab_problems(info: DraftInfo, layout: VerifierLayout) -> list[str]:
    out = []
    v = layout.vocab_size
    if info.target_vocab_size is not None and info.target_vocab_size != v:
        out.append(
            f"{info.path}: draft is built for a {info.target_vocab_size}-token vocabulary, the verifier has {v}; "
            f"{ANOTHER}"
        )
    if info.draft_vocab_size > v:
        out.append(f"{info.path}: draft vocab {info.draft_vocab_size} is larger than the verifier's {v}; {ANOTHER}")
    if info.draft_vocab_size < v and not info.has_d2t:
        out.append(
            f"{info.path}: draft vocab {info.draft_vocab_size} < verifier vocab {v} but there is no d2t "
            "tensor to map draft ids to verifier ids; add d2t (target = draft + d2t[draft])"
        )
    if info.d2t_target_range is not None:
        lo, hi = info.d2t_target_range
        if lo < 0 or hi >= v:
            out.append(
                f"{info.path}: d2t maps draft ids to verifier ids {lo}..{hi}, outside the verifier's "
                f"vocabulary 0..{v - 1}; rebuild d2t for this verifier's tokenizer"
            )
    if info.t2d_selected is not None and info.t2d_selected != info.draft_vocab_size:
        out.append(
            f"{info.path}: t2d marks {info.t2d_selected} verifier tokens but the draft vocab is "
            f"{info.draft_vocab_size}; d2t/t2d do not belong together, rebuild them"
        )
    return out


def _aux_problems(info: DraftInfo, layout: VerifierLayout) -> list[str]:
    ids, n = list(info.aux_layer_ids), layout.num_layers
    if not ids:
        return []
    out = []
    past = [i for i in ids if i >= n or i < 0]
    if past:
        out.append(
            f"{info.path}: aux layer ids {ids} do not exist in a {n}-layer verifier ({past} past its last "
            f"collected layer {n - 1}); use ids in 1..{n - 1}"
        )
    if 0 in ids and layout.deepseek_family:
        out.append(
            f"{info.path}: aux layer id 0 (the embeddings) crashes {layout.text_model_type} verifiers in vLLM; "
            f"use ids in 1..{n - 1}"
        )
    if len(set(ids)) != len(ids):
        out.append(f"{info.path}: aux layer ids {ids} repeat a layer; EAGLE-3 needs distinct layers")
    return out


def _mtp_problems(info: DraftInfo, layout: VerifierLayout, verifier_sha: str | None) -> list[str]:
    own = info.content_hash.get("sha256")
    if info.path != layout.path and (verifier_sha is None or own != verifier_sha):
        return [
            f"{info.path}: MTP layers draft only for the checkpoint that holds them, but the served verifier is "
            f"{layout.path}; serve {info.path} as the verifier (its own MTP layers are the draft)"
        ]
    out = []
    n, h = layout.num_layers, layout.hidden_size
    if info.weights and not any(k.endswith(f"layers.{n}.eh_proj.weight") for k in info.weights):
        out.append(
            f"{info.path}: config says num_nextn_predict_layers={info.num_layers} but there is no "
            f"layers.{n}.eh_proj.weight; the checkpoint was saved without its MTP layers"
        )
    elif info.fc_shape is not None and tuple(info.fc_shape) != (h, 2 * h):
        out.append(
            f"{info.path}: MTP eh_proj {list(info.fc_shape)} should be [{h}, {2 * h}] for hidden {h}; "
            "the checkpoint's MTP layers do not match its config"
        )
    return out
