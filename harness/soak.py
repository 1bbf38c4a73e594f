"""`harness soak`: hold a steady open-loop load on the speculative server, prefix caching on, and
watch acceptance, latency and memory window by window for acceptance drift (issue 27 item 4).

The load: the recipe's suites' conversations arriving at `request_rate` requests/s
(vLLM's Poisson/gamma client, as `bench.request_rate`), at most `concurrency` in flight, the
server's prefix cache on (its default): a conversation's later turns, and every prompt's later
passes, meet a warm cache, as on a server that runs for days.

A window: about `request_rate x window_s` requests of whole conversations on the speculative
server, the same conversations and arrival schedule every window (a change in AL is then the
server's, not the traffic mix's), then a baseline probe (the first PROBE_FRACTION of them, same
rate and settings) on the no-speculation server, which stays up beside it. Per window:

  AL                1 + accepted / drafts over the window's verify steps (vLLM's counters)
  TPOT p50 / p99    per request (e2e − TTFT) / (output tokens − 1), ms
  speedup           baseline probe's p50 TPOT / the window's p50 TPOT: per-token latency at the same
                    offered rate, measured minutes apart on the same machine (not a throughput ratio)
  hit rate          prompt tokens found in the prefix cache / looked up (vllm:prefix_cache_*)
  memory            resident set of each server's process tree (API server + engine core), MiB
  others' CPU       the share of the machine's CPUs processes outside the harness used during the
                    window; over FOREIGN_CPU_LIMIT the window is MACHINE BUSY (its TPOT and speedup
                    are not the servers' own; AL is) and the TPOT trend leaves it out

The trend test (harness/analysis/drift.py) runs on (soak hours, AL) per window and flags
ACCEPTANCE DRIFT with its slope per hour and CI; the command exits 1 when it does.

The run folder keeps `soak.json` (settings, every window's raw counters and figures), rewritten
atomically after each window: an interrupted soak (Ctrl-C, SIGTERM, a dead server) keeps its
finished windows, and the same command resumes it, the soak clock going on from where it stopped
(a new engine session, so a cold cache: `session` says which windows shared a server). A folder
holding another soak (draft, rate, window, k, concurrency, T, recipe) is refused.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from harness import interrupts, metrics
from harness.analysis import drift
from harness.analysis.machine import FOREIGN_CPU_LIMIT, foreign_cpu
from harness.bench.rows import ArmResult
from harness.engine.base import Arrivals, Engine
from harness.errors import BadInput
from harness.recipe import Recipe
from harness.ui import Reporter, fmt

SOAK_FILE = "soak.json"
PROBE_FRACTION = 0.25
FORMAT = 1


@dataclass(frozen=True)
class SoakSettings:
    minutes: float
    request_rate: float
    window_s: float
    k: int
    concurrency: int
    temperature: float

    def identity(self) -> dict[str, Any]:
        """What a resumed soak must share with the folder's (the duration may grow)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "minutes"}


@dataclass(frozen=True)
class Window:
    index: int
    session: int  # the engine session: a resume restarts both servers (a cold prefix cache)
    start_s: float  # soak time at the window's start, over every session
    duration_s: float  # the speculative window and its baseline probe
    at: str  # wall-clock time the window ended (UTC, ISO 8601)
    requests: int
    failed: int
    output_tokens: int
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    acceptance_length: float | None
    tpot_ms_p50: float | None
    tpot_ms_p99: float | None
    ttft_ms_p99: float | None
    output_tok_per_s: float | None
    prefix_cache_hit_rate: float | None
    rss_mib: float | None
    baseline_requests: int
    baseline_tpot_ms_p50: float | None
    baseline_rss_mib: float | None
    speedup: float | None
    # the share of the machine's CPUs processes outside the harness used during the window (None:
    # psutil could not read the CPU times); above FOREIGN_CPU_LIMIT the window's latency and speedup
    # are not the servers' own
    foreign_cpu: float | None = None

    @property
    def mid_h(self) -> float:
        return (self.start_s + self.duration_s / 2) / 3600

    @property
    def busy(self) -> bool:
        return self.foreign_cpu is not None and self.foreign_cpu > FOREIGN_CPU_LIMIT


