"""The first stages of `harness train` (harness/train/pipeline.py): the training prompts
(prompts.jsonl, checked against the bench suites) and the verifier's own answers to them, regenerated
with vLLM in parts written atomically (responses/part-*.jsonl, a conversation's later turns in
responses/turn-*.jsonl, each engine session's timing in responses/timing.json), and at T > 0 the
agreement gate's greedy twins (agreement_greedy.jsonl).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness.draft.verifier import load_tokenizer
from harness.errors import BadInput
from harness.provenance import atomic_write_json, atomic_write_text
from harness.recipe import Recipe
from harness.train.hidden_states import Sample
from harness.train.run_dir import read_jsonl
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout

RESPONSE_CHUNK = 256


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
