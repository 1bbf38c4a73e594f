"""`harness report` on an upgrade canary's folder (issue 54): its verdict, per-cell table and engines as a
report (Markdown and HTML through the one renderer, harness/results/report_document.py), read from
canary.json as `harness canary` wrote it; each engine's own run report is `harness report` on its run
folder."""

from __future__ import annotations

from pathlib import Path

from harness.results.canary import read_canary
from harness.results.report_document import Bullets, Document, Paragraph, Section, Table, to_html, to_markdown

DEFINITIONS = [
    "AL = 1 + accepted / drafts per request, the new engine's against the reference engine's on the same "
    "requests: relative difference with a paired 90 % t interval (harness/results/gate/paired.py)",
    "ACCEPTANCE CHANGED: an AL or per-position interval that excludes 0, either way (fails the canary)",
    "SPEEDUP CHANGED: the two engines' speedup intervals (each over its own no-speculation arm) do not overlap",
    "OUTPUTS CHANGED: a T = 0 output differs; `verifier` when the no-speculation outputs already differ, else "
    "`speculation (class, engine)` by the lossless check's class (harness/analysis/lossless.py)",
    "TPOT new/ref: mean per-request (latency − TTFT) / (tokens − 1), paired bootstrap 95 % CI",
]


def canary_document(folder: Path) -> Document:
    data = read_canary(folder)
    table = data.get("table") or {}
    envs = [
        f"{e.get('engine')} ({e.get('label')}): vLLM {e.get('vllm')}, torch {e.get('torch')}, speculators "
        f"{e.get('speculators')}; run {e.get('run_dir')}" + (f"; ENGINE FAILED: {e['error']}" if e.get("error") else "")
        for e in data["environments"]
    ]
    verdict = f"**{data.get('verdict')}**" + (
        f": first change beyond noise at {data['first_change']}" if data.get("first_change") else ""
    )
    body = [
        Section("Verdict", [Paragraph(verdict), Bullets(data.get("summary") or [])]),
        Section(
            "Per cell, each engine against the one before it", [Table(table.get("headers", []), table.get("rows", []))]
        ),
        Section("Engines, oldest first", [Bullets(envs)]),
        Section("Definitions", [Bullets(DEFINITIONS)]),
    ]
    return Document(f"Upgrade canary: {folder.name}", body)


def write_canary_report(folder: Path, out_dir: Path | None = None) -> tuple[Path, Path]:
    from harness.provenance import atomic_write_text

    out = out_dir or folder / "report"
    doc = canary_document(folder)
    atomic_write_text(out / "report.md", to_markdown(doc))
    atomic_write_text(out / "report.html", to_html(doc, out))
    return out / "report.md", out / "report.html"
