"""`harness bench`: the matrix suites x k x concurrency x temperature, every speculative cell
paired with a baseline cell on the same prompts, max tokens, sampling, concurrency and
parallelism, the pair run A/B interleaved (the order alternates between repeats so drift
cancels), warm-up excluded. Rows are written cell by cell (harness/results/table.py).

Engines: one baseline engine per verifier stays up for the whole run; one speculative engine
per (draft, k) — k is an engine setting in vLLM — runs all of its cells, then stops.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bench import measure
from harness.bench.suites import Suite, load_suite
from harness.engine.base import BatchResult, Engine, GenOutput, GenRequest, Sampling
from harness.engine.settings import EnginePlan, SpeculativeSpec, engine_plan
from harness.errors import BadInput
from harness.prompts import PromptRecord, render
from harness.provenance import atomic_write_json, content_hash, git_sha, hardware, package_versions
from harness.recipe import Recipe
from harness.results.table import cell_id, finished_cells, write_cell
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout

BENCH_SECTIONS = ("verifier", "engine", "bench")


@dataclass(frozen=True)
class DraftUnderTest:
    label: str
    method: str  # eagle3 | peagle | mtp | ngram (SpeculativeSpec)
    verifier: VerifierLayout
    path: str | None = None
    held_out_full_acc: tuple[float, ...] = ()
    content_hash: dict[str, str] | None = None
    # The oracle's verifier emits one token at any temperature, so outputs must match the
    # baseline's even when sampling: a lossless check that also works at T > 0.
    deterministic_verifier: bool = False

    def predicted_al(self, k: int) -> float | None:
        """1 + sum of held-out full accuracies of draft steps < k (known for k <= TTT steps)."""
        if self.method != "eagle3" or not self.held_out_full_acc or k > len(self.held_out_full_acc):
            return None
        return 1.0 + sum(self.held_out_full_acc[:k])


@dataclass(frozen=True)
class CellSpec:
    draft: str
    suite: str
    k: int
    concurrency: int
    temperature: float

    @property
    def id(self) -> str:
        return cell_id(self.draft, self.suite, self.k, self.concurrency, self.temperature)


@dataclass
class ArmResult:
    """One arm (baseline or speculative) of a cell, summed over repeats and turns."""

    outputs: dict[str, list[int]] = field(default_factory=dict)  # request/turn id -> tokens
    wall_s: float = 0.0
    num_output_tokens: int = 0
    counters: measure.SpecCounters = field(default_factory=measure.SpecCounters)
    tok_s_repeats: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    per_request: list[tuple[int, int]] = field(default_factory=list)  # (accepted, drafts)
    per_request_al: list[float] = field(default_factory=list)
    num_requests: int = 0
    errors: list[str] = field(default_factory=list)
    foreign_tokens: float = 0.0


def check_draft_for_verifier(draft_dir: Path, layout: VerifierLayout) -> dict[str, Any]:
    """Refuse a draft that cannot draft for this verifier (any format vLLM serves; the checks are
    harness/draft/fit_check.py); returns its harness metadata (may be empty)."""
    from harness.draft.guard import require_fit

    return require_fit(draft_dir, layout).harness_meta


def verifier_identity(path: str) -> str:
    """What makes two runs' verifiers the same: a stand-in is its spec fingerprint (rebuilt
    bit-for-bit from the same spec on the same kind of machine, and comparable across machines
    where float rounding differs); any other checkpoint is its content hash."""
    meta = Path(path) / "standin.json"
    if meta.is_file():
        return "standin:" + json.loads(meta.read_text())["fingerprint"]
    return content_hash(path)["sha256"]


def plan_cells(recipe: Recipe, drafts: list[DraftUnderTest], suites: list[Suite]) -> list[CellSpec]:
    """The product suites x k x concurrency x temperature per draft, plus bench.extra_cells."""
    b = recipe.bench
    cells = [CellSpec(d.label, s.name, k, c, t)
             for d in drafts for k in b.k for s in suites for c in b.concurrency for t in b.temperature]
    names = {s.name: s.name for s in suites} | {spec: s.name for spec, s in zip(b.suites, suites)}
    for d in drafts:
        for x in b.extra_cells:
            cell = CellSpec(d.label, names.get(x.suite, x.suite), x.k, x.concurrency, x.temperature)
            if cell not in cells:
                cells.append(cell)
    return cells


def _requests(tokenizer, suite: Suite, max_tokens: int, max_prompt: int) -> list[tuple[PromptRecord, list[int]]]:
    out = []
    for rec in suite.records:
        ids = render(tokenizer, rec)
        if len(ids) > max_prompt:
            raise BadInput(f"suite {suite.name}: prompt {rec.id} has {len(ids)} tokens, more than "
                           f"engine.max_model_len - bench.max_tokens = {max_prompt}; raise engine.max_model_len")
        out.append((rec, ids))
    return out


def run_arm(engine: Engine, tokenizer, prompts: list[tuple[PromptRecord, list[int]]], sampling: Sampling,
            max_tokens: int, concurrency: int, max_prompt: int, acc: ArmResult) -> None:
    """One repeat of one arm: all prompts, multi-turn records in rounds (answers fed back)."""
    histories: dict[str, list[dict[str, str]]] = {}
    rounds = max(r.num_turns for r, _ in prompts)
    wall = 0.0
    tokens = 0
    for turn in range(rounds):
        reqs, sent = [], []
        for rec, ids in prompts:
            if turn >= rec.num_turns:
                continue
            msgs = rec.first_messages()
            if turn > 0:
                if rec.id not in histories:
                    continue  # an earlier turn failed
                msgs = histories[rec.id] + [{"role": "user", "content": rec.turns[turn]}]
                ids = render(tokenizer, rec, msgs)
                if len(ids) > max_prompt:
                    continue  # the conversation outgrew the context: it ends here
            reqs.append(GenRequest(f"{rec.id}#{turn}", tuple(ids), max_tokens))
            sent.append((rec, msgs))
        if not reqs:
            break
        res: BatchResult = engine.generate(reqs, sampling, concurrency)
        wall += res.wall_s
        tokens += res.num_output_tokens
        acc.counters = acc.counters + res.counters
        if res.generation_tokens is not None:
            acc.foreign_tokens += res.generation_tokens - res.num_output_tokens
        for (rec, msgs), o in zip(sent, res.outputs, strict=True):
            _collect(acc, o)
            if rec.turns and o.ok:
                answer = tokenizer.decode(o.output_token_ids, skip_special_tokens=True)
                histories[rec.id] = msgs + [{"role": "assistant", "content": answer}]
    acc.wall_s += wall
    acc.num_output_tokens += tokens
    if wall > 0:
        acc.tok_s_repeats.append(tokens / wall)


def _collect(acc: ArmResult, o: GenOutput) -> None:
    acc.num_requests += 1
    if not o.ok:
        acc.errors.append(f"{o.request_id}: {o.error}")
        return
    acc.outputs.setdefault(o.request_id, o.output_token_ids)
    if o.ttft_s is not None:
        acc.ttft.append(o.ttft_s * 1000)
    if o.itl_s:
        acc.itl += [x * 1000 for x in o.itl_s]
    if o.latency_s and o.ttft_s is not None and len(o.output_token_ids) > 1:
        acc.tpot.append((o.latency_s - o.ttft_s) * 1000 / (len(o.output_token_ids) - 1))
    if o.spec:
        drafts = int(o.spec.get("num_spec_steps") or 0)
        accepted = int(o.spec.get("num_accepted_draft_tokens") or 0)
        acc.per_request.append((accepted, drafts))
        if drafts:
            acc.per_request_al.append(1 + accepted / drafts)


def _row(common: dict[str, Any], mode: str, arm: ArmResult) -> dict[str, Any]:
    c = arm.counters
    ci = measure.bootstrap_ci([a for a, _ in arm.per_request], [d for _, d in arm.per_request]) if mode == "speculative" else None
    tok_s = measure.output_tok_per_s(arm.num_output_tokens, arm.wall_s)
    return {
        **common, "mode": mode,
        "num_requests": arm.num_requests, "num_failed": len(arm.errors),
        "num_output_tokens": arm.num_output_tokens, "wall_s": arm.wall_s,
        "num_drafts": c.num_drafts, "num_draft_tokens": c.num_draft_tokens,
        "num_accepted_tokens": c.num_accepted_tokens, "accepted_per_pos": list(c.accepted_per_pos),
        "acceptance_length": measure.acceptance_length(c) if mode == "speculative" else None,
        "draft_acceptance_rate": measure.draft_acceptance_rate(c) if mode == "speculative" else None,
        "per_position_rates": list(measure.per_position_rates(c)) if mode == "speculative" else [],
        "al_ci_low": ci[0] if ci else None, "al_ci_high": ci[1] if ci else None,
        "per_request_al_mean": (sum(arm.per_request_al) / len(arm.per_request_al)) if arm.per_request_al else None,
        "output_tok_per_s": tok_s, "output_tok_per_s_repeats": arm.tok_s_repeats,
        "ttft_ms_median": measure.median(arm.ttft), "ttft_ms_p99": measure.percentile(arm.ttft, 99),
        "tpot_ms_median": measure.median(arm.tpot), "tpot_ms_p99": measure.percentile(arm.tpot, 99),
        "itl_ms_median": measure.median(arm.itl), "itl_ms_p99": measure.percentile(arm.itl, 99),
        "status": "failed" if arm.errors else "ok",
        "error": "; ".join(arm.errors[:3]) + (f" (+{len(arm.errors) - 3} more)" if len(arm.errors) > 3 else "") if arm.errors else None,
    }


def cell_rows(run_id: str, cell: CellSpec, draft: DraftUnderTest, suite: Suite, recipe: Recipe,
              base: ArmResult, spec: ArmResult, engine_kind: str, verifier_hash: str) -> list[dict[str, Any]]:
    b = recipe.bench
    common = {
        "run_id": run_id, "cell_id": cell.id, "draft": draft.label, "method": draft.method,
        "suite": suite.name, "suite_version": suite.version, "suite_sha": suite.sha,
        "k": cell.k, "concurrency": cell.concurrency, "temperature": cell.temperature, "top_p": b.top_p,
        "max_tokens": b.max_tokens, "repeats": b.repeats, "engine": engine_kind,
        "rejection_sample_method": b.rejection_sample_method if cell.temperature > 0 else "greedy",
        "verifier_hash": verifier_hash,
        "draft_hash": (draft.content_hash or {}).get("sha256"),
    }
    rb, rs = _row(common, "baseline", base), _row(common, "speculative", spec)
    flags: list[str] = []
    rs["speedup"] = measure.speedup(rs["output_tok_per_s"], rb["output_tok_per_s"])
    rb["speedup"] = None
    if cell.temperature == 0 or draft.deterministic_verifier:
        keys = sorted(set(base.outputs) & set(spec.outputs))
        m, n = measure.lossless_match([spec.outputs[k] for k in keys], [base.outputs[k] for k in keys])
        rs.update(lossless_matches=m, lossless_compared=n, lossless_match_rate=m / n if n else None)
        if cell.temperature > 0 and n and m < n:
            flags.append("NOT LOSSLESS AT T>0: speculative outputs differ from a verifier that emits one token "
                         "(vLLM-CPU rejection sampling, repro/vllm_cpu_spec_sampling_t_gt_0)")
    else:
        rs.update(lossless_matches=None, lossless_compared=None, lossless_match_rate=None)
    rb.update(lossless_matches=None, lossless_compared=None, lossless_match_rate=None)
    if spec.counters.num_drafts == 0 and spec.num_output_tokens > 0:
        flags.append("ZERO DRAFTS: speculation was silently off in this cell")
    predicted = draft.predicted_al(cell.k)
    rs["predicted_acceptance_length"] = predicted
    rs["al_gap"] = None
    if predicted and rs["acceptance_length"] and cell.temperature == 0:
        rs["al_gap"] = (rs["acceptance_length"] - predicted) / predicted
        if abs(rs["al_gap"]) > b.mismatch_tolerance:
            flags.append(f"TRAIN/SERVE MISMATCH: served AL {rs['acceptance_length']:.2f} vs predicted {predicted:.2f}")
    if spec.foreign_tokens > 0 or base.foreign_tokens > 0:
        flags.append("FOREIGN TRAFFIC: the server generated tokens for other clients during the cell")
    rb.update(predicted_acceptance_length=None, al_gap=None, flags=[])
    rs["flags"] = flags
    return [rb, rs]


def _warm(engine: Engine, prompts: list[tuple[PromptRecord, list[int]]], n: int, recipe: Recipe) -> None:
    if n <= 0:
        return
    reqs = [GenRequest(f"warmup-{i}", tuple(prompts[i % len(prompts)][1]), min(16, recipe.bench.max_tokens))
            for i in range(n)]
    engine.generate(reqs, Sampling(), max(recipe.bench.concurrency))


def _sampling(recipe: Recipe, temperature: float, layout: VerifierLayout) -> Sampling:
    return Sampling(temperature=temperature, top_p=recipe.bench.top_p if temperature > 0 else 1.0,
                    seed=recipe.engine.seed, ignore_eos=recipe.bench.ignore_eos,
                    stop_token_ids=tuple(layout.eos_token_ids))


EngineFactory = Callable[[EnginePlan, str], Engine]


def default_engine_factory(recipe: Recipe, run_dir: Path) -> EngineFactory:
    def make(plan: EnginePlan, name: str) -> Engine:
        kind = recipe.bench.engine
        if kind == "offline":
            from harness.engine.offline import OfflineEngine

            return OfflineEngine(plan, recipe.engine.startup_timeout_s, recipe.engine.request_timeout_s,
                                 log_path=run_dir / "logs" / f"{name}.log")
        if kind == "server":
            from harness.engine.server import ServerEngine

            return ServerEngine(plan, run_dir / "logs" / f"{name}.log", recipe.engine.startup_timeout_s,
                                recipe.engine.request_timeout_s)
        from harness.engine.server import AttachedEngine

        url = recipe.bench.baseline_url if plan.speculative is None else recipe.bench.url
        return AttachedEngine(url, request_timeout_s=recipe.engine.request_timeout_s)

    return make


def write_manifest(run_dir: Path, **fields: Any) -> dict[str, Any]:
    path = run_dir / "manifest.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(fields)
    atomic_write_json(path, data)
    return data


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def run_bench(recipe: Recipe, drafts: list[DraftUnderTest], run_dir: Path, reporter: Reporter,
              engine_factory: EngineFactory | None = None, base: Path | None = None,
              resume: bool = False) -> Path:
    """Run (or resume) the matrix; returns the run folder."""
    from harness.train.pipeline import load_tokenizer

    b = recipe.bench
    if b.rejection_sample_method == "synthetic":
        raise BadInput("rejection_sample_method 'synthetic' fakes acceptance; it is never reported as a result")
    suites = [load_suite(s, b.num_prompts, b.hf_field_map, base) for s in b.suites]
    cells = plan_cells(recipe, drafts, suites)
    manifest_path = run_dir / "manifest.json"
    if manifest_path.is_file() and not resume:
        raise BadInput(f"{run_dir} already holds a run; pass --resume to complete it, or choose another run id")
    if resume and manifest_path.is_file():
        old = json.loads(manifest_path.read_text())
        if old.get("recipe_fingerprint") != recipe.fingerprint(*BENCH_SECTIONS):
            raise BadInput(f"{run_dir} was made by a different bench recipe; resume it with the same recipe")
    run_dir.mkdir(parents=True, exist_ok=True)
    done = finished_cells(run_dir)
    verifiers = {d.verifier.path: d.verifier for d in drafts}
    vhash = {p: verifier_identity(p) for p in verifiers}
    previous = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    write_manifest(
        run_dir, run_id=run_dir.name, status="running", started_at=previous.get("started_at") or _now(),
        resumed_at=_now() if previous else None, ended_at=None,
        recipe=recipe.model_dump(mode="json"), recipe_fingerprint=recipe.fingerprint(*BENCH_SECTIONS),
        planned_cells=[c.id for c in cells],
        provenance={"git_sha": git_sha(), "packages": package_versions(), "hardware": hardware(),
                    "seeds": {"engine": recipe.engine.seed, "train": recipe.train.seed}},
        verifier={p: {"path": p, "content_hash": vhash[p]} for p in verifiers},
        drafts={d.label: {"path": d.path, "method": d.method, "verifier": d.verifier.path,
                          "content_hash": d.content_hash, "held_out_full_acc": list(d.held_out_full_acc)}
                for d in drafts},
        suites={s.name: {"version": s.version, "sha": s.sha, "source": s.source, "num_prompts": len(s.records)}
                for s in suites},
    )
    make = engine_factory or default_engine_factory(recipe, run_dir)
    todo = [c for c in cells if c.id not in done]
    reporter.stage("bench cells", total=len(cells))
    reporter.advance(len(cells) - len(todo))
    status = "complete"
    try:
        for vpath, layout in verifiers.items():
            vdrafts = [d for d in drafts if d.verifier.path == vpath]
            vcells = [c for c in todo if any(c.draft == d.label for d in vdrafts)]
            if not vcells:
                continue
            tok = load_tokenizer(layout, recipe.engine.trust_remote_code)
            max_prompt = recipe.engine.max_model_len - b.max_tokens
            prompts = {s.name: _requests(tok, s, b.max_tokens, max_prompt) for s in suites}
            first_prompts = next(iter(prompts.values()))
            base_plan = engine_plan(recipe.engine, layout)
            with make(base_plan, f"baseline-{Path(vpath).name}") as base_engine:
                _warm(base_engine, first_prompts, b.warmup_requests, recipe)
                write_manifest(run_dir, engines={"baseline": base_engine.describe()})
                for d in vdrafts:
                    for k in b.k:
                        kcells = [c for c in vcells if c.draft == d.label and c.k == k]
                        if not kcells:
                            continue
                        spec = SpeculativeSpec(d.method, k, d.path, b.rejection_sample_method)
                        plan = engine_plan(recipe.engine, layout, spec)
                        with make(plan, f"{d.label}-k{k}") as spec_engine:
                            _warm(spec_engine, first_prompts, b.warmup_requests, recipe)
                            for cell in kcells:
                                suite = next(s for s in suites if s.name == cell.suite)
                                barm, sarm = ArmResult(), ArmResult()
                                sampling = _sampling(recipe, cell.temperature, layout)
                                for r in range(b.repeats):
                                    order = [(base_engine, barm), (spec_engine, sarm)]
                                    if r % 2:
                                        order.reverse()
                                    for eng, arm in order:
                                        run_arm(eng, tok, prompts[cell.suite], sampling, b.max_tokens,
                                                cell.concurrency, max_prompt, arm)
                                rows = cell_rows(run_dir.name, cell, d, suite, recipe, barm, sarm,
                                                 spec_engine.kind, vhash[vpath])
                                write_cell(run_dir, cell.id, rows)
                                rs = rows[1]
                                for f in rs["flags"]:
                                    reporter.log(f"[{cell.id}] {f}")
                                reporter.advance(1, AL=rs["acceptance_length"] or float("nan"),
                                                 tok_s=rs["output_tok_per_s"] or 0.0,
                                                 speedup=rs["speedup"] or 0.0)
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BaseException:
        status = "failed"
        raise
    finally:
        write_manifest(run_dir, status=status, ended_at=_now())
        reporter.done()
    return run_dir


def resolve_drafts(recipe: Recipe, layout: VerifierLayout, draft_dir: Path | None,
                   label: str = "draft") -> list[DraftUnderTest]:
    """The draft under test (a trained EAGLE-3 folder, or vLLM's ngram) plus the recipe's
    reference drafts."""
    from harness.bench import reference
    from harness.train.pipeline import aux_layer_ids, draft_layer_config
    from harness.verifier.standins.build import cache_root

    out: list[DraftUnderTest] = []
    if draft_dir is not None:
        from harness.draft.guard import require_fit

        info = require_fit(draft_dir, layout)  # any format vLLM serves, checked before any engine starts
        out.append(DraftUnderTest(label, info.method, layout, str(draft_dir),
                                  tuple(info.harness_meta.get("held_out_full_acc") or ()), info.content_hash))
    elif recipe.bench.method == "ngram":
        out.append(DraftUnderTest("ngram", "ngram", layout))
    refs = [r for r in recipe.bench.reference_drafts if not (r == "ngram" and recipe.bench.method == "ngram" and draft_dir is None)]
    if refs:
        ids = aux_layer_ids(recipe, layout)
        dcfg = draft_layer_config(recipe, layout, recipe.engine.max_model_len)
        cache = cache_root()
        for r in refs:
            if r == "random":
                p = reference.random_draft(layout, dcfg, ids, cache)
                out.append(DraftUnderTest("random", "eagle3", layout, str(p), (), content_hash(p)))
            elif r == "oracle":
                v, p = reference.oracle_pair(layout, dcfg, ids, cache)
                out.append(DraftUnderTest("oracle", "eagle3", v, str(p), (), content_hash(p), deterministic_verifier=True))
            elif r == "ngram":
                out.append(DraftUnderTest("ngram", "ngram", layout))
    if not out:
        raise BadInput("nothing to bench: pass --draft DIR, set bench.method = 'ngram', or list bench.reference_drafts")
    return out


def new_run_id(recipe: Recipe) -> str:
    return f"{recipe.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
