"""The gate's verdict rendered: a rich table for the console, Markdown (gate.md, a CI step summary),
JUnit XML (one testcase per check) and gate.json (what the report reads back); docs/gate.md, "Outputs".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.results.checks import Check
from harness.results.gate.evaluate import GateResult
from harness.ui import SETTING_HEADERS, fmt, md_table


def verdict_dict(res: GateResult) -> dict[str, Any]:
    """The gate's verdict as gate.json holds it: what the report shows, read back without parsing a renderer."""
    return {
        "run_id": res.run_id,
        "baseline": res.baseline,
        "checks": len(res.checks),
        "failures": [c.message() for c in res.checks if not c.passed],
        "not_gated": list(res.not_gated),
        "verdict": res.verdict,
        "baseline_kind": res.baseline_kind,
        "tolerance": res.tolerance,
        "detectable_drop": res.detectable_drop,
        "baseline_draft_hash": res.baseline_draft_hash,
        "paired": [c.to_dict() for c in res.paired],
    }


def write_gate_files(
    result: GateResult, markdown: Path | None = None, junit: Path | None = None, verdict: Path | None = None
) -> None:
    from harness.provenance import atomic_write_json, atomic_write_text

    if markdown:
        atomic_write_text(markdown, to_markdown(result))
    if junit:
        atomic_write_text(junit, to_junit(result))
    if verdict:
        atomic_write_json(verdict, verdict_dict(result))


def _row(c: Check) -> list[str]:
    value = fmt(c.value) + (f" (CI↑ {fmt(c.compared)})" if c.compared not in (None, c.value) else "")
    mdd = "" if c.min_detectable_drop is None else f"{c.min_detectable_drop:.1%}" + (" ⚠" if c.power_warning else "")
    return [
        c.suite,
        c.draft,
        str(c.k),
        str(c.concurrency),
        f"{c.temperature:g}",
        c.metric,
        fmt(c.baseline),
        value,
        fmt(c.bound),
        mdd,
        "pass" if c.passed else "FAIL",
    ]


HEADERS = [
    *SETTING_HEADERS,
    "metric",
    "baseline",
    "value",
    "bound",
    "detectable drop",
    "verdict",
]


def notes(res: GateResult) -> list[str]:
    out = [f"low power: {w}" for w in res.power_warnings]
    out += [f"not gated: {p}" for p in res.not_gated]
    out += [f"no baseline for run cell {e} (not gated)" for e in res.extra]
    return out + ([f"incomplete run: {res.incomplete}"] if res.incomplete else [])


_NOISE_AWARE = "on (value + the run's and the baseline's CI half-widths in quadrature)"


PAIRED_HEADERS = ["cell", "metric", "candidate", "baseline draft", "difference [90 % CI]", "n", "detectable", "verdict"]


def _paired_rows(res: GateResult) -> list[list[str]]:
    rows = []
    for cell in res.paired:
        if cell.problem:
            rows.append([cell.where, "-", "-", "-", "-", "-", "-", f"inconclusive ({cell.problem})"])
        for i, e in enumerate(cell.estimates):
            need = f"; ~{e.prompts_needed} prompts would see {e.tolerance * 100:.3g}%" if e.prompts_needed else ""
            if e.verdict == "immaterial":  # cell.estimates[0] is AL: its baseline is the baseline draft's AL
                al = cell.estimates[0].baseline
                need = (
                    f" (rate below {e.tolerance * 100:.3g}% × AL {al:.2f}: cannot move AL by the tolerance; not gated)"
                )
            seq = cell.sequential if i == 0 else None
            settled = f"; sequential: {seq.verdict} after {seq.n_used}" if seq is not None else ""
            if i == 0 and cell.rounds:
                settled = f"; {cell.rounds}"
            rows.append(
                [
                    cell.where if i == 0 else "",
                    e.metric,
                    f"{e.candidate:.3f}",
                    f"{e.baseline:.3f}",
                    f"{e.diff:+.1%} [{e.low:+.1%}, {e.high:+.1%}]",
                    str(e.n),
                    f"{e.mdd:.1%}",
                    e.verdict + (f" (cell: {cell.verdict}{settled})" if i == 0 else "") + need,
                ]
            )
    return rows


def paired_line(res: GateResult) -> str:
    """Which baseline the gate used and the tolerance its test can see."""
    mdd = res.detectable_drop
    if res.baseline_kind == "canary":
        return (
            "baseline: the same draft and prompts on the reference engine (harness canary); per-request paired "
            "difference, 90 % t interval; fail = an interval that excludes 0 either way (ACCEPTANCE CHANGED) or "
            "an engine that did not serve the draft"
        )
    if res.baseline_kind != "paired":
        sees = f"; the test sees an AL drop of {mdd:.1%} at 80 % power" if mdd is not None else ""
        return (
            f"baseline: stored numbers (no baseline draft ran beside the candidate); tolerance {res.tolerance:.1%}"
            + sees
        )
    h = f" (sha256 {res.baseline_draft_hash[:12]})" if res.baseline_draft_hash else ""
    rounds = any(c.rounds for c in res.paired)
    interval = (
        "90 % repeated confidence interval at the look it stopped on (cells drawn in rounds)"
        if rounds
        else "90 % t interval"
    )
    return (
        f"baseline: paired — the baseline's draft{h} ran beside the candidate on the same prompts; "
        f"per-request paired difference, {interval}; pass = lower end above −{res.tolerance:.1%}, "
        f"fail = upper end below it; the test sees a drop of {mdd:.1%} at 80 % power"
        if mdd is not None
        else "baseline: paired, but no cell had the per-request records to test"
    )


