"""CLI commands of the results layer: `compare`, `report`, `gate`. `register(app)` adds them to a
typer app. Thin: build inputs, call one function, render to stdout, exit through harness.errors
(the entry point turns a HarnessError into one line on stderr and its exit code)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

RunArg = Annotated[Path, typer.Argument(help="Run folder or run id under results/runs/.")]
MdOpt = Annotated[
    Path | None, typer.Option("--markdown", help="Also write the table as Markdown here (e.g. $GITHUB_STEP_SUMMARY).")
]
ByOpt = Annotated[
    str,
    typer.Option(
        help="Columns that align cells (comma-separated); mode is always added, draft when a run has several."
    ),
]
TolOpt = Annotated[
    float | None,
    typer.Option(
        help="Allowed relative drop of AL (floors become rates × (1 − tolerance)); default: the stored baseline's "
        "(0.05), and for the paired gate the run's own recipe's gate.tolerance."
    ),
]
NoiseAwareOpt = Annotated[
    bool,
    typer.Option(
        help="Fail only when value + noise (the run's and baseline's CI half-widths in quadrature) is below the bound."
    ),
]
AllowMissingOpt = Annotated[
    bool,
    typer.Option(help="Gate the matching cells when baseline cells are missing or incomparable (they are listed)."),
]


def _console():
    from harness.ui import stdout_console

    return stdout_console()


def _notes(lines: list[str]) -> None:
    from harness.ui import stderr_console

    err = stderr_console()
    for n in lines:
        err.print(f"[yellow]note:[/] {n}", highlight=False, soft_wrap=True)


def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Run folders or run ids, or a canary folder (its engines' runs); the first is the reference."
        ),
    ],
    by: ByOpt = "suite,k,concurrency,temperature",
    force: Annotated[bool, typer.Option(help="Align cells that differ in verifier, max tokens or suite.")] = False,
    markdown: MdOpt = None,
    csv: Annotated[Path | None, typer.Option("--csv", help="Also write the comparison as CSV here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout.")] = False,
    long: Annotated[
        bool, typer.Option("--long", help="One row per cell and metric (every metric, both modes).")
    ] = False,
):
    """Runs side by side: one row per cell with AL [CI], speedup [CI] and tok/s per run, deltas vs the
    first run marked * when beyond noise (--long: one row per cell and metric)."""
    import json

    from harness.provenance import atomic_write_text
    from harness.results import compare as cmp
    from harness.results import compare_compact as cc

    runs, canaries = _expand_canaries(runs)
    result = cmp.compare_runs(runs, [c.strip() for c in by.split(",") if c.strip()], force)
    long_form = long or csv is not None  # the CSV has one row per cell and metric: it goes with the long form
    if markdown:
        atomic_write_text(markdown, cmp.to_markdown(result) if long_form else cc.to_markdown(result))
    if csv:
        atomic_write_text(csv, cmp.to_csv(result))
    if json_out:
        print(json.dumps(result.to_dict() if long_form else cc.to_dict(result), indent=2))
        return
    _console().print(cmp.to_rich(result) if long_form else cc.to_rich(result))
    if result.published:
        from harness.results.published import to_rich

        _console().print(to_rich([list(r) for r in result.published]))
    _notes([*canaries, *(cmp.long_notes(result) if long_form else result.notes())])


def _expand_canaries(runs: list[Path]) -> tuple[list[Path], list[str]]:
    """A canary folder among the runs stands for its engines' run folders, oldest engine first (issue 54);
    its verdict goes into the notes."""
    from harness.results.canary import canary_run_dirs, is_canary

    out: list[Path] = []
    verdicts: list[str] = []
    for r in runs:
        if is_canary(r):
            dirs, verdict = canary_run_dirs(r)
            out += dirs
            verdicts.append(verdict)
        else:
            out.append(r)
    return out, verdicts


def report(
    run: RunArg,
    out: Annotated[Path | None, typer.Option(help="Output folder (default: <run>/report/).")] = None,
):
    """Markdown + self-contained HTML report with plots for one run (killed runs: finished cells); for a
    canary folder, the canary's verdict, per-cell table and engines."""
    from harness.results.canary import is_canary
    from harness.results.report import write_report

    if is_canary(run):
        from harness.results.canary_report import write_canary_report

        md, html = write_canary_report(run, out)
        _console().print(f"report: {md}\n        {html}", highlight=False)
        return

    files = write_report(run, out)
    _console().print(
        f"report: {files.markdown}\n        {files.html}\nplots:  " + "\n        ".join(str(p) for p in files.plots),
        highlight=False,
    )


