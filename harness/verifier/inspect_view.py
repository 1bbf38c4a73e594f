"""Human-readable rendering of a VerifierLayout (the `verifier inspect` table)."""

from __future__ import annotations

from harness.verifier.layout import TensorRef, VerifierLayout


def _tensor(ref: TensorRef) -> str:
    shape = list(ref.shape) if ref.shape is not None else f"{list(ref.expected_shape)} (expected; shard not on disk)"
    dtype = f" {ref.dtype}" if ref.dtype else ""
    return f"{ref.key}  [{ref.shard}]  {shape}{dtype}"


def render_layout(layout: VerifierLayout, console) -> None:
    from rich.table import Table

    t = Table(title=f"verifier {layout.path}", show_header=False, title_justify="left")
    t.add_column(style="bold")
    t.add_column()
    arch = ", ".join(layout.architectures) or "?"
    t.add_row("architecture", f"{arch} (model_type {layout.model_type})")
    t.add_row("text model", f"{layout.text_model_type}" + (" (nested text_config)" if layout.multimodal else ""))
    t.add_row("layers / hidden / vocab", f"{layout.num_layers} / {layout.hidden_size} / {layout.vocab_size}")
    t.add_row("attention", f"{layout.attention.upper()}, {layout.num_attention_heads} heads" + _kv_heads(layout))
    if layout.moe:
        t.add_row("MoE", ", ".join(f"{k}={v}" for k, v in layout.moe.items()))
    if layout.rope:
        t.add_row("rope", ", ".join(f"{k}={v}" for k, v in layout.rope.items()))
    t.add_row("text prefix", repr(layout.text_prefix) + f"  (decoder layers under {layout.decoder_prefix!r})")
    t.add_row("embed_tokens", _tensor(layout.embed_tokens))
    t.add_row("lm_head", "tied to embed_tokens" if layout.tie_word_embeddings else _tensor(layout.lm_head))
    t.add_row("final norm", _tensor(layout.final_norm))
    t.add_row("tied embeddings", str(layout.tie_word_embeddings))
    t.add_row("quantization", ", ".join(f"{k}={v}" for k, v in (layout.quantization or {}).items()) or "none")
    t.add_row("EAGLE-3 aux ids", f"{tuple(layout.default_aux_layer_ids)} (vLLM default: 2, L//2, L-3)")
    t.add_row(
        "weights",
        f"{layout.num_tensors:,} tensors in {layout.num_shards} file(s)"
        + ("  [structure only: no shards on disk]" if layout.structure_only else ""),
    )
    if layout.eos_token_ids:
        t.add_row("stop tokens", ", ".join(map(str, layout.eos_token_ids)))
    for role, others in layout.ignored_candidates.items():
        t.add_row(f"[yellow]passed over[/] ({role})", ", ".join(others) + "  (outside the text model)")
    console.print(t)


def _kv_heads(layout: VerifierLayout) -> str:
    """' / N key-value heads' where they differ from the query heads (GQA, MQA)."""
    kv = layout.text_config.get("num_key_value_heads")
    return f" / {kv} key-value heads" if layout.attention in ("gqa", "mqa") and kv else ""
