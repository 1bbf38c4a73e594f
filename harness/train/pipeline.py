"""`harness train`: prompts -> responses -> agreement gate -> hidden states -> vocab -> draft.

Every stage writes its output into the run folder atomically; a rerun resumes at the first
missing output, and nothing complete is recomputed. A run folder remembers the recipe that
made it and refuses another (results of two recipes never mix).

  prompts.jsonl          the training prompts (checked against the bench suites)
  responses/part-*.jsonl the verifier's own answers, regenerated with vLLM (EAGLE-3 learns them)
  responses/timing.json  each engine session's start and generation time (the cost model's measurements)
  agreement.json         vLLM vs the hidden-state source, greedy-token agreement (gate)
  hidden/shard-*.pt      aux-layer states + pre-norm last state per sample (transformers)
  vocab.pt / vocab.json  draft vocabulary (d2t, t2d) and its coverage
  checkpoints/           speculators Trainer checkpoints (resumable, one per epoch)
  draft/                 the final draft, speculators format, loadable by vLLM, + harness.json
  train_report.json      loss curve, per-TTT-step held-out accuracy, predicted acceptance length
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from harness.draft.config import aux_layer_ids, check_draft_vocab, draft_layer_config, mask_token_id
from harness.draft.formats import inspect_draft
from harness.draft.verifier import load_tokenizer, resolve_verifier
from harness.errors import BadInput, DiskFull, disk_full_as_infra
from harness.provenance import (
    atomic_dir,
    atomic_path,
    atomic_write_json,
    atomic_write_text,
    content_hash,
)
from harness.recipe import MASKED_METHODS, Recipe
from harness.train.hidden_states import Sample, StatesFn
from harness.train.records import FitConfig, TrainReport, held_out_full_acc, position_acc_key, predicted_al
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout

TRAIN_SECTIONS = ("verifier", "engine", "draft", "train")
RESPONSE_CHUNK = 256


@dataclass
class TrainResult:
    run_dir: Path
    draft_dir: Path
    report: TrainReport
    layout: VerifierLayout


def prepare_run_dir(run_dir: Path, recipe: Recipe, sections: tuple[str, ...]) -> None:
    """Create the folder or check it was made by the same recipe (refuse to mix)."""
    marker = run_dir / "recipe.json"
    fp = recipe.fingerprint(*sections)
    if marker.is_file():
        old = json.loads(marker.read_text())
        if old.get("fingerprint") != fp and _same_with_new_defaults(old.get("recipe", {}), fp, sections):
            # made before a setting was added: the same recipe once the new setting's default is filled in
            atomic_write_json(marker, {**old, "fingerprint": fp, "recipe": recipe.model_dump(mode="json")})
            return
        if old.get("fingerprint") != fp:
            theirs = old.get("recipe", {})
            mine = recipe.model_dump(mode="json")
            diff = sorted(
                f"{s}.{k}"
                for s in sections
                for k in set(theirs.get(s, {})) | set(mine.get(s, {}))
                if theirs.get(s, {}).get(k) != mine.get(s, {}).get(k)
            )
            raise BadInput(
                f"{run_dir} was made by a different recipe (differs in {', '.join(diff[:6]) or 'content'}); "
                "use another --out folder, or delete this one to start over"
            )
        return
    if run_dir.exists() and any(run_dir.iterdir()):
        raise BadInput(f"{run_dir} exists and was not made by harness train; use another --out folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(marker, {"fingerprint": fp, "sections": list(sections), "recipe": recipe.model_dump(mode="json")})


def _same_with_new_defaults(old_recipe: dict[str, Any], fp: str, sections: tuple[str, ...]) -> bool:
    """Whether a run folder's recorded recipe, read by this version (settings added since take
    their defaults), has fingerprint `fp`."""
    from pydantic import ValidationError

    try:
        return Recipe.model_validate(old_recipe).fingerprint(*sections) == fp
    except (ValidationError, TypeError, ValueError):
        return False


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ----------------------------------------------------------------------------- stages


def stage_prompts(recipe: Recipe, run_dir: Path, layout: VerifierLayout) -> list[dict[str, Any]]:
    out = run_dir / "prompts.jsonl"
    if out.is_file():
        return read_jsonl(out)
    from harness.suites import load_suite
    from harness.train.conversations import with_follow_ups
    from harness.train.prompts import check_bench_overlap, load_training_prompts

    records = with_follow_ups(load_training_prompts(recipe), recipe.train.conversations, recipe.train.seed)
    if recipe.train.long_documents:
        records += _long_documents(recipe, layout)
    if recipe.train.bench_overlap == "refuse":
        bench = {}
        for s in recipe.bench.suites:
            if s.startswith("hf:"):
                continue  # checked when online
            suite = load_suite(s)
            bench[suite.name] = list(suite.records)
        hits = check_bench_overlap(records, bench)
        if hits:
            raise BadInput(
                f"{len(hits)} training prompt(s) overlap bench prompts (first: {hits[0]}); remove them "
                "from the training set, or set train.bench_overlap = 'allow' if that is intended"
            )
    rows = [
        {"id": r.id, "messages": r.first_messages(), "prompt": r.prompt} | ({"turns": list(r.turns)} if r.turns else {})
        for r in records
    ]
    atomic_write_text(out, "".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _template_kwargs(thinking: bool | None) -> tuple[tuple[str, Any], ...]:
    return () if thinking is None else (("thinking", thinking),)


def _long_documents(recipe: Recipe, layout: VerifierLayout):
    """train.long_documents prompts from the offline corpus, up to the longest prompt the response
    stage serves (harness/train/long_documents.py)."""
    from harness.train.long_documents import long_document_prompts

    tok = load_tokenizer(layout, recipe.engine.trust_remote_code)
    limit = recipe.engine.max_model_len - recipe.train.max_new_tokens
    kwargs = _template_kwargs(recipe.train.thinking)
    return long_document_prompts(tok, recipe.train.long_documents, limit, recipe.train.seed, kwargs)


def _render_rows(
    tokenizer, rows: list[dict[str, Any]], limit: int, thinking: bool | None = None
) -> tuple[list[tuple[str, list[int]]], int]:
    from harness.prompts import PromptRecord, render

    out, skipped = [], 0
    kwargs = _template_kwargs(thinking)
    for r in rows:
        rec = PromptRecord(
            r["id"],
            prompt=r.get("prompt"),
            messages=tuple(r["messages"]) if r.get("messages") else None,
            template_kwargs=kwargs,
        )
        ids = render(tokenizer, rec)
        if len(ids) > limit:
            skipped += 1
            continue
        out.append((r["id"], ids))
    return out, skipped


def stage_responses(
    recipe: Recipe,
    layout: VerifierLayout,
    run_dir: Path,
    rows: list[dict[str, Any]],
    reporter: Reporter,
    spare_hosts: int = 0,
) -> list[Sample]:
    """Regenerate responses with vLLM, in chunks written atomically (resumable). `spare_hosts`:
    engine hosts to start while this engine generates, for engines that follow in this process
    (the main job's bench); their vLLM import uses the core a CPU engine leaves idle."""
    from harness.engine.base import Sampling
    from harness.engine.offline import prespawn
    from harness.engine.settings import engine_plan

    folder = run_dir / "responses"
    folder.mkdir(exist_ok=True)
    plan = engine_plan(recipe.engine, layout)
    greedy_path = run_dir / "agreement_greedy.jsonl"
    need_greedy = recipe.train.response_temperature > 0 and not greedy_path.is_file()
    # before rendering, the parts left are estimated: fewer part files than the rows fill (an idle
    # host, if skipped prompts made the estimate wrong, costs nothing but its import)
    if need_greedy or len(list(folder.glob("part-*.jsonl"))) * RESPONSE_CHUNK < len(rows):
        prespawn(plan, 1)  # an engine will start: its host imports vLLM while the prompts are rendered
    tok = load_tokenizer(layout, recipe.engine.trust_remote_code)
    limit = recipe.engine.max_model_len - recipe.train.max_new_tokens
    prompts, skipped = _render_rows(tok, rows, limit, recipe.train.thinking)
    if skipped:
        reporter.log(
            f"{skipped} prompt(s) longer than {limit} tokens skipped (engine.max_model_len - train.max_new_tokens)"
        )
    chunks = [prompts[i : i + RESPONSE_CHUNK] for i in range(0, len(prompts), RESPONSE_CHUNK)]
    missing = [i for i in range(len(chunks)) if not (folder / f"part-{i:05d}.jsonl").is_file()]
    conversations = {r["id"]: r["turns"] for r in rows if len(r.get("turns") or ()) > 1}
    later_turns = [f for f in _turn_files(folder, conversations) if not f.is_file()]
    reporter.stage("responses (vLLM)", total=len(prompts))
    reporter.advance(sum(len(chunks[i]) for i in range(len(chunks)) if i not in missing))
    if missing or need_greedy or later_turns:
        from harness.engine.offline import OfflineEngine

        stop = tuple(layout.eos_token_ids)
        sampling = Sampling(temperature=recipe.train.response_temperature, seed=recipe.train.seed, stop_token_ids=stop)
        with OfflineEngine(
            plan,
            recipe.engine.startup_timeout_s,
            recipe.engine.request_timeout_s,
            log_path=run_dir / "logs" / "responses.log",
        ) as eng:
            if spare_hosts:
                prespawn(plan, spare_hosts)
            t0 = time.perf_counter()
            todo = [(i, chunks[i]) for i in missing]
            ntok = _generate_parts(eng, recipe, folder, todo, sampling, reporter)
            nreq = sum(len(c) for _, c in todo)
            if later_turns:
                ttok, treq = _generate_later_turns(eng, recipe, tok, folder, conversations, sampling, limit, reporter)
                ntok, nreq = ntok + ttok, nreq + treq
            if need_greedy:
                gtok, greq = _generate_greedy(eng, recipe, [p for c in chunks for p in c], greedy_path, stop)
                ntok, nreq = ntok + gtok, nreq + greq
            _record_session(folder, eng.info.get("startup_s"), time.perf_counter() - t0, ntok, nreq, recipe)
    reporter.done()
    return _read_samples(
        [folder / f"part-{i:05d}.jsonl" for i in range(len(chunks))] + _turn_files(folder, conversations)
    )


def _read_samples(files: list[Path]) -> list[Sample]:
    """The responses stage's answered requests, in file order."""
    samples = [
        Sample(r["id"], tuple(r["prompt_ids"]), tuple(r["output_ids"]))
        for path in files
        for r in read_jsonl(path)
        if r["output_ids"]
    ]
    if not samples:
        raise BadInput("the verifier produced no responses; check train.prompts and engine.max_model_len")
    return samples


def _turn_files(folder: Path, conversations: dict[str, list[str]]) -> list[Path]:
    """The responses of the conversations' later turns, one file per turn (turn 1 first)."""
    n = max((len(t) for t in conversations.values()), default=1)
    return [folder / f"turn-{t}.jsonl" for t in range(1, n)]


def _generate_later_turns(
    eng, recipe: Recipe, tokenizer, folder: Path, conversations: dict[str, list[str]], sampling, limit: int, reporter
) -> tuple[int, int]:
    """The conversations' later turns, one round per turn (each needs the answer before it), each
    round's file written atomically; a conversation that outgrows `limit` tokens, or whose earlier
    turn failed, ends there. Returns (output tokens, requests)."""
    from harness.engine.base import GenRequest
    from harness.prompts import PromptRecord, end_think_token, render
    from harness.train.conversations import conversation_so_far

    answers: dict[str, list[list[int]]] = {}
    for part in sorted(folder.glob("part-*.jsonl")):
        for r in read_jsonl(part):
            if r["id"] in conversations and r["output_ids"]:
                answers[r["id"]] = [r["output_ids"]]
    kwargs = _template_kwargs(recipe.train.thinking)
    end_think = end_think_token(tokenizer) if recipe.train.thinking is not False else None
    ntok = nreq = 0
    for t, path in enumerate(_turn_files(folder, conversations), start=1):
        if not path.is_file():
            reqs = []
            for rid, turns in conversations.items():
                if t < len(turns) and len(answers.get(rid, ())) == t:
                    msgs = conversation_so_far(tokenizer, turns, answers[rid], end_think)
                    ids = render(tokenizer, PromptRecord(rid, turns=tuple(turns), template_kwargs=kwargs), msgs)
                    if len(ids) <= limit:
                        reqs.append(GenRequest(f"{rid}#{t}", tuple(ids), recipe.train.max_new_tokens))
            reporter.stage(f"responses, turn {t + 1} (vLLM)", total=len(reqs))
            res = eng.generate(reqs, sampling, recipe.train.response_concurrency) if reqs else None
            outs = res.outputs if res else []
            lines = [
                _response_line(q.request_id, q.prompt_token_ids, o) for q, o in zip(reqs, outs, strict=True) if o.ok
            ]
            ntok, nreq = ntok + (res.num_output_tokens if res else 0), nreq + len(reqs)
            atomic_write_text(path, "".join(lines))
            reporter.advance(len(reqs))
        for r in read_jsonl(path):
            rid = r["id"].rsplit("#", 1)[0]
            if r["output_ids"] and len(answers.get(rid, ())) == t:
                answers[rid].append(r["output_ids"])
    return ntok, nreq


def _generate_greedy(eng, recipe: Recipe, prompts: list, path: Path, stop: tuple[int, ...]) -> tuple[int, int]:
    """The agreement gate's greedy twins of the first sampled responses (T > 0), written to `path`;
    returns (output tokens, requests)."""
    from harness.engine.base import GenRequest, Sampling

    first = prompts[: recipe.train.agreement_samples]
    reqs = [GenRequest(pid, tuple(ids), recipe.train.max_new_tokens) for pid, ids in first]
    res = eng.generate(reqs, Sampling(temperature=0.0, stop_token_ids=stop), recipe.train.response_concurrency)
    atomic_write_text(
        path,
        "".join(
            json.dumps({"id": pid, "prompt_ids": ids, "output_ids": o.output_token_ids}) + "\n"
            for (pid, ids), o in zip(first, res.outputs, strict=True)
            if o.ok
        ),
    )
    return res.num_output_tokens, len(reqs)


RESPONSES_TIMING = "timing.json"


def _record_session(
    folder: Path, startup_s: float | None, wall_s: float, tokens: int, requests: int, recipe: Recipe
) -> None:
    """What one engine session of the responses stage took (responses/timing.json, one entry per
    session, a resumed stage adds one): the cost model's measured engine start and generation rate
    (harness/plan/cost_measured.py)."""
    path = folder / RESPONSES_TIMING
    sessions = json.loads(path.read_text())["sessions"] if path.is_file() else []
    session = {
        "engine_start_s": startup_s,
        "wall_s": round(wall_s, 1),  # generation only, after the engine started
        "output_tokens": tokens,
        "requests": requests,
        "in_flight": recipe.train.response_concurrency,
    }
    atomic_write_json(path, {"sessions": [*sessions, session]})


def _response_line(request_id: str, prompt_ids, out) -> str:
    """One response as the responses stage's files hold it (a JSONL line)."""
    record = {"id": request_id, "prompt_ids": list(prompt_ids), "output_ids": out.output_token_ids}
    return json.dumps(record | {"finish_reason": out.finish_reason}) + "\n"


def _generate_parts(
    eng, recipe: Recipe, folder: Path, parts: list[tuple[int, list]], sampling, reporter: Reporter
) -> int:
    """Each missing part of the prompts through the engine, written atomically as it finishes;
    returns the output tokens generated."""
    from harness.engine.base import GenRequest

    t0, ntok = time.perf_counter(), 0
    for i, chunk in parts:
        reqs = [GenRequest(pid, tuple(ids), recipe.train.max_new_tokens) for pid, ids in chunk]
        res = eng.generate(reqs, sampling, recipe.train.response_concurrency)
        lines = [_response_line(pid, ids, o) for (pid, ids), o in zip(chunk, res.outputs, strict=True) if o.ok]
        ntok += res.num_output_tokens
        atomic_write_text(folder / f"part-{i:05d}.jsonl", "".join(lines))
        reporter.advance(len(chunk), tok_s=ntok / (time.perf_counter() - t0))
    return ntok


def stage_agreement(
    recipe: Recipe, layout: VerifierLayout, run_dir: Path, samples: list[Sample], model, reporter: Reporter
) -> dict[str, Any]:
    """The train/serve agreement gate: refuse to train on states of another model."""
    from harness.engine.settings import engine_plan
    from harness.train.agree import diagnose, teacher_forced_agreement

    out = run_dir / "agreement.json"
    if out.is_file():
        report = json.loads(out.read_text())
    elif recipe.train.hidden_states_source == "vllm":
        report = {
            "agreement": None,
            "source": "vllm",
            "note": "the training states come from vLLM's own forward, the one that serves: nothing to compare",
        }
        atomic_write_json(out, report)
    else:
        greedy_path = run_dir / "agreement_greedy.jsonl"
        if greedy_path.is_file():
            pool = [Sample(r["id"], tuple(r["prompt_ids"]), tuple(r["output_ids"])) for r in read_jsonl(greedy_path)]
        else:
            pool = samples
        chosen = pool[: recipe.train.agreement_samples]
        reporter.stage("agreement (vLLM vs transformers)", total=None)
        rep = teacher_forced_agreement(model, chosen)
        plan = engine_plan(recipe.engine, layout)
        hints = diagnose(rep, layout, recipe.engine.cpu_workarounds == "auto")
        layers: list[dict[str, Any]] = []
        if rep.agreement < recipe.train.agreement_threshold and chosen:
            from harness.train.agree import locate_disagreement

            reporter.log("agreement below threshold: probing vLLM's layers to say where the forwards part")
            layers = locate_disagreement(layout, recipe.engine, chosen[0].input_ids, hints, model=model)
        report = {
            **rep.to_dict(),
            "threshold": recipe.train.agreement_threshold,
            "workarounds": list(plan.workarounds),
            "hints": hints,
            "layer_differences": layers,
        }
        atomic_write_json(out, report)
        reporter.done(f"{report['agreement']:.3f}")
    if report["agreement"] is not None and report["agreement"] < recipe.train.agreement_threshold:
        raise BadInput(
            f"train/serve agreement {report['agreement']:.1%} is below train.agreement_threshold "
            f"{recipe.train.agreement_threshold:.0%} (vLLM and transformers disagree on the verifier's greedy tokens; "
            f"a draft trained on these states would draft for another model): {'; '.join(report['hints'])}. "
            f"Details: {out}"
        )
    return report


def stage_hidden(
    recipe: Recipe,
    layout: VerifierLayout,
    run_dir: Path,
    samples: list[Sample],
    model,
    aux_ids: list[int],
    reporter: Reporter,
) -> Path:
    import contextlib

    import torch

    from harness.train.hidden_states import extract_to_shards, transformers_states

    folder = run_dir / "hidden"
    done_marker = folder / "done.json"
    if done_marker.is_file():
        return folder
    source = recipe.train.hidden_states_source
    if recipe.train.hidden_states_mode == "online":
        return _stage_online_tables(recipe, layout, folder, run_dir, samples, aux_ids)
    reporter.stage(f"hidden states ({source})", total=len(samples))
    t0, started = time.perf_counter(), None
    with contextlib.ExitStack() as stack:
        states: StatesFn
        if source == "vllm":
            from harness.train.online import extraction_server
            from harness.train.vllm_states import VllmStateSource

            src = stack.enter_context(extraction_server(recipe, layout, run_dir, aux_ids, run_dir / "hidden_raw"))
            started = round(time.perf_counter() - t0, 1)  # the server's start, part of wall_s
            states = VllmStateSource(
                src.url,
                src.model,
                len(aux_ids),
                recipe.train.response_concurrency,
                recipe.engine.request_timeout_s,
            )
        else:
            states = transformers_states(model, aux_ids)
        # vLLM takes a whole shard at once (bounded by its own request concurrency); the
        # transformers forward takes padded batches of forward_batch_tokens.
        try:
            extract_to_shards(
                states,
                samples,
                folder,
                shard_size=recipe.train.hidden_states_shard_size,
                max_batch_tokens=None if source == "vllm" else recipe.train.forward_batch_tokens,
                dtype=getattr(torch, recipe.train.hidden_states_dtype),
                on_progress=reporter.advance,
            )
        except DiskFull as e:  # one shard did not fit: say what the rest of the stage needs
            raise DiskFull.from_exception(
                e, folder, *_hidden_states_need(recipe, layout, folder, samples, aux_ids)
            ) from e
    ntok = sum(len(s.input_ids) for s in samples)
    atomic_write_json(
        done_marker,
        {
            "mode": "offline",
            "num_samples": len(samples),
            "num_tokens": ntok,
            "aux_layer_ids": aux_ids,
            "source": source,
            "wall_s": round(time.perf_counter() - t0, 1),
            "engine_start_s": started,
        },
    )
    reporter.done()
    return folder


def _hidden_states_need(
    recipe: Recipe, layout: VerifierLayout, folder: Path, samples: list[Sample], aux_ids: list[int]
) -> tuple[int, str]:
    """(bytes, for what) the shards not on disk yet take: the dry run's offline formula on the real
    token count."""
    from harness.train.hidden_states import DTYPE_BYTES, pending_tokens

    tokens = pending_tokens(samples, folder, recipe.train.hidden_states_shard_size)
    per = DTYPE_BYTES[recipe.train.hidden_states_dtype]
    need = tokens * ((len(aux_ids) + 1) * layout.hidden_size * per + 9)  # + an int64 id and a bool mask
    return need, (
        f"the shards still to write: {tokens:,} tokens x ((aux {len(aux_ids)} + 1) "
        f"x hidden {layout.hidden_size} x {per} B + 9 B of ids and loss mask)"
    )


def stage_vocab(recipe: Recipe, layout: VerifierLayout, run_dir: Path, samples: list[Sample]) -> dict[str, Any]:
    import torch

    from harness.train.vocab import build_vocab, token_frequencies

    info_path = run_dir / "vocab.json"
    if info_path.is_file():
        return json.loads(info_path.read_text())
    freq = token_frequencies(s.output_ids for s in samples)
    d2t, t2d, coverage = build_vocab(freq, recipe.draft.draft_vocab_size, layout.vocab_size)
    with atomic_path(run_dir / "vocab.pt") as tmp:
        torch.save({"d2t": d2t, "t2d": t2d}, tmp)
    info = {
        "draft_vocab_size": recipe.draft.draft_vocab_size,
        "verifier_vocab_size": layout.vocab_size,
        "distinct_response_tokens": len(freq),
        "coverage": coverage,
    }
    atomic_write_json(info_path, info)
    return info


def _stage_online_tables(
    recipe: Recipe, layout: VerifierLayout, folder: Path, run_dir: Path, samples: list[Sample], aux_ids: list[int]
) -> Path:
    """Online mode: no states on disk, only the sample tables speculators' online dataset reads
    (harness/train/online.py), and done.json with the disk bound the fit stage checks."""
    from harness.train.online import disk_bound, write_sample_tables
    from harness.train.vllm_states import extraction_plan

    with atomic_dir(run_dir / "online") as tmp:
        rows = write_sample_tables(samples, tmp, recipe.train.validation_fraction)
    extraction = extraction_plan(recipe.engine, layout, aux_ids, run_dir / "hidden_raw")
    bound, formula = disk_bound(recipe, layout, aux_ids, extraction)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(
        folder / "done.json",
        {
            "mode": "online",
            "num_samples": len(samples),
            "num_tokens": sum(len(s.input_ids) for s in samples),
            "aux_layer_ids": aux_ids,
            "source": "vllm",
            "rows": rows,
            "disk_bound_bytes": bound,
            "disk_bound": formula,
            "engine_workarounds": list(extraction.workarounds),
        },
    )
    return folder


def fit_config(recipe: Recipe, layout: VerifierLayout, run_dir: Path, aux_ids: list[int]) -> FitConfig:
    t = recipe.train
    return FitConfig(
        verifier=layout.path,
        weight_keys=dict(cast("dict[str, str]", recipe.verifier.weight_keys)),
        trust_remote_code=recipe.engine.trust_remote_code,
        vocab_path=str(run_dir / "vocab.pt"),
        hidden_dir=str(run_dir / "hidden"),
        checkpoint_dir=str(run_dir / "checkpoints"),
        draft_layer_config=draft_layer_config(recipe, layout, recipe.engine.max_model_len),
        aux_layer_ids=aux_ids,
        draft_vocab_size=recipe.draft.draft_vocab_size,
        ttt_steps=t.ttt_steps,
        ttt_step_loss_decay=t.ttt_step_loss_decay,
        loss=recipe.train_loss,
        # the Trainer autocasts to this dtype: float32 on a CPU that would emulate bf16 (harness/hardware.py);
        # the shards on disk keep train.hidden_states_dtype
        attn_impl=t.attn_impl,
        hidden_states_dtype=_train_compute_dtype(recipe),
        validation_fraction=t.validation_fraction,
        total_seq_len=t.total_seq_len,
        lr=t.lr,
        epochs=t.epochs,
        max_steps=t.max_steps,
        scheduler=t.scheduler,
        warmup_ratio=t.warmup_ratio,
        seed=t.seed,
        fsdp=t.fsdp,
        init_from=t.init_from,
        device=recipe.engine.device,  # "cpu" trains on the CPU even beside an accelerator
        loader_workers=t.online_loader_workers if t.hidden_states_mode == "online" else 0,
        method=recipe.draft.method,
        mask_token_id=mask_token_id(recipe, layout, load_tokenizer(layout, recipe.engine.trust_remote_code))
        if recipe.draft.method in MASKED_METHODS
        else None,
        max_anchors=t.max_anchors,
    )


def _fit_with_torchrun(recipe: Recipe, run_dir: Path, reporter: Reporter) -> tuple[dict[str, Any], list, list]:
    """Start the dry run's torchrun command (recorded in launch.json) and read rank 0's results."""
    import os

    from harness.train.fit import TORCHRUN_RESULT
    from harness.train.launch import launch_env, resolved_command, run_torchrun, torchrun_command

    printed = torchrun_command(recipe, run_dir)
    cmd = resolved_command(printed, dict(os.environ))
    env = launch_env(dict(os.environ), recipe)
    atomic_write_json(
        run_dir / "launch.json",
        {"dry_run_command": printed, "command": cmd, "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS")},
    )
    reporter.log("$ " + " ".join(cmd))
    run_torchrun(cmd, run_dir, env)
    rank0 = json.loads((run_dir / TORCHRUN_RESULT).read_text())
    return rank0["result"], rank0["train"], rank0["val"]


