#!/usr/bin/env python
"""GPU check of the training path: the harness's own stages on one CUDA device, with a stand-in.

  stand-in folder -> greedy responses (transformers `generate`, on the device) -> hidden states
  (`stage_hidden`, the harness's transformers forward, on the device) -> draft vocabulary
  (`stage_vocab`) -> `stage_fit` (speculators' Trainer: FlexAttention `simple_flex_attention`
  and the fused Triton losses on CUDA) for a fixed number of optimizer steps -> one JSON line.

Responses come from transformers, not vLLM: the GPU machine this runs on has no vLLM. Everything
after them is the pipeline's code, unchanged. `--device cpu --attn-impl sdpa` runs the same path on
a CPU (eager losses) so the script itself is tested without a GPU. docs/gpu-check.md has the commands.

Exit 0 and one JSON line of figures on stdout when every check holds; otherwise the figures (when
training got that far) and, last on stderr, one line saying what failed (exit 1). Exit 2: bad
arguments; exit 3: a machine that cannot run the check (no CUDA, no Triton toolchain).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import math
import platform
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

# speculators.train.data imports `datasets` (for its own Arrow data path) at module level; the
# harness's loader (ShardDataset + speculators' CollateFn) never calls it. A bare CUDA machine
# lacks `datasets` and its pyarrow is too big to carry, so a stand-in module that refuses every
# use is put in its place when, and only when, the real one is missing (reported in "stubs").
STUBBED_WHEN_MISSING = {"datasets": ("load_from_disk", "load_dataset", "concatenate_datasets", "Dataset")}
VERSIONS_OF = ("torch", "triton", "transformers", "speculators", "hs-connectors", "pydantic", "pydantic_core",
               "safetensors", "tokenizers", "huggingface_hub", "numpy", "datasets")
METRICS_LOGGER = "speculators.metrics"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--standin", required=True, type=Path, help="stand-in verifier folder (config.json + safetensors)")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--attn-impl", choices=("simple_flex_attention", "sdpa", "eager"), default="simple_flex_attention")
    p.add_argument("--steps", type=int, default=40, help="optimizer steps (train.max_steps)")
    p.add_argument("--num-prompts", type=int, default=384, help="built-in training prompts used")
    p.add_argument("--max-new-tokens", type=int, default=96, help="longest greedy response")
    p.add_argument("--total-seq-len", type=int, default=1024, help="tokens packed per training batch")
    p.add_argument("--ttt-steps", type=int, default=3)
    p.add_argument("--draft-vocab-size", type=int, default=1024)
    p.add_argument("--gen-batch", type=int, default=64, help="prompts per generate() call")
    p.add_argument("--work-dir", type=Path, default=None, help="run folder (default: a fresh temporary one)")
    p.add_argument("--json-out", type=Path, default=None, help="also write the figures here")
    p.add_argument("--preflight", action="store_true", help="only check the imports and the toolchain, then exit")
    return p.parse_args(argv)


def stub_missing_modules() -> list[str]:
    """Install refusing stand-ins for modules speculators imports but the training path never uses."""
    stubbed = []
    for name, attrs in STUBBED_WHEN_MISSING.items():
        if importlib.util.find_spec(name) is not None:
            continue
        mod = types.ModuleType(name)

        def refuse(*_a: Any, _n: str = name, **_k: Any) -> None:
            raise RuntimeError(f"{_n} is not installed here (gpu_train_check stub); the training path must not use it")

        for attr in attrs:
            setattr(mod, attr, refuse)
        sys.modules[name] = mod
        stubbed.append(name)
    return stubbed


def check_device(device: str) -> dict[str, Any]:
    import torch

    if device == "cpu":
        from harness.provenance import hardware

        return {"device": "cpu", "device_name": hardware().get("cpu", platform.machine())}
    if not torch.cuda.is_available():
        raise SystemExit("gpu_train_check: --device cuda but torch.cuda.is_available() is False "
                         f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}); use a CUDA machine")
    problem = triton_build_problem()
    if problem:
        raise SystemExit(f"gpu_train_check: {problem}")
    props = torch.cuda.get_device_properties(0)
    return {"device": "cuda:0", "device_name": props.name, "device_mem_gib": round(props.total_memory / 2**30, 1),
            "cuda_runtime": torch.version.cuda, "capability": f"{props.major}.{props.minor}"}


def triton_build_problem() -> str | None:
    """Triton (FlexAttention, the fused losses, torch.compile on CUDA) builds a small C launcher on
    first use: it needs a C compiler and the interpreter's Python.h. Say so before any GPU time."""
    import os
    import shutil
    import sysconfig

    if importlib.util.find_spec("triton") is None:
        return "triton is not installed (torch's CUDA wheels bring it); FlexAttention and the fused losses need it"
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    header = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not cc:
        return "no C compiler (gcc, clang or $CC): Triton cannot build its launcher; install gcc or set CC"
    if not header.is_file():
        return f"{header} is missing: Triton cannot build its launcher; install the python dev headers"
    return None


