"""Recipes: one TOML file describes a verifier, how vLLM runs it, how its draft is trained, how
it is benched and how it is gated. Validated before anything runs, with every problem listed.

Precedence: `--set key=value` > the recipe file > the defaults here. The resolved recipe is
saved beside every result (`harness recipe show RECIPE` prints it).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.engine.settings import EngineSettings
from harness.errors import BadInput

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECIPE = REPO_ROOT / "train" / "tiny-kimi.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VerifierSection(_Strict):
    path: str | None = Field(None, description="Checkpoint folder of the verifier (config.json + safetensors).")
    standin: Literal["kimi-k2.5", "deepseek-v3", "llama"] | None = Field(
        None, description="Build (once, cached) and use a tiny local stand-in of this architecture instead of `path`.")
    standin_overrides: dict[str, Any] = Field(default_factory=dict, description="Stand-in spec overrides (e.g. pretrain_steps).")
    reference: Literal["kimi-k2.5"] | None = Field(
        None, description="For --dry-run without the weights: the bundled structure of this real model.")
    weight_keys: dict[Literal["embed_tokens", "lm_head", "final_norm"], str] = Field(
        default_factory=dict, description="Name the checkpoint key of a borrowed tensor when the loader cannot tell.")

    @model_validator(mode="after")
    def _one_source(self):
        if bool(self.path) == bool(self.standin):
            raise ValueError("set exactly one of verifier.path or verifier.standin")
        return self


class DraftSection(_Strict):
    num_layers: int = Field(1, ge=1, description="Draft decoder layers (EAGLE-3 uses 1).")
    num_attention_heads: int | None = Field(None, ge=1, description="Draft heads (default: the verifier's).")
    num_key_value_heads: int | None = Field(None, ge=1, description="Draft KV heads (default: = heads).")
    head_dim: int | None = Field(None, ge=8, description="Draft head size (default: hidden / heads).")
    intermediate_size: int | None = Field(None, ge=8, description="Draft MLP width (default: 4 x hidden for small, the verifier's dense width otherwise).")
    draft_vocab_size: int = Field(32000, ge=2, description="Draft vocabulary (most frequent response tokens); <= verifier vocab.")
    aux_layer_ids: list[int] | None = Field(None, description="Verifier layers the draft reads (vLLM's aux ids); default vLLM's (2, L//2, L-3).")


class TrainSection(_Strict):
    prompts: str = Field("builtin", description="'builtin', a JSONL path, or 'hf:<dataset>[:split]' (online only).")
    prompt_field_map: dict[str, str] = Field(default_factory=dict, description="Rename fields of a HF dataset/JSONL to prompt/messages/turns.")
    num_prompts: int | None = Field(None, ge=1, description="Use the first N prompts (all when unset).")
    max_new_tokens: int = Field(256, ge=1, description="Longest regenerated response.")
    response_temperature: float = Field(0.0, ge=0, description="Sampling temperature of the verifier's responses.")
    response_concurrency: int = Field(64, ge=1, description="Requests in flight while regenerating responses.")
    hidden_states_source: Literal["transformers", "vllm"] = Field(
        "transformers", description="Where training hidden states come from: a transformers forward (CPU), or vLLM's extract_hidden_states (CUDA).")
    hidden_states_dtype: Literal["bfloat16", "float32"] = Field("bfloat16", description="On-disk dtype of hidden states.")
    hidden_states_shard_size: int = Field(64, ge=1, description="Samples per hidden-state shard (bounds memory).")
    forward_batch_tokens: int = Field(8192, ge=64, description="Tokens per transformers forward batch when extracting.")
    validation_fraction: float = Field(0.05, gt=0, lt=0.5, description="Held-out share of samples for per-TTT-step accuracy.")
    epochs: int = Field(3, ge=1, description="Training epochs over the hidden states.")
    max_steps: int | None = Field(None, ge=1, description="Stop after this many optimizer steps.")
    init_from: str | None = Field(None, description="Warm start: an existing draft folder (speculators or SpecForge EAGLE-3) to start training from.")
    lr: float = Field(1e-3, gt=0, description="Peak learning rate (AdamW).")
    scheduler: Literal["linear", "cosine", "none"] = Field("cosine", description="LR schedule (speculators').")
    warmup_ratio: float = Field(0.02, ge=0, le=1, description="Warm-up share of the steps.")
    total_seq_len: int = Field(4096, ge=128, description="Tokens packed per training batch.")
    ttt_steps: int = Field(3, ge=1, description="Test-time-training steps (draft positions trained).")
    ttt_step_loss_decay: float = Field(1.0, gt=0, description="Loss weight decay across TTT steps.")
    loss: str = Field("kl_div", description="speculators loss name or JSON mix.")
    attn_impl: Literal["sdpa", "eager", "simple_flex_attention"] = Field("sdpa", description="Draft attention; flex needs CUDA.")
    seed: int = Field(0, description="Training seed.")
    launcher: Literal["local", "torchrun"] = Field("local", description="'torchrun' for GPUs (DDP/FSDP through speculators' Trainer).")
    nproc_per_node: int = Field(1, ge=1, description="torchrun processes per node.")
    nnodes: int = Field(1, ge=1, description="torchrun nodes.")
    fsdp: bool = Field(False, description="Shard the draft with FSDP (speculators' --fsdp-shard).")
    agreement_threshold: float = Field(0.97, ge=0, le=1, description="Refuse to train below this greedy-token agreement between vLLM and the hidden-state source.")
    agreement_samples: int = Field(32, ge=1, description="Responses checked by the agreement gate.")
    bench_overlap: Literal["refuse", "allow"] = Field("refuse", description="Refuse training prompts that appear in a bench suite.")


class ExtraCell(_Strict):
    suite: str = Field(description="Suite of the extra cell (one of bench.suites).")
    k: int = Field(ge=1, description="num_speculative_tokens (one of bench.k: no extra engine).")
    concurrency: int = Field(ge=1, description="Requests in flight.")
    temperature: float = Field(ge=0, description="Sampling temperature.")


class BenchSection(_Strict):
    suites: list[str] = Field(default_factory=lambda: ["chat", "code", "math"], description="Built-in suite names, JSONL paths, 'humaneval', or 'hf:<dataset>'.")
    hf_field_map: dict[str, str] = Field(default_factory=dict, description="Field mapping for hf: suites.")
    num_prompts: int | None = Field(None, ge=1, description="First N prompts of each suite (all when unset).")
    max_tokens: int = Field(128, ge=1, description="Output tokens per request.")
    ignore_eos: bool = Field(False, description="Generate exactly max_tokens.")
    k: list[int] = Field(default_factory=lambda: [3], description="num_speculative_tokens values.")
    concurrency: list[int] = Field(default_factory=lambda: [1], description="Requests in flight.")
    temperature: list[float] = Field(default_factory=lambda: [0.0], description="Sampling temperatures.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling for T > 0.")
    extra_cells: list[ExtraCell] = Field(default_factory=list, description="Cells outside the product, e.g. one T>0 cell.")
    repeats: int = Field(1, ge=1, description="A/B repeats per cell (baseline and speculative interleaved).")
    warmup_requests: int = Field(2, ge=0, description="Unmeasured requests before each engine's first cell.")
    engine: Literal["offline", "server", "attach"] = Field("server", description="How vLLM is driven.")
    url: str | None = Field(None, description="attach: the speculative server's URL.")
    baseline_url: str | None = Field(None, description="attach: the no-speculation server's URL.")
    reference_drafts: list[Literal["oracle", "random", "ngram"]] = Field(
        default_factory=list, description="Also bench these reference drafts (arithmetic checks).")
    method: Literal["eagle3", "ngram"] = Field("eagle3", description="Speculation method of the draft under test.")
    rejection_sample_method: Literal["standard", "block", "synthetic"] = Field(
        "standard", description="vLLM rejection sampling at T>0; 'synthetic' fakes acceptance and is refused.")
    mismatch_tolerance: float = Field(0.10, ge=0, description="Flag a served AL this far (relative) from the training prediction.")

    @model_validator(mode="after")
    def _checks(self):
        if self.rejection_sample_method == "synthetic":
            raise ValueError("rejection_sample_method 'synthetic' fakes acceptance; it is never a result (use 'standard')")
        if any(k < 1 for k in self.k):
            raise ValueError(f"k values must be >= 1, got {self.k}")
        if any(c < 1 for c in self.concurrency):
            raise ValueError(f"concurrency values must be >= 1, got {self.concurrency}")
        if any(t < 0 for t in self.temperature):
            raise ValueError(f"temperature values must be >= 0, got {self.temperature}")
        if self.engine == "attach" and not (self.url and self.baseline_url):
            raise ValueError("engine 'attach' needs bench.url (speculative server) and bench.baseline_url")
        if self.engine == "attach" and (len(self.k) != 1 or self.reference_drafts):
            raise ValueError("engine 'attach' measures the servers as they run: give the one k they were started "
                             "with (bench.k = [K]) and no reference_drafts")
        if not self.suites:
            raise ValueError("bench.suites is empty; name at least one suite")
        for c in self.extra_cells:
            if c.k not in self.k or c.suite not in self.suites:
                raise ValueError(f"bench.extra_cells {c.model_dump()}: its k and suite must be in bench.k and bench.suites")
        return self


class GateSection(_Strict):
    baseline: str | None = Field(None, description="Baseline folder under results/baselines/ to gate against ('' for none).")
    tolerance: float = Field(0.05, ge=0, lt=1, description="Allowed relative drop of acceptance length.")
    min_speedup: float | None = Field(None, gt=0, description="Fail cells whose speedup is below this.")
    noise_aware: bool = Field(False, description="Fail only when the AL confidence interval lies below the bound.")


class Recipe(_Strict):
    name: str = Field(description="Recipe name (used in run ids).")
    description: str = Field("", description="What this recipe is for.")
    verifier: VerifierSection
    engine: EngineSettings = Field(default_factory=EngineSettings)
    draft: DraftSection = Field(default_factory=DraftSection)
    train: TrainSection = Field(default_factory=TrainSection)
    bench: BenchSection = Field(default_factory=BenchSection)
    gate: GateSection = Field(default_factory=GateSection)

    def fingerprint(self, *sections: str) -> str:
        data = self.model_dump(mode="json")
        if sections:
            data = {s: data[s] for s in sections}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]

    @model_validator(mode="after")
    def _cross(self):
        if self.train.hidden_states_source == "vllm" and self.engine.device == "cpu":
            raise ValueError("train.hidden_states_source 'vllm' needs CUDA (its extraction uses pinned memory "
                             "and CUDA streams); use 'transformers' on CPU")
        if self.train.launcher == "torchrun" and self.engine.device == "cpu":
            raise ValueError("train.launcher 'torchrun' is the GPU path; use 'local' with engine.device 'cpu'")
        if self.train.fsdp and self.train.launcher != "torchrun":
            raise ValueError("train.fsdp needs train.launcher 'torchrun'")
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


def format_validation_error(source: str, err: ValidationError) -> str:
    lines = [f"{source}: {err.error_count()} problem(s):"]
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(recipe)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (typo?)"
        lines.append(f"  - {loc}: {msg}" + (f" (got {e['input']!r})" if e["type"] not in ("extra_forbidden", "missing") and not isinstance(e.get("input"), dict) else ""))
    return "\n".join(lines)


def load_recipe(path: str | Path | None = None, overrides: list[str] | None = None) -> Recipe:
    """Load, override and validate a recipe; every problem is reported at once."""
    p = Path(path) if path else DEFAULT_RECIPE
    if not p.is_file():
        raise BadInput(f"{p}: recipe not found")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"{p}: not valid TOML ({e})") from e
    data = apply_overrides(data, overrides or [])
    # Relative paths in a recipe are relative to the recipe's folder.
    ver = data.get("verifier") or {}
    if isinstance(ver.get("path"), str) and not Path(ver["path"]).is_absolute() and (p.parent / ver["path"]).exists():
        ver["path"] = str((p.parent / ver["path"]).resolve())
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as e:
        raise BadInput(format_validation_error(str(p), e)) from e
    problems = check_files(recipe, p.parent)
    if problems:
        raise BadInput(f"{p}: {len(problems)} problem(s):\n" + "\n".join(f"  - {x}" for x in problems))
    return recipe


def check_files(recipe: Recipe, base: Path) -> list[str]:
    """Problems that need the file system: missing files named by the recipe."""
    problems = []
    if recipe.verifier.path and not Path(recipe.verifier.path).exists() and not recipe.verifier.reference:
        problems.append(f"verifier.path: {recipe.verifier.path} does not exist")
    tp = recipe.train.prompts
    if tp not in ("builtin",) and not tp.startswith("hf:") and not (Path(tp).exists() or (base / tp).exists()):
        problems.append(f"train.prompts: {tp} does not exist (use 'builtin', a JSONL path or 'hf:<dataset>')")
    from harness.bench.suites import known_suites

    known = known_suites()
    for s in recipe.bench.suites:
        if s in known or s == "humaneval" or s.startswith("hf:"):
            continue
        if not (Path(s).exists() or (base / s).exists()):
            problems.append(f"bench.suites: unknown suite {s!r}; known: {', '.join(sorted(known))}, humaneval, hf:<dataset>, or a JSONL path")
    return problems