def stage_fit(
    recipe: Recipe, layout: VerifierLayout, run_dir: Path, aux_ids: list[int], reporter: Reporter
) -> dict[str, Any]:
    out = run_dir / "fit_result.json"
    if out.is_file():
        return json.loads(out.read_text())
    plan = fit_config(recipe, layout, run_dir, aux_ids)
    t0 = time.perf_counter()
    if recipe.train.hidden_states_mode == "online":
        from harness.train.online import DirPeak, extraction_server

        cache = run_dir / "hidden_raw"
        with extraction_server(recipe, layout, run_dir, aux_ids, cache) as src, DirPeak(cache) as peak:
            started = round(time.perf_counter() - t0, 1)  # the extraction server's start, part of wall_s
            result, curve, val = _run_fit(recipe, run_dir, dataclasses.replace(plan, online=src), reporter)
        bound = json.loads((run_dir / "hidden" / "done.json").read_text())["disk_bound_bytes"]
        result.update(
            online_cache_peak_bytes=peak.peak,
            online_cache_bound_bytes=bound,
            online_cache_polls=peak.samples,
            extraction_start_s=started,
        )
    else:
        result, curve, val = _run_fit(recipe, run_dir, plan, reporter)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    result["train_tokens"] = result.get("train_tokens_per_epoch", 0) * recipe.train.epochs
    result["train_tok_per_s"] = result["train_tokens"] / result["wall_s"] if result["wall_s"] else None
    atomic_write_json(run_dir / "train_curve.json", {"train": curve, "val": val})
    atomic_write_json(out, result)
    return result