PREFLIGHT_IMPORTS = ("torch", "transformers", "pydantic", "hs_connectors", "speculators.train.trainer",
                     "speculators.train.data", "speculators.models.eagle3", "harness.train.pipeline",
                     "harness.train.fit", "harness.verifier.hf_text", "harness.verifier.loader")


def preflight(device: str) -> str:
    """Everything the training path imports, without vLLM; a refusal raises SystemExit (one line)."""
    stubbed = stub_missing_modules()
    for name in PREFLIGHT_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - name the module that cannot be imported
            raise SystemExit(f"gpu_train_check: cannot import {name}: {type(e).__name__}: {e}") from e
    if any(m.split(".")[0] == "vllm" for m in sys.modules):
        raise SystemExit("gpu_train_check: the training path imported vllm; keep vllm imports inside engine functions")
    import torch
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        raise SystemExit(f"gpu_train_check: transformers {transformers.__version__} is too old; speculators 0.9.0 needs >= 5.0")
    problem = triton_build_problem() if device == "cuda" else None
    if problem:
        raise SystemExit(f"gpu_train_check: {problem}")
    return (f"imports ok (stubs: {stubbed or 'none'}): torch {torch.__version__} (CUDA {torch.version.cuda}, "
            f"available {torch.cuda.is_available()}), transformers {transformers.__version__}")


def make_recipe(args: argparse.Namespace):
    """A recipe for the check: the stand-in by path, one draft layer, a fixed number of steps."""
    from harness.recipe import Recipe

    return Recipe.model_validate({
        "name": "gpu-train-check",
        "verifier": {"path": str(args.standin.resolve())},
        "engine": {"device": args.device, "max_model_len": 512},
        "draft": {"num_layers": 1, "draft_vocab_size": args.draft_vocab_size, "intermediate_size": 1024},
        "train": {"num_prompts": args.num_prompts, "max_new_tokens": args.max_new_tokens, "epochs": 1,
                  "max_steps": args.steps, "lr": 3e-3, "total_seq_len": args.total_seq_len,
                  "ttt_steps": args.ttt_steps, "attn_impl": args.attn_impl, "validation_fraction": 0.1,
                  "bench_overlap": "allow"},
    })


def greedy_samples(recipe, layout, model, tokenizer, gen_batch: int) -> list:
    """The verifier's own greedy answers to the built-in prompts (transformers on the model's
    device: the stand-in for vLLM's regeneration, which this machine cannot run)."""
    import torch

    from harness.prompts import render
    from harness.train.hidden_states import Sample
    from harness.train.prompts import load_training_prompts

    limit = recipe.engine.max_model_len - recipe.train.max_new_tokens
    prompts = [(r.id, ids) for r in load_training_prompts(recipe) if len(ids := render(tokenizer, r)) <= limit]
    eos, pad = set(layout.eos_token_ids), tokenizer.pad_token_id or 0
    samples = []
    for k in range(0, len(prompts), gen_batch):
        chunk = prompts[k: k + gen_batch]
        width = max(len(ids) for _, ids in chunk)
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        att = torch.zeros_like(ids)
        for i, (_, p) in enumerate(chunk):  # left padding: every answer starts at column `width`
            ids[i, width - len(p):] = torch.tensor(p)
            att[i, width - len(p):] = 1
        with torch.no_grad():
            out = model.generate(ids.to(model.device), attention_mask=att.to(model.device), do_sample=False,
                                 max_new_tokens=recipe.train.max_new_tokens, pad_token_id=pad,
                                 eos_token_id=sorted(eos))
        for (pid, p), row in zip(chunk, out[:, width:].tolist(), strict=True):
            answer = []
            for t in row:
                answer.append(t)
                if t in eos:  # the stop token is part of the answer, as vLLM returns it
                    break
            samples.append(Sample(pid, tuple(p), tuple(answer)))
    return samples