def _check_gate_options(options) -> None:
    """Out-of-range gate options (a gate.evaluate.GateOptions) are bad input (exit 2), never a verdict."""
    from harness.analysis.lossless import LOSSLESS_REQUIREMENTS
    from harness.errors import BadInput

    tolerance, min_speedup, lossless = options.tolerance, options.min_speedup, options.lossless
    max_crossover_drop, sampling_p_floor = options.max_crossover_drop, options.sampling_p_floor

    # A relative drop: 0 allows none, 1 would allow AL to fall to nothing (and < 0 or > 1 turn
    # the bound into nonsense that passes or fails everything).
    if tolerance is not None and not 0 <= tolerance < 1:
        raise BadInput(f"--tolerance {tolerance:g}: must be a fraction in [0, 1), e.g. 0.05 for a 5 % drop")
    if min_speedup is not None and min_speedup <= 0:
        raise BadInput(f"--min-speedup {min_speedup:g}: must be positive, e.g. 1.0")
    if options.min_slo_rate_ratio is not None and options.min_slo_rate_ratio <= 0:
        raise BadInput(f"--min-slo-rate-ratio {options.min_slo_rate_ratio:g}: must be positive, e.g. 1.1")
    if max_crossover_drop is not None and not 0 <= max_crossover_drop < 1:
        raise BadInput(
            f"--max-crossover-drop {max_crossover_drop:g}: must be a fraction in [0, 1), "
            "e.g. 0.25 for a crossover 25 % lower"
        )
    if sampling_p_floor is not None and not 0 < sampling_p_floor < 1:
        raise BadInput(f"--sampling-p-floor {sampling_p_floor:g}: must be a p-value in (0, 1), e.g. 0.01")
    if lossless is not None and lossless not in LOSSLESS_REQUIREMENTS:
        raise BadInput(f"--lossless {lossless!r}: choose one of {', '.join(LOSSLESS_REQUIREMENTS)}")


BaselineDraftOpt = Annotated[
    str,
    typer.Option(
        help="The run's label of the baseline's draft (gate.baseline_draft): when the run holds its cells, "
        "AL and per-position rates are tested paired against them (pass / fail / inconclusive)."
    ),
]