def _run_fit(
    recipe: Recipe, run_dir: Path, plan: FitConfig, reporter: Reporter
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """speculators' Trainer on the plan (in this process, or under torchrun): (result, train
    metrics per step, validation metrics per epoch)."""
    atomic_write_json(run_dir / "fit_plan.json", plan.to_dict())
    for name in drop_incomplete_checkpoints(Path(plan.checkpoint_dir)):
        reporter.log(f"checkpoint {name} was left half-written by an interrupted run: removed, its epoch reruns")
    curve: list[dict[str, Any]] = []
    val: list[dict[str, Any]] = []
    init = _init_accuracy(plan, reporter) if plan.init_from else None
    ckpt = Path(plan.checkpoint_dir)
    # speculators writes the checkpoints (safetensors, torch.save): a full disk names their folder
    with disk_full_as_infra(ckpt, _last_checkpoint_bytes(ckpt), "another checkpoint as big as the last"):
        if recipe.train.launcher == "torchrun":
            result, curve, val = _fit_with_torchrun(recipe, run_dir, reporter)
        else:
            result = _fit_here(recipe, plan, reporter, curve, val)
    result["init_held_out_full_acc"] = init
    return result, curve, val


def _fit_here(
    recipe: Recipe, plan: FitConfig, reporter: Reporter, curve: list[dict[str, Any]], val: list[dict[str, Any]]
) -> dict[str, Any]:
    """speculators' Trainer in this process; its metrics are appended to `curve` and `val` as they come."""
    from harness.train.fit import run_fit

    reporter.stage("training (speculators Trainer)", total=None)

    def on_train(m: dict[str, Any]) -> None:
        curve.append(m)
        fields = {"loss": m.get("loss", float("nan"))}
        for k in range(recipe.train.ttt_steps):
            key = position_acc_key(recipe.draft.method, k)
            if key in m:
                fields[f"acc{k}"] = m[key]
        reporter.advance(1, **fields)

    result = run_fit(plan, on_train=on_train, on_val=val.append)
    reporter.done()
    return result


def _last_checkpoint_bytes(ckpt_dir: Path) -> int | None:
    """The size of the newest finished checkpoint: what the next one needs (None before the first)."""
    done = [p for p in ckpt_dir.glob(f"*/{CHECKPOINT_DONE}") if p.parent.name.isdigit()] if ckpt_dir.is_dir() else []
    if not done:
        return None
    last = max((p.parent for p in done), key=lambda p: int(p.name))
    return sum(f.stat().st_size for f in last.rglob("*") if f.is_file())


# speculators' Trainer writes training_state.json last, after the weights, optimizer and scheduler
CHECKPOINT_DONE = "training_state.json"


def drop_incomplete_checkpoints(ckpt_dir: Path) -> list[str]:
    """Remove the epoch folders a killed save left without CHECKPOINT_DONE: speculators resumes
    from the highest epoch folder it finds and would fail to load a half-written one. Returns
    the removed folders' names."""
    if not ckpt_dir.is_dir():
        return []
    dropped = []
    for p in sorted(ckpt_dir.iterdir()):
        if p.is_dir() and not p.is_symlink() and p.name.isdigit() and not (p / CHECKPOINT_DONE).is_file():
            shutil.rmtree(p)
            dropped.append(p.name)
    return dropped


def _init_accuracy(plan: FitConfig, reporter: Reporter) -> list[float]:
    """A warm start's held-out full accuracy per TTT step before any training step: what the
    init draft brings to this verifier and data."""
    from harness.train.fit import evaluate_draft

    reporter.stage("warm start: held-out accuracy at step 0", total=None)
    metrics = evaluate_draft(plan)
    accs = held_out_full_acc(metrics, plan.method, plan.ttt_steps)
    reporter.done(" ".join(f"{a:.2f}" for a in accs))
    return accs


def _last_checkpoint(ckpt_dir: Path) -> Path:
    epochs = sorted((p for p in ckpt_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    if not epochs:
        raise BadInput(f"{ckpt_dir}: training produced no checkpoint")
    return epochs[-1]


def stage_draft(recipe: Recipe, layout: VerifierLayout, run_dir: Path, aux_ids: list[int], report: TrainReport) -> Path:
    draft = run_dir / "draft"
    if (draft / "harness.json").is_file():
        return draft
    src = _last_checkpoint(run_dir / "checkpoints")
    with atomic_dir(draft) as tmp:
        shutil.copytree(
            src,
            tmp,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("*optimizer*", "*scheduler*", "training_state.json", "*.pt"),
        )
        saved = inspect_draft(tmp)  # reads each method's config (DFlash names its aux ids differently)
        if list(saved.aux_layer_ids) != aux_ids:
            raise BadInput(f"draft config has aux ids {list(saved.aux_layer_ids)} but extraction used {aux_ids}")
        meta = {
            "verifier": {
                "name_or_path": layout.path,
                "architectures": list(layout.architectures),
                "content_hash": content_hash(layout.path),
                "num_layers": layout.num_layers,
                "hidden_size": layout.hidden_size,
                "vocab_size": layout.vocab_size,
            },
            "aux_layer_ids": aux_ids,
            "method": recipe.draft.method,
            "recipe": recipe.name,
            "predicted_acceptance_length": report.predicted_acceptance_length,
            "held_out_full_acc": report.held_out_full_acc,
            "train_context_len": report.train_context_len,
        }
        atomic_write_json(tmp / "harness.json", meta)
    return draft


def build_report(
    recipe: Recipe,
    run_dir: Path,
    fit: dict[str, Any],
    agreement: dict[str, Any],
    vocab: dict[str, Any],
    samples: list[Sample],
) -> TrainReport:
    """Training report; predicted AL = 1 + sum over TTT steps of held-out full accuracy."""
    curves = json.loads((run_dir / "train_curve.json").read_text())
    val = curves["val"][-1] if curves["val"] else {}
    steps = range(recipe.train.ttt_steps)
    accs = held_out_full_acc(val, recipe.draft.method, recipe.train.ttt_steps)
    # EAGLE-3: step k given steps < k right; P-EAGLE, DFlash: each position's accuracy alone
    method = recipe.draft.method
    cond_keys = [position_acc_key(method, k) if method != "eagle3" else f"cond_acc_{k}" for k in steps]
    cond = [c for c in (val.get(key + "_epoch") for key in cond_keys) if c is not None]
    train = curves["train"]
    return TrainReport(
        predicted_acceptance_length=predicted_al(val, method, recipe.train.ttt_steps),
        held_out_full_acc=accs,
        held_out_cond_acc=cond,
        held_out_loss=val.get("loss_epoch"),
        train_loss_first=train[0].get("loss") if train else None,
        train_loss_last=train[-1].get("loss") if train else None,
        train_wall_s=fit.get("wall_s"),
        train_tokens=fit.get("train_tokens"),
        train_tok_per_s=fit.get("train_tok_per_s"),
        global_step=fit.get("global_step"),
        num_train_samples=fit.get("num_train_samples"),
        num_val_samples=fit.get("num_val_samples"),
        hidden_states=json.loads((run_dir / "hidden" / "done.json").read_text()),
        agreement=agreement.get("agreement"),
        vocab=vocab,
        init_held_out_full_acc=fit.get("init_held_out_full_acc"),
        train_context_len=max((len(x.input_ids) for x in samples), default=None),
    )


def _plot_training(run_dir: Path, reporter: Reporter) -> None:
    try:
        from harness.train.report_plot import plot_training

        plot_training(run_dir)
    except Exception as e:  # noqa: BLE001 - a plot must not fail a finished training
        reporter.log(f"training plot skipped: {e}")


def run_train(recipe: Recipe, run_dir: Path, reporter: Reporter, spare_hosts: int = 0) -> TrainResult:
    prepare_run_dir(run_dir, recipe, TRAIN_SECTIONS)
    layout = resolve_verifier(recipe, reporter)
    aux_ids = aux_layer_ids(recipe, layout)
    if recipe.train.init_from:  # refuse an init draft that cannot start this training before any stage runs
        from harness.draft.warm_start import check_init_from

        check_init_from(recipe.train.init_from, layout)
    check_draft_vocab(recipe, layout)
    rows = stage_prompts(recipe, run_dir, layout)
    samples = stage_responses(recipe, layout, run_dir, rows, reporter, spare_hosts)
    model = None
    needs_forward = recipe.train.hidden_states_source == "transformers" and (
        not (run_dir / "agreement.json").is_file() or not (run_dir / "hidden" / "done.json").is_file()
    )
    if needs_forward:
        from harness.verifier.hf_text import load_text_model

        model = load_text_model(layout)
    agreement = stage_agreement(recipe, layout, run_dir, samples, model, reporter)
    stage_hidden(recipe, layout, run_dir, samples, model, aux_ids, reporter)
    del model
    vocab = stage_vocab(recipe, layout, run_dir, samples)
    reporter.log(f"draft vocab {vocab['draft_vocab_size']} covers {vocab['coverage']:.1%} of response tokens")
    fit = stage_fit(recipe, layout, run_dir, aux_ids, reporter)
    report_path = run_dir / "train_report.json"
    if report_path.is_file():
        report = TrainReport.from_dict(json.loads(report_path.read_text()))
    else:
        report = build_report(recipe, run_dir, fit, agreement, vocab, samples)
    draft = stage_draft(recipe, layout, run_dir, aux_ids, report)
    if not report_path.is_file():
        atomic_write_json(report_path, report.to_dict())
        _plot_training(run_dir, reporter)
    return TrainResult(run_dir, draft, report, layout)


def _train_compute_dtype(recipe: Recipe) -> str:
    from harness.hardware import cpu_compute_dtype

    dtype = recipe.train.hidden_states_dtype
    return cpu_compute_dtype(dtype) if recipe.engine.device == "cpu" else dtype