def window_from_arms(
    index: int,
    session: int,
    start_s: float,
    spec: ArmResult,
    base: ArmResult,
    rss_mib: tuple[float | None, float | None],
    foreign: float | None = None,
) -> Window:
    """A window's figures from its speculative arm and its baseline probe (pure)."""
    c = spec.counters
    tpot, base_tpot = metrics.median(spec.tpot), metrics.median(base.tpot)
    return Window(
        index=index,
        session=session,
        start_s=start_s,
        duration_s=spec.wall_s + base.wall_s,
        at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        requests=spec.num_requests,
        failed=len(spec.errors),
        output_tokens=spec.num_output_tokens,
        num_drafts=c.num_drafts,
        num_draft_tokens=c.num_draft_tokens,
        num_accepted_tokens=c.num_accepted_tokens,
        acceptance_length=metrics.acceptance_length(c) if c.num_drafts else None,
        tpot_ms_p50=tpot,
        tpot_ms_p99=metrics.percentile(spec.tpot, 99),
        ttft_ms_p99=metrics.percentile(spec.ttft, 99),
        output_tok_per_s=metrics.output_tok_per_s(spec.num_output_tokens, spec.wall_s),
        prefix_cache_hit_rate=spec.prefix_cache_hit_rate,
        rss_mib=rss_mib[0],
        baseline_requests=base.num_requests,
        baseline_tpot_ms_p50=base_tpot,
        baseline_rss_mib=rss_mib[1],
        speedup=base_tpot / tpot if base_tpot and tpot else None,
        foreign_cpu=foreign,
    )


def verdict(windows: Sequence[Window]) -> drift.Trend | None:
    """The trend test on the windows' AL over soak hours (harness/analysis/drift.py)."""
    ok = [w for w in windows if w.acceptance_length is not None]
    return drift.trend([w.mid_h for w in ok], [w.acceptance_length for w in ok if w.acceptance_length is not None])


# ----------------------------------------------------------------------------- the run folder


def read_soak(run_dir: Path) -> dict[str, Any] | None:
    import json

    p = run_dir / SOAK_FILE
    return json.loads(p.read_text()) if p.is_file() else None


def windows_of(state: dict[str, Any] | None) -> list[Window]:
    return [Window(**w) for w in (state or {}).get("windows", [])]


def _write(run_dir: Path, state: dict[str, Any]) -> None:
    from harness.provenance import atomic_write_json

    atomic_write_json(run_dir / SOAK_FILE, state)


def open_soak(run_dir: Path, identity: dict[str, Any], settings: SoakSettings) -> dict[str, Any]:
    """The folder's soak state, new or resumed; refuses a folder that holds another soak."""
    state = read_soak(run_dir)
    if state is None:
        run_dir.mkdir(parents=True, exist_ok=True)
        state = {
            "format": FORMAT,
            "identity": identity,
            "settings": asdict(settings),
            "status": "running",
            "windows": [],
        }
    elif state.get("identity") != identity:
        theirs, ours = state.get("identity") or {}, identity
        diff = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        raise BadInput(
            f"{run_dir} holds another soak (differs in {', '.join(diff)}); give a new --run-dir, or the same "
            "settings to resume it"
        )
    state["settings"] = asdict(settings)  # the duration may have grown
    _write(run_dir, state)
    return state


# ----------------------------------------------------------------------------- the engines' side


def process_tree_rss_mib(pid: int | None) -> float | None:
    """Resident memory of a process and its children (a vLLM server: API server + engine core)."""
    if pid is None:
        return None
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


def soak_recipe(recipe: Recipe) -> Recipe:
    """The recipe a soak serves: a server engine (an offline recipe's becomes one), no @nocache
    suites (the soak is about the cache on) and no reference drafts (the draft under test only)."""
    b = recipe.bench
    bench = b.model_copy(
        update={"engine": "server" if b.engine == "offline" else b.engine, "prefix_caching": [], "reference_drafts": []}
    )
    return recipe.model_copy(update={"bench": bench})


@dataclass(frozen=True)
class SoakPlan:
    """What every window serves: the recipe as the soak runs it, the verifier and draft, the
    tokenizer, the window's conversations and its baseline probe (the first of them)."""

    recipe: Recipe
    layout: Any
    draft: Any
    tokenizer: Any
    batch: list
    probe: list
    max_prompt: int


def plan_soak(recipe: Recipe, draft_dir: Path, settings: SoakSettings, reporter: Reporter) -> SoakPlan:
    """Resolve and check everything before any engine starts (a bad draft or prompt: exit 2)."""
    from harness.bench.planning import recipe_suites, render_requests
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import load_tokenizer, resolve_verifier
    from harness.engine.settings import refuse_what_vllm_cannot_run

    recipe = soak_recipe(recipe)
    layout = resolve_verifier(recipe, reporter)
    (draft,) = resolve_drafts(recipe, layout, draft_dir)
    refuse_what_vllm_cannot_run(recipe.engine, draft.verifier, draft.method)
    tok = load_tokenizer(layout, recipe.engine.trust_remote_code)
    max_prompt = recipe.engine.max_model_len - recipe.bench.max_tokens
    allow = recipe.bench.allow_random_prompts
    convs = [c for s in recipe_suites(recipe) for c in render_requests(tok, s, max_prompt, allow)]
    if not convs:
        raise BadInput("the recipe's bench.suites have no prompts to soak with")
    batch = window_conversations(convs, max(2, round(settings.request_rate * settings.window_s)))
    probe = batch[: max(1, math.ceil(len(batch) * PROBE_FRACTION))]
    return SoakPlan(recipe, layout, draft, tok, batch, probe, max_prompt)


