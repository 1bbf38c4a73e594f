"""Reference drafts: the arithmetic test of the harness.

- oracle: a draft that copies its verifier exactly, so AL must read k+1, acceptance 1.0 and
  lossless 100 %. A one-layer draft cannot copy a real model, so the oracle comes with its own
  verifier, derived from the one under test (docs/facts.md §3): every token embeds to the same
  vector v and every residual-branch output projection (attention o_proj, MLP/expert
  down_proj) is zeroed, so each position's hidden state is v and the verifier always emits
  T = argmax(lm_head · norm(v)); v is chosen along lm_head[T] and the final norm's gain scaled
  so T wins by ~60 logits (p(T) ~ 1 also when sampling at T > 0). The
  draft gets the same embeddings, lm_head and norm (through the patched loader), an fc that
  passes the first aux state through, and zeroed output projections: it proposes T, always.
- random: an untrained draft of the trained one's shape (AL ~ 1.0).
- ngram: vLLM's prompt-lookup method (no draft model).
- draft_model: the verifier's own first N decoder layers, its embeddings, final norm and head: a
  smaller model with the verifier's tokenizer, served by vLLM's `draft_model` method (an early-exit
  self-draft: what a team without a trained draft can run today; a smaller sibling model from
  the same family is the other common choice, and is served the same way).
Built once per verifier into the cache.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from harness.provenance import atomic_dir
from harness.verifier.layout import VerifierLayout, resolve_layout

_ZEROED_SUFFIXES = ("self_attn.o_proj.weight", "mlp.down_proj.weight", "shared_experts.down_proj.weight")


def _zeroed(key: str) -> bool:
    return key.endswith(_ZEROED_SUFFIXES) or (".experts." in key and key.endswith("down_proj.weight"))


def constant_verifier(layout: VerifierLayout, out: Path, token_id: int) -> VerifierLayout:
    """A copy of the verifier that emits `token_id` at every position (see module doc)."""
    src = Path(layout.path)
    with atomic_dir(out) as tmp:
        _write_constant_verifier(layout, src, tmp, token_id)
    return resolve_layout(out)


def _write_constant_verifier(layout: VerifierLayout, src: Path, tmp: Path, token_id: int) -> None:
    from safetensors import safe_open
    from safetensors.torch import save_file

    shutil.copytree(src, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.safetensors", "standin.json"))
    with safe_open(str(src / layout.lm_head.shard), "pt") as f:
        head_row = f.get_tensor(layout.lm_head.key)[token_id].float()
    with safe_open(str(src / layout.final_norm.shard), "pt") as f:
        gain = f.get_tensor(layout.final_norm.key).float()
    v = head_row / torch.where(gain.abs() < 1e-3, torch.full_like(gain, 1e-3), gain)
    v = v / v.pow(2).mean().sqrt()  # unit RMS, like a normal residual stream
    # Scale the final norm's gain so T wins by ~60 logits: p(T) ~ 1 even when sampling at T > 0
    # (vLLM accepts a greedy draft token with probability p_target(token)).
    with safe_open(str(src / layout.lm_head.shard), "pt") as f:
        logits = f.get_tensor(layout.lm_head.key).float() @ (gain * v)
    others = torch.cat([logits[:token_id], logits[token_id + 1 :]])
    margin = float(logits[token_id] - others.max())
    if margin <= 0:
        raise RuntimeError(f"constant verifier: token {token_id} is not the argmax (margin {margin:.3f})")
    gain_scale = 60.0 / margin
    for shard in sorted({p.name for p in src.glob("*.safetensors")}):
        tensors = {}
        with safe_open(str(src / shard), "pt") as f:
            for key in f.keys():
                t = f.get_tensor(key)
                if key == layout.embed_tokens.key:
                    t = v.to(t.dtype).expand_as(t).contiguous()
                elif key == layout.final_norm.key:
                    t = (t.float() * gain_scale).to(t.dtype)
                elif key.startswith(layout.text_prefix) and _zeroed(key):
                    t = torch.zeros_like(t)
                tensors[key] = t
        save_file(tensors, str(tmp / shard), metadata={"format": "pt"})
    (tmp / "oracle.json").write_text(
        json.dumps({"constant_token_id": token_id, "derived_from": layout.path, "logit_margin": 60.0})
    )


def _save_draft(model, out: Path) -> None:
    with atomic_dir(out) as tmp:
        model.save_pretrained(str(tmp))


def build_reference_draft(
    kind: str,
    layout: VerifierLayout,
    draft_layer_config: dict[str, Any],
    aux_layer_ids: list[int],
    out: Path,
    seed: int = 0,
) -> Path:
    """An untrained ('random') or copying ('oracle', for a constant verifier) EAGLE-3 draft,
    full verifier vocabulary, built through the patched loader."""
    from transformers import LlamaConfig

    from harness.verifier.loader import build_draft

    torch.manual_seed(seed)
    model = build_draft(
        layout,
        draft_layer_config=LlamaConfig(**draft_layer_config),
        aux_layer_ids=aux_layer_ids,
        draft_vocab_size=layout.vocab_size,
        t2d=None,
        d2t=None,
    )
    if kind == "oracle":
        h = layout.hidden_size
        with torch.no_grad():
            fc = torch.zeros_like(model.fc.weight)
            fc[:, :h] = torch.eye(h)  # pass the first aux state (= v) through
            model.fc.weight.copy_(fc)
            for layer in model.layers:
                layer.self_attn.o_proj.weight.zero_()
                layer.mlp.down_proj.weight.zero_()
            model.norm.weight.copy_(model.verifier_norm.weight)
    _save_draft(model, out)
    return out


def oracle_pair(
    layout: VerifierLayout,
    draft_layer_config: dict[str, Any],
    aux_layer_ids: list[int],
    cache: Path,
    token_id: int | None = None,
) -> tuple[VerifierLayout, Path]:
    """(constant verifier, oracle draft) derived from `layout`, cached under `cache`."""
    from harness.provenance import content_hash

    key = content_hash(layout.path)["sha256"]
    folder = cache / "oracle" / f"{key}-v2"  # bump when the construction changes
    vdir, ddir = folder / "verifier", folder / "draft"
    if token_id is None:
        token_id = min(100, layout.vocab_size - 1)  # an ordinary (non-special) token
    if not (vdir / "oracle.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        constant_verifier(layout, vdir, token_id)
    v = resolve_layout(vdir)
    if not (ddir / "config.json").is_file():
        build_reference_draft("oracle", v, draft_layer_config, aux_layer_ids, ddir)
    return v, ddir


def random_draft(
    layout: VerifierLayout, draft_layer_config: dict[str, Any], aux_layer_ids: list[int], cache: Path
) -> Path:
    from harness.provenance import content_hash

    key = content_hash(layout.path)["sha256"] + "-" + "-".join(map(str, aux_layer_ids))
    out = cache / "random-draft" / key
    if not (out / "config.json").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        build_reference_draft("random", layout, draft_layer_config, aux_layer_ids, out)
    return out


def truncated_verifier(layout: VerifierLayout, num_layers: int, cache: Path) -> Path:
    """The verifier cut to its first `num_layers` decoder layers (the `draft_model` reference arm,
    module doc): the same checkpoint layout (prefixes, shards, index, nested config), the later
    layers' tensors dropped, `num_hidden_layers` lowered. Cached per verifier content and N."""
    from harness.provenance import content_hash

    if not 1 <= num_layers < layout.num_layers:
        from harness.errors import BadInput

        raise BadInput(
            f"bench.draft_model_layers = {num_layers}, but the verifier has {layout.num_layers} decoder layers: "
            f"the draft_model arm needs fewer; set it between 1 and {layout.num_layers - 1}"
        )
    out = cache / "draft-model" / f"{content_hash(layout.path)['sha256']}-{num_layers}"
    if not (out / "truncated.json").is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_dir(out) as tmp:
            _write_truncated(layout, Path(layout.path), tmp, num_layers)
    return out