class ProfileTap(logging.Handler):
    """speculators' per-step profile (its synchronised step timer): tokens and seconds per step."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[dict[str, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg
        if isinstance(msg, dict) and "train" in msg and msg.get("profile"):
            prof = msg["profile"]
            step_s = prof["step_ms"] / 1000
            self.steps.append({"step_s": step_s, "num_tokens": prof["tokens_per_s"] * step_s})


class StderrReporter:
    """Stage lines on stderr (stdout carries only the JSON line)."""

    def stage(self, name: str, total: int | None = None, unit: str = "") -> None:
        self._t0 = time.perf_counter()
        print(f"[gpu_train_check] {name} ...", file=sys.stderr, flush=True)

    def advance(self, n: int = 1, **fields: Any) -> None: ...

    def done(self, summary: str = "") -> None:
        print(f"[gpu_train_check]   done in {time.perf_counter() - self._t0:.1f} s {summary}", file=sys.stderr, flush=True)

    def log(self, message: str) -> None:
        print(f"[gpu_train_check] {message}", file=sys.stderr, flush=True)

    def close(self) -> None: ...


def peak_mem_mib(device: str, reset: bool = True) -> float | None:
    import torch

    if device == "cpu":
        return None
    peak = torch.cuda.max_memory_allocated() / 2**20
    if reset:
        torch.cuda.reset_peak_memory_stats()
    return round(peak, 1)


def prepare_states(args, recipe, run_dir: Path, rep: StderrReporter, fig: dict[str, Any]):
    """Stand-in -> greedy responses -> hidden states (on the device) -> vocabulary."""
    from harness.draft.config import aux_layer_ids
    from harness.draft.verifier import load_tokenizer
    from harness.train.states import stage_hidden, stage_vocab
    from harness.verifier.hf_text import load_text_model
    from harness.verifier.layout import resolve_layout

    fig["stage"] = "load stand-in"
    layout = resolve_layout(str(args.standin.resolve()))
    aux_ids = aux_layer_ids(recipe, layout)
    model = load_text_model(layout).to(args.device)
    fig["stage"] = "responses"
    rep.stage(f"greedy responses (transformers on {args.device})")
    samples = greedy_samples(recipe, layout, model, load_tokenizer(layout), args.gen_batch)
    rep.done(f"{len(samples)} samples")
    fig["stage"] = "hidden states"
    stage_hidden(recipe, layout, run_dir, samples, model, aux_ids, rep)
    fig["peak_gpu_mem_states_mib"] = peak_mem_mib(args.device)
    del model
    fig["stage"] = "vocab"
    vocab = stage_vocab(recipe, layout, run_dir, samples)
    fig.update(num_samples=len(samples), num_tokens=sum(len(s.input_ids) for s in samples),
               num_response_tokens=sum(len(s.output_ids) for s in samples),
               vocab_coverage=round(vocab["coverage"], 4))
    return layout, aux_ids, vocab, samples


def train_and_measure(args, recipe, layout, aux_ids, vocab, samples, run_dir: Path, rep,
                      fig: dict[str, Any]) -> None:
    """`stage_fit` (speculators' Trainer) for the fixed steps, then the pipeline's own report."""
    from harness.train.pipeline import build_report
    from harness.train.training import stage_fit

    fig["stage"] = "fit"
    tap = ProfileTap()
    logging.getLogger(METRICS_LOGGER).addHandler(tap)
    try:
        fit = stage_fit(recipe, layout, run_dir, aux_ids, rep)
    finally:
        logging.getLogger(METRICS_LOGGER).removeHandler(tap)
    fig["peak_gpu_mem_fit_mib"] = peak_mem_mib(args.device)
    report = build_report(recipe, run_dir, fit, {}, vocab, samples).to_dict()
    steady = tap.steps[1:]  # the first step carries torch.compile / Triton autotuning
    steady_s = sum(s["step_s"] for s in steady)
    fig.update(
        steps=fit["global_step"], steps_requested=args.steps, fit_device=fit["device"],
        attn_impl=fit["attn_impl"], loss_implementation=fit["loss_implementation"], loss=recipe.train.loss,
        fused_triton_losses_loaded="speculators.losses.fused" in sys.modules,
        loss_first=report["train_loss_first"], loss_last=report["train_loss_last"],
        held_out_loss=report["held_out_loss"], held_out_full_acc=report["held_out_full_acc"],
        predicted_acceptance_length=report["predicted_acceptance_length"],
        num_train_samples=fit["num_train_samples"], num_val_samples=fit["num_val_samples"],
        first_step_s=round(tap.steps[0]["step_s"], 3) if tap.steps else None,
        train_tok_per_s=round(sum(s["num_tokens"] for s in steady) / steady_s, 1) if steady_s else None,
        fit_wall_s=fit["wall_s"],
    )


def checks(fig: dict[str, Any], args: argparse.Namespace) -> dict[str, bool]:
    """What must hold for the check to pass (each one a line in docs/gpu-check.md)."""
    finite = all(isinstance(x, float) and math.isfinite(x) for x in (fig["loss_first"], fig["loss_last"]))
    out = {
        "ran_requested_steps": fig["steps"] == args.steps,
        "loss_finite": finite,
        "loss_decreased": finite and fig["loss_last"] < fig["loss_first"],
        "held_out_acc_per_ttt_step": len(fig["held_out_full_acc"]) == args.ttt_steps,
        "attn_impl_as_requested": fig["attn_impl"] == args.attn_impl,
    }
    if args.device == "cuda":
        out["trained_on_cuda"] = str(fig["fit_device"]).startswith("cuda")
        out["fused_losses"] = fig["loss_implementation"] == "fused" and fig["fused_triton_losses_loaded"]
    return out


def versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONS_OF:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def run_check(args: argparse.Namespace, fig: dict[str, Any]) -> dict[str, bool]:
    import torch

    fig.update(check_device(args.device))
    fig["stubs"] = stub_missing_modules()
    fig["versions"] = versions()
    torch.manual_seed(0)
    recipe = make_recipe(args)
    rep = StderrReporter()
    with tempfile.TemporaryDirectory(prefix="gpu-train-check-") as tmp:
        run_dir = args.work_dir or Path(tmp)
        run_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        layout, aux_ids, vocab, samples = prepare_states(args, recipe, run_dir, rep, fig)
        fig["states_wall_s"] = round(time.perf_counter() - t0, 1)
        train_and_measure(args, recipe, layout, aux_ids, vocab, samples, run_dir, rep, fig)
    fig["stage"] = "done"
    return checks(fig, args)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not (args.standin / "config.json").is_file():
        print(f"gpu_train_check: --standin {args.standin} has no config.json; pass a stand-in folder "
              "(harness verifier make-standin OUT --arch kimi-k2.5)", file=sys.stderr)
        return 2
    fig: dict[str, Any] = {"check": "gpu_train_check", "ok": False, "stage": "start"}
    try:
        if args.preflight:
            print(f"[gpu_train_check] {preflight(args.device)}", file=sys.stderr)
            return 0
        results = run_check(args, fig)
    except SystemExit as e:  # a machine that cannot run the check: its message is the one line
        print(e.code, file=sys.stderr)
        return 3
    except Exception as e:  # noqa: BLE001 - the point of the script is one clear line for any failure
        traceback.print_exc()
        fig["error"] = f"{type(e).__name__}: {e}".splitlines()[0]
        _emit(fig, args)
        print(f"gpu_train_check FAILED in stage '{fig['stage']}': {fig['error']}", file=sys.stderr)
        return 1
    fig["checks"] = results
    fig["ok"] = all(results.values())
    _emit(fig, args)
    if not fig["ok"]:
        print("gpu_train_check FAILED: " + ", ".join(k for k, v in results.items() if not v), file=sys.stderr)
        return 1
    return 0


def _emit(fig: dict[str, Any], args: argparse.Namespace) -> None:
    line = json.dumps(fig, sort_keys=True)
    print(line, flush=True)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(line + "\n")


if __name__ == "__main__":
    sys.exit(main())