def run_soak(
    recipe: Recipe, draft_dir: Path, run_dir: Path, settings: SoakSettings, reporter: Reporter, engine_factory=None
) -> list[Window]:
    """Run (or resume) the soak until its windows cover `settings.minutes`; returns every window."""
    from harness.bench.engines import default_engine_factory
    from harness.engine.settings import SpeculativeSpec, engine_plan

    plan = plan_soak(recipe, draft_dir, settings, reporter)
    recipe, draft = plan.recipe, plan.draft
    identity = {
        **settings.identity(),
        "draft": draft.content_hash or {"path": str(draft_dir)},
        "verifier": str(plan.layout.path),
        "recipe": recipe.fingerprint(),
    }
    state = open_soak(run_dir, identity, settings)
    windows = windows_of(state)
    elapsed = windows[-1].start_s + windows[-1].duration_s if windows else 0.0
    if elapsed >= settings.minutes * 60:
        reporter.log(f"soak already covers {elapsed / 60:.1f} of {settings.minutes:g} min: nothing to run")
        return windows
    make = engine_factory or default_engine_factory(recipe, run_dir)
    spec = SpeculativeSpec(draft.method, settings.k, draft.path, recipe.bench.rejection_sample_method)
    spec_plan, name = engine_plan(recipe.engine, plan.layout, spec), f"soak-{draft.label}-k{settings.k}"
    status = "failed"
    early = None
    if recipe.engine.device == "cpu" and recipe.bench.engine == "server":  # both start side by side (CPU only)
        from harness.engine.background_start import BackgroundStart

        early = BackgroundStart(lambda: make(spec_plan, name))
    try:
        with make(engine_plan(recipe.engine, plan.layout), "soak-baseline") as base:
            with early.result() if early else make(spec_plan, name) as spec_engine:
                early = None
                state["engines"] = {"baseline": base.describe(), "speculative": spec_engine.describe()}
                soak_windows(plan, settings, (base, spec_engine), state, run_dir, reporter)
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if early is not None:
            early.abandon()  # the baseline failed to start: close the speculative server when it is up
        state["status"] = status
        _write(run_dir, state)
        reporter.done()
    return windows_of(state)


def soak_windows(
    plan: SoakPlan,
    settings: SoakSettings,
    engines: tuple[Engine, Engine],
    state: dict[str, Any],
    run_dir: Path,
    reporter: Reporter,
) -> None:
    """Windows on the warmed-up (baseline, speculative) servers until the soak time is reached,
    each written to the folder as it ends."""
    from harness.bench.arm import run_arm, sampling_for, warm_up
    from harness.bench.cpu_ticks import read_ticks

    recipe, b = plan.recipe, plan.recipe.bench
    base, spec = engines
    for eng in engines:
        warm_up(eng, plan.batch, recipe, plan.layout)
    windows = windows_of(state)
    elapsed = windows[-1].start_s + windows[-1].duration_s if windows else 0.0
    session = (windows[-1].session + 1) if windows else 0
    sampling = replace(sampling_for(recipe, settings.temperature, plan.layout), logprobs=None)
    arrivals = Arrivals(settings.request_rate, b.burstiness, b.arrival_seed)  # the same schedule every window
    reporter.stage("soak windows", total=math.ceil((settings.minutes * 60 - elapsed) / settings.window_s))
    while elapsed < settings.minutes * 60:
        interrupts.check()  # a safe point: SIGTERM stops here, the finished windows kept
        spec_arm, base_arm = ArmResult(), ArmResult()
        before = read_ticks()
        for eng, convs, arm in ((spec, plan.batch, spec_arm), (base, plan.probe, base_arm)):
            run_arm(
                eng, plan.tokenizer, convs, sampling, b.max_tokens, settings.concurrency, plan.max_prompt, arm, arrivals
            )
        after = read_ticks()
        foreign = foreign_cpu(before, after) if before and after else None
        rss = (process_tree_rss_mib(_pid(spec)), process_tree_rss_mib(_pid(base)))
        w = window_from_arms(len(windows), session, elapsed, spec_arm, base_arm, rss, foreign)
        windows.append(w)
        elapsed = w.start_s + w.duration_s
        state["windows"] = [asdict(x) for x in windows]
        _write(run_dir, state)
        reporter.advance(1)
        reporter.log(window_line(w))