def to_rich_paired(res: GateResult):
    from rich.markup import escape
    from rich.table import Table

    t = Table(
        title=escape(f"paired gate: {res.verdict} — {res.run_id} vs the baseline's draft"),
        caption=escape(paired_line(res)),
    )
    for h in PAIRED_HEADERS:
        t.add_column(h, justify="left" if h in ("cell", "metric", "verdict") else "right")
    for r in _paired_rows(res):
        t.add_row(*[escape(x) for x in r])
    return t


def _settings_line(res: GateResult) -> str:
    if res.baseline_kind == "canary":
        return (
            "bound = the reference engine's AL (the new engine's must not move from it beyond noise); "
            "detectable drop = smallest relative AL drop the cell's requests detect (80 % power)"
        )
    return (
        f"tolerance {res.tolerance:g} (AL bound = baseline AL × {1 - res.tolerance:g}); "
        f"per-position floors: {res.floors_source}; noise-aware: {_NOISE_AWARE if res.noise_aware else 'off'}; "
        "detectable drop = smallest relative AL drop the cell's prompts detect (80 % power)"
        + (f"; min speedup {res.min_speedup:g}x" if res.min_speedup is not None else "")
        + (
            f"; crossover concurrency bound = baseline × {1 - res.max_crossover_drop:g}"
            if res.max_crossover_drop is not None
            else ""
        )
    )


def to_rich(res: GateResult):
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(f"gate: {res.run_id} vs baseline {res.baseline}"), caption=escape(_settings_line(res)))
    for h in HEADERS:
        t.add_column(h, justify="left" if h in ("suite", "draft", "metric", "verdict") else "right")
    for c in res.checks:
        row = [escape(x) for x in _row(c)]
        row[-1] = "[green]pass[/]" if c.passed else "[bold red]FAIL[/]"
        t.add_row(*row)
    return t


def to_markdown(res: GateResult) -> str:
    verdict = "✅ passed" if not res.failures else f"❌ failed ({len(res.failures)} of {len(res.checks)} checks)"
    if res.paired or res.verdict == "inconclusive":
        verdict = {"pass": "✅ pass", "fail": "❌ fail", "inconclusive": "❔ inconclusive"}[res.verdict]
    out = [
        f"### Gate {verdict}: `{res.run_id}` vs baseline `{res.baseline}`",
        "",
        paired_line(res),
        "",
        _settings_line(res),
        "",
        *(md_table(PAIRED_HEADERS, _paired_rows(res)) + [""] if res.paired else []),
        *md_table(HEADERS, [_row(c)[:-1] + ["pass" if c.passed else "**FAIL**"] for c in res.checks]),
    ]
    out += [""] + [f"- {n}" for n in notes(res)]
    out.append(
        "\nAL = 1 + accepted/drafts (pooled, incl. the bonus token); per_position_rate[i] = accepted at "
        "position i / drafts; speedup = spec ÷ baseline output tok/s (harness/metrics.py)."
    )
    return "\n".join(out) + "\n"


def to_junit(res: GateResult) -> str:
    """JUnit XML: one testcase per check (a failure carries its message); cells left out are skipped."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name="harness gate")
    paired = [(cell, e) for cell in res.paired for e in cell.estimates]
    problems = [cell for cell in res.paired if cell.problem]
    suite = ET.SubElement(
        root,
        "testsuite",
        name=f"gate {res.run_id} vs {res.baseline}",
        tests=str(len(res.checks) + len(res.not_gated) + len(paired) + len(problems)),
        failures=str(len(res.failures) + sum(e.verdict == "fail" for _, e in paired)),
        errors="0",
        skipped=str(len(res.not_gated) + len(problems) + sum(e.verdict not in ("pass", "fail") for _, e in paired)),
    )
    for c in res.checks:
        tc = ET.SubElement(
            suite, "testcase", classname=f"gate.{c.suite}.k{c.k}.c{c.concurrency}.t{c.temperature:g}", name=c.metric
        )
        if not c.passed:
            ET.SubElement(tc, "failure", message=c.message(), type="Regression").text = c.message()
    # the paired gate (docs/gate.md): one testcase per metric of each cell; a drop beyond the
    # tolerance shown fails, an unsettled or immaterial metric is skipped with what it would take
    for cell, e in paired:
        tc = ET.SubElement(suite, "testcase", classname=f"gate.paired.{cell.where}", name=e.metric)
        if e.verdict == "fail":
            ET.SubElement(tc, "failure", message=e.line(), type="Regression").text = e.line()
        elif e.verdict != "pass":
            ET.SubElement(tc, "skipped", message=e.line())
    for cell in problems:
        tc = ET.SubElement(suite, "testcase", classname=f"gate.paired.{cell.where}", name="paired")
        ET.SubElement(tc, "skipped", message=f"inconclusive: {cell.problem}")
    for p in res.not_gated:
        tc = ET.SubElement(suite, "testcase", classname="gate.not_gated", name=p.split(":")[0])
        ET.SubElement(tc, "skipped", message=p)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
