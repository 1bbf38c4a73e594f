"""Typed records that cross module lines in training: what the fit stage is told (`FitConfig`,
saved as fit_plan.json for torchrun ranks) and what a finished training reports (`TrainReport`,
saved as train_report.json). Dicts exist only at the JSON edge."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal


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
    # online mode: the extraction server training asks for each sample's states (pipeline.stage_fit)
    online: OnlineSource | None = None
    loader_workers: int = 0  # DataLoader workers (online: requests ahead of the trainer)
    method: str = "eagle3"  # draft.method: eagle3 or peagle (P-EAGLE: ttt_steps is its num_depths)
    mask_token_id: int | None = None  # P-EAGLE's resolved mask token
    max_anchors: int | None = None  # P-EAGLE: anchors sampled per batch

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FitConfig:
        online = data.get("online")
        return cls(**{**data, "online": OnlineSource(**online) if online else None})


PREDICTED_AL_DEFINITION = (
    "1 + sum over TTT steps k of held-out full_acc_k (draft steps 0..k all equal the "
    "verifier's argmax); equals vLLM's AL at T=0 when train and serve agree. P-EAGLE measures each "
    "depth's accuracy alone (position_k_acc): its full_acc_k is their product over 0..k (exact when "
    "the depths' misses are independent)"
)


def position_acc_key(method: str, k: int) -> str:
    """The Trainer's per-draft-position accuracy metric: EAGLE-3's full_acc_k, P-EAGLE's position_k_acc."""
    return f"position_{k}_acc" if method == "peagle" else f"full_acc_{k}"


def held_out_full_acc(metrics: dict[str, Any], method: str, steps: int) -> list[float]:
    """Per draft position k, the held-out share of positions whose draft tokens 0..k all equal the
    verifier's argmax (see PREDICTED_AL_DEFINITION for P-EAGLE's)."""
    accs = [a for a in (metrics.get(position_acc_key(method, k) + "_epoch") for k in range(steps)) if a is not None]
    if method != "peagle":
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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainReport:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