def _pid(engine: Engine) -> int | None:
    pid = getattr(engine, "pid", None)
    return pid if isinstance(pid, int) else None


def window_conversations(convs: list, requests: int) -> list:
    """The conversations every window sends: whole ones from the first on (cycling past the end),
    until their turns reach `requests`. The same traffic every window, so a change in AL from one
    window to the next is the server's, not the traffic mix's."""
    out: list = []
    turns = 0
    while turns < requests:
        lap, i = divmod(len(out), len(convs))
        rec, ids = convs[i]
        out.append((replace(rec, id=f"{rec.id}~{lap}") if lap else rec, ids))  # request ids stay unique
        turns += rec.num_turns
    return out


def window_line(w: Window) -> str:
    return (
        f"window {w.index + 1} (t={w.start_s / 60:.1f} min, session {w.session}): {w.requests} requests"
        f"{f' ({w.failed} failed)' if w.failed else ''}, AL {fmt(w.acceptance_length, '{:.2f}')}, TPOT p50/p99 "
        f"{fmt(w.tpot_ms_p50, '{:.1f}')}/{fmt(w.tpot_ms_p99, '{:.1f}')} ms, speedup {fmt(w.speedup, '{:.2f}')}x, "
        f"cache hits {fmt(w.prefix_cache_hit_rate, '{:.0%}')}, memory {fmt(w.rss_mib, '{:.0f}')} MiB"
        + (f"; MACHINE BUSY (others used {w.foreign_cpu:.0%} of the CPUs)" if w.busy else "")
    )


def soak_exit(windows: Sequence[Window]) -> int:
    """1 when the trend test flags acceptance drift (a regression, as the gate's 1), else 0."""
    tr = verdict(windows)
    return 1 if tr is not None and tr.drifting else 0


def render_soak(run_dir: Path, windows: Sequence[Window], console, as_json: bool = False) -> None:
    """Every window's figures, the drift verdict and the memory from first to last window."""
    import json

    from rich.table import Table

    tr = verdict(windows)
    line = drift.describe(tr)
    if as_json:
        print(
            json.dumps(
                {
                    "run_dir": str(run_dir),
                    "windows": [asdict(w) for w in windows],
                    "trend": None if tr is None else {**asdict(tr), "drifting": tr.drifting},
                    "verdict": line,
                },
                indent=2,
            )
        )
        return
    t = Table(title=f"soak: {run_dir}")
    for col in (
        "window",
        "t (min)",
        "session",
        "requests",
        "AL",
        "TPOT p50 / p99 ms",
        "speedup",
        "cache hits",
        "MiB",
        "others' CPU",
    ):
        t.add_column(col, justify="right")
    for w in windows:
        t.add_row(
            str(w.index + 1),
            f"{w.start_s / 60:.1f}",
            str(w.session),
            f"{w.requests}" + (f" ({w.failed} failed)" if w.failed else ""),
            fmt(w.acceptance_length, "{:.2f}"),
            f"{fmt(w.tpot_ms_p50, '{:.1f}')} / {fmt(w.tpot_ms_p99, '{:.1f}')}",
            fmt(w.speedup, "{:.2f}"),
            fmt(w.prefix_cache_hit_rate, "{:.0%}"),
            fmt(w.rss_mib, "{:.0f}"),
            fmt(w.foreign_cpu, "{:.0%}") + (" BUSY" if w.busy else ""),
        )
    console.print(t)
    console.print(line, style="bold red" if tr is not None and tr.drifting else None, highlight=False)
    busy = [w for w in windows if w.busy]
    if busy:
        console.print(
            f"MACHINE BUSY in window(s) {', '.join(str(w.index + 1) for w in busy)}: processes outside the harness "
            f"used over {FOREIGN_CPU_LIMIT:.0%} of the CPUs; their TPOT and speedup are not the servers' own "
            "(AL does not depend on the machine's speed), and the TPOT trend leaves them out",
            style="yellow",
            highlight=False,
        )
    timed = [w for w in windows if w.tpot_ms_p50 is not None and not w.busy]
    latency = drift.trend([w.mid_h for w in timed], [w.tpot_ms_p50 for w in timed if w.tpot_ms_p50 is not None])
    console.print(
        drift.describe(latency, "TPOT p50 (ms)", ".1f") + " (information: the exit code is AL's)", highlight=False
    )
    mem = [w.rss_mib for w in windows if w.rss_mib is not None]
    if len(mem) >= 2:
        console.print(f"speculative server memory: {mem[0]:.0f} -> {mem[-1]:.0f} MiB", highlight=False)
    console.print(
        "AL: 1 + accepted / drafts per window; speedup: the baseline probe's p50 TPOT / the window's "
        "(per-token latency at the same offered rate); definitions: harness/soak.py",
        style="dim",
        highlight=False,
    )