def _later_layer(key: str, decoder_prefix: str, num_layers: int) -> bool:
    if not key.startswith(decoder_prefix):
        return False
    index = key[len(decoder_prefix) :].split(".", 1)[0]
    return index.isdigit() and int(index) >= num_layers


def _write_truncated(layout: VerifierLayout, src: Path, tmp: Path, num_layers: int) -> None:
    from safetensors import safe_open
    from safetensors.torch import save_file

    # standin.json names a verifier's identity: the truncated copy is not that verifier
    shutil.copytree(src, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.safetensors", "standin.json"))
    weight_map: dict[str, str] = {}
    total = 0
    for shard in sorted(p.name for p in src.glob("*.safetensors")):
        with safe_open(str(src / shard), "pt") as f:
            kept = {k: f.get_tensor(k) for k in f.keys() if not _later_layer(k, layout.decoder_prefix, num_layers)}
        if kept:
            save_file(kept, str(tmp / shard), metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(kept, shard))
            total += sum(t.numel() * t.element_size() for t in kept.values())
    index = tmp / "model.safetensors.index.json"
    if index.is_file():
        data = json.loads(index.read_text())
        meta = {**data.get("metadata", {}), "total_size": total}
        index.write_text(json.dumps({**data, "metadata": meta, "weight_map": weight_map}, indent=2))
    cfg = json.loads((tmp / "config.json").read_text())
    text = cfg.get("text_config", cfg)  # a multimodal verifier's text model sits in text_config
    text["num_hidden_layers"] = num_layers
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2))
    (tmp / "truncated.json").write_text(
        json.dumps({"derived_from": layout.path, "num_layers": num_layers, "of": layout.num_layers})
    )
