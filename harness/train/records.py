"""Typed records that cross module lines in training: what the fit stage is told (`FitConfig`,
saved as fit_plan.json for torchrun ranks) and what a finished training reports (`TrainReport`,
saved as train_report.json). Dicts exist only at the JSON edge."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.analysis.training_health import TrainingHealth


@dataclass(frozen=True)
class OnlineSource:
    """Where online training gets its states: speculators' ArrowDataset over the sample tables in
    `data_dir` ("train", "val"), generating each sample's states through the vLLM server at
    `url` (serving `model`), whose connector writes them under `cache_dir`."""

    url: str
    model: str
    data_dir: str
    cache_dir: str
    states_dtype: str = "bfloat16"  # train.hidden_states_dtype: what the offline shards store

    @property
    def endpoint(self) -> str:
        """The OpenAI API root speculators' client asks."""
        return self.url + "/v1"


@dataclass(frozen=True)
class FitConfig:
    verifier: str
    vocab_path: str
    hidden_dir: str
    checkpoint_dir: str
    draft_layer_config: dict[str, Any]
    aux_layer_ids: list[int]
    draft_vocab_size: int
    ttt_steps: int
    ttt_step_loss_decay: float
    loss: str
    attn_impl: str
    hidden_states_dtype: str
    validation_fraction: float
    total_seq_len: int
    lr: float
    epochs: int
    max_steps: int | None
    scheduler: Literal["linear", "cosine", "none"]
    warmup_ratio: float
    seed: int
    fsdp: bool = False
    device: str = "cpu"
    init_from: str | None = None  # warm start from this draft (harness/draft/warm_start.py)
    weight_keys: dict[str, str] = field(default_factory=dict)
    trust_remote_code: bool = False
    # online mode: the extraction server training asks for each sample's states (training.stage_fit)
    online: OnlineSource | None = None
    loader_workers: int = 0  # DataLoader workers (online: requests ahead of the trainer)
    # draft.method: eagle3, peagle (ttt_steps is its num_depths) or dflash (block_size = ttt_steps + 1)
    method: str = "eagle3"
    mask_token_id: int | None = None  # P-EAGLE's and DFlash's resolved mask token
    max_anchors: int | None = None  # P-EAGLE, DFlash: anchors sampled per batch

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FitConfig:
        online = data.get("online")
        return cls(**{**data, "online": OnlineSource(**online) if online else None})


PREDICTED_AL_DEFINITION = (
    "1 + sum over TTT steps k of held-out full_acc_k (draft steps 0..k all equal the "
    "verifier's argmax); equals vLLM's AL at T=0 when train and serve agree. P-EAGLE and DFlash "
    "measure each position's accuracy alone (position_k_acc; DFlash's slot k+1 after its anchor): "
    "their full_acc_k is the product over 0..k (exact when the positions' misses are independent). "
    "DFlash's predicted AL is speculators' held-out eal instead: the mean per-block run of correct "
    "slots + 1, counted block by block (no independence assumed)"
)


def position_acc_key(method: str, k: int) -> str:
    """The Trainer's per-draft-position accuracy metric: EAGLE-3's full_acc_k, P-EAGLE's position_k_acc,
    DFlash's position_{k+1}_acc (its slot 0 is the anchor, the verifier's own token)."""
    if method == "dflash":
        return f"position_{k + 1}_acc"
    return f"position_{k}_acc" if method == "peagle" else f"full_acc_{k}"


def dflash_anchors(max_anchors: int | None, total_seq_len: int, steps: int) -> int:
    """DFlash's anchors per packed batch: the recipe's, else as many blocks (steps + 1) as fit. Every
    batch pays anchors x block positions, padded anchors included (speculators' 512 is sized for
    8k-token GPU batches)."""
    return max_anchors or max(1, total_seq_len // (steps + 1))


def predicted_al(metrics: dict[str, Any], method: str, steps: int) -> float | None:
    """PREDICTED_AL_DEFINITION from held-out metrics; None before any validation."""
    if method == "dflash" and metrics.get("eal_epoch") is not None:
        return float(metrics["eal_epoch"])
    accs = held_out_full_acc(metrics, method, steps)
    return 1 + sum(accs) if accs else None


def held_out_full_acc(metrics: dict[str, Any], method: str, steps: int) -> list[float]:
    """Per draft position k, the held-out share of positions whose draft tokens 0..k all equal the
    verifier's argmax (see PREDICTED_AL_DEFINITION for P-EAGLE's and DFlash's)."""
    accs = [a for a in (metrics.get(position_acc_key(method, k) + "_epoch") for k in range(steps)) if a is not None]
    if method == "eagle3":
        return accs
    out, run = [], 1.0
    for a in accs:
        run *= a
        out.append(run)
    return out


@dataclass(frozen=True)
class TrainReport:
    predicted_acceptance_length: float | None
    held_out_full_acc: list[float]
    held_out_cond_acc: list[float]  # EAGLE-3: step k given steps < k right; P-EAGLE: depth k alone
    held_out_loss: float | None
    train_loss_first: float | None
    train_loss_last: float | None
    train_wall_s: float | None
    train_tokens: int | None
    train_tok_per_s: float | None
    global_step: int | None
    num_train_samples: int | None
    num_val_samples: int | None
    hidden_states: dict[str, Any]
    agreement: float | None
    vocab: dict[str, Any]
    # The longest training sample (prompt + response tokens): the context the draft has seen.
    train_context_len: int | None = None
    # A warm start's held-out full accuracy per TTT step before training (train.init_from); None otherwise.
    init_held_out_full_acc: list[float] | None = None
    predicted_acceptance_length_definition: str = PREDICTED_AL_DEFINITION
    # Whether the draft is worth benching, judged before the bench (harness/train/health.py); None in
    # reports written before the verdict existed.
    health: TrainingHealth | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"health": self.health.to_dict() if self.health else None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainReport:
        known = {f.name for f in dataclasses.fields(cls)}
        health = TrainingHealth.from_dict(data["health"]) if data.get("health") else None
        return cls(**{k: v for k, v in data.items() if k in known} | {"health": health})
