"""The stages of `harness train` between the responses and the fit (driven by harness/train/pipeline.py): the
train/serve agreement gate (agreement.json), the hidden states (offline: hidden/shard-*.pt from the
transformers forward or a vLLM extraction server; online: only the sample tables, the states come
during training) and the draft vocabulary (vocab.pt, vocab.json).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from harness.errors import BadInput, DiskFull
from harness.provenance import atomic_dir, atomic_path, atomic_write_json
from harness.recipe import Recipe
from harness.train.hidden_states import Sample, StatesFn
from harness.train.run_dir import read_jsonl
from harness.ui import Reporter
from harness.verifier.layout import VerifierLayout


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
        started = time.monotonic()
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
            # what the cost model checks its plan against (harness/plan/cost_measured.py)
            "forward_tokens": sum(len(s.input_ids) for s in chosen),
            "wall_s": round(time.monotonic() - started, 1),
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