def gate(
    run: RunArg,
    baseline: Annotated[
        Path | None,
        typer.Option(help="Baseline folder (or a name under results/baselines/); none: the paired gate alone."),
    ] = None,
    tolerance: TolOpt = None,
    min_speedup: Annotated[float | None, typer.Option(help="Also fail cells whose speedup is below this.")] = None,
    noise_aware: NoiseAwareOpt = False,
    allow_missing: AllowMissingOpt = False,
    floors: Annotated[str | None, typer.Option(help="Per-position floors for every cell, e.g. 0.73,0.52,0.35.")] = None,
    draft: Annotated[str | None, typer.Option(help="Gate this draft label when the run holds several.")] = None,
    baseline_draft: BaselineDraftOpt = "baseline_draft",
    markdown: MdOpt = None,
    junit: Annotated[Path | None, typer.Option(help="Also write JUnit XML here (one testcase per check).")] = None,
    update_baseline: Annotated[bool, typer.Option(help="Write the baseline from this run instead of gating.")] = False,
    strict_power: Annotated[
        bool,
        typer.Option(help="Exit 2 when a gated cell cannot detect the tolerance with its prompts (power warning)."),
    ] = False,
    lossless: Annotated[
        str | None, typer.Option(help="T=0 misses accepted: exact | numerics-only | no-spec-bug (default) | none.")
    ] = None,
    max_crossover_drop: Annotated[
        float | None,
        typer.Option(
            help="Fail when the crossover concurrency (speedup falls below 1.0x) moves down by more than this "
            "fraction of the baseline's; with --update-baseline, store it as the baseline's requirement."
        ),
    ] = None,
    sampling_p_floor: Annotated[
        float | None,
        typer.Option(
            help="Fail T>0 cells whose distribution test (sampled tokens vs the verifier's distribution) has a "
            "p-value below this, e.g. 0.01."
        ),
    ] = None,
    min_slo_rate_ratio: Annotated[
        float | None,
        typer.Option(
            help="Fail open-loop lines (bench.request_rate with bench.slo) whose draft serves less than this times "
            "the baseline's highest request rate within the SLO at p99, e.g. 1.1."
        ),
    ] = None,
):
    """Check a run against a baseline: exit 0 pass, 1 regression, 2 unusable input. A canary folder
    (`harness canary`) is gated by its own verdict: a failed engine or a changed acceptance exits 1."""
    from dataclasses import replace

    from harness.errors import BadInput
    from harness.results.canary import is_canary
    from harness.results.gate import baseline as gate_baseline
    from harness.results.gate import evaluate, render
    from harness.schema import MANIFEST_FILE
    from harness.schema_baseline import BASELINE_FILE

    if is_canary(run):  # an upgrade canary's folder: its verdict, as checks (issue 54)
        return _gate_canary(run, baseline is not None or update_baseline, markdown, junit)
    options = evaluate.GateOptions(
        tolerance=tolerance,
        min_speedup=min_speedup,
        noise_aware=noise_aware,
        allow_missing=allow_missing,
        draft=draft,
        lossless=lossless,
        max_crossover_drop=max_crossover_drop,
        sampling_p_floor=sampling_p_floor,
        min_slo_rate_ratio=min_slo_rate_ratio,
        strict_power=strict_power,
        baseline_draft=baseline_draft,
    )
    _check_gate_options(options)
    if update_baseline:
        if baseline is None:
            raise BadInput("--update-baseline writes a baseline folder: name it with --baseline DIR")
        tol = evaluate.DEFAULT_TOLERANCE if tolerance is None else tolerance
        folder = gate_baseline.update_baseline(run, baseline, tol, allow_missing, draft, max_crossover_drop)
        _console().print(f"baseline written: {folder / BASELINE_FILE} (+ {MANIFEST_FILE})", highlight=False)
        return
    try:  # --floors is read only when gating (--update-baseline ignores it)
        options = replace(options, floors=tuple(float(x) for x in floors.split(",")) if floors else None)
    except ValueError as e:
        raise BadInput(f"--floors {floors!r}: expected comma-separated numbers like 0.73,0.52,0.35") from e
    result = gate_baseline.gate(run, baseline, options)
    render.write_gate_files(result, markdown, junit)
    _show_gate(result, options.strict_power)


def _gate_canary(run: Path, with_baseline: bool, markdown: Path | None, junit: Path | None) -> None:
    """`harness gate` on a canary folder (harness/results/gate/canary_gate.py)."""
    from harness.errors import BadInput
    from harness.results.gate import canary_gate, render

    if with_baseline:
        raise BadInput(
            f"{run} is a canary folder: its reference is its first engine; give it no --baseline or --update-baseline"
        )
    result = canary_gate.canary_gate(run)
    render.write_gate_files(result, markdown, junit)
    _show_gate(result, strict_power=False)


def _show_gate(result, strict_power: bool) -> None:
    """The gate's tables and notes on the console; exit 2 on --strict-power's low power, 1 on a failure."""
    from harness.errors import BadInput, Regression
    from harness.results.gate import render

    _console().print(render.to_rich(result))
    if result.paired:
        _console().print(render.to_rich_paired(result))
    _notes(render.notes(result))
    if strict_power and (result.power_warnings or result.verdict == "inconclusive"):
        warned = result.power_warnings or [result.summary()]
        more = f" (+{len(warned) - 1} more)" if len(warned) > 1 else ""
        raise BadInput(
            f"--strict-power: {warned[0]}{more}; add prompts to the suite "
            "(bench.num_prompts) or gate a larger tolerance"
        )
    if result.exit_code:
        raise Regression(result.summary())
    _console().print(f"[green]{result.summary()}[/]", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
    app.command("report")(report)
    app.command("gate")(gate)
