"""`harness gate` on an upgrade canary's folder (issue 54): the canary's verdict as gate checks, so a
canary fails CI the way a regression does (exit 1, the same Markdown and JUnit files).

Read from the folder's canary.json, as `harness canary` wrote it (nothing is re-measured):
- one check per engine environment that did not serve the draft (`ENGINE FAILED`);
- one check per compared cell: the new engine's AL against the reference engine's on the same
  requests (the paired 90 % interval of the relative difference). It fails on `ACCEPTANCE CHANGED`,
  an interval that excludes 0 either way: an upgrade that moves acceptance, up or down, is what the
  canary exists to stop. `SPEEDUP CHANGED` and `OUTPUTS CHANGED` are named in the check's sentence
  and do not fail it, as they do not fail the canary. A cell with no request drafted on both engines
  is listed as not gated; a canary with nothing to gate is unusable input (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.results.canary import ACCEPTANCE_CHANGED, CANARY_FILE, read_canary
from harness.results.checks import Check
from harness.results.gate.evaluate import DEFAULT_TOLERANCE, GateResult


def _engine_check(env: dict[str, Any]) -> Check:
    name = env.get("engine") or env.get("label") or "?"
    return Check(
        suite="(engine)",
        k=0,
        concurrency=0,
        temperature=0.0,
        metric="serves the draft",
        baseline=None,
        value=None,
        bound=0.0,
        passed=False,
        draft=str(env.get("label") or ""),
        detail=f"{name}: ENGINE FAILED: {env['error']}",
    )


def _cell_check(against: str, env: str, cell: dict[str, Any]) -> Check:
    suite, k, concurrency, temperature, rate = (cell.get("setting") or ["?", 0, 0, 0.0, 0.0])[:5]
    flags = list(cell.get("flags") or [])
    est = cell["estimates"][0]
    changed = ACCEPTANCE_CHANGED in flags
    others = [f for f in flags if f != ACCEPTANCE_CHANGED]
    sentence = (
        f"{against} → {env}: AL {est['baseline']:.3f} → {est['candidate']:.3f} ({est['diff']:+.1%}, "
        f"paired 90 % CI [{est['low']:+.1%}, {est['high']:+.1%}], {est['n']} requests): "
        + (ACCEPTANCE_CHANGED if changed else "no change beyond noise")
        + (f"; also {', '.join(others)}" if others else "")
    )
    return Check(
        suite,
        k,
        concurrency,
        temperature,
        "acceptance_length (canary)",
        baseline=est["baseline"],
        value=est["candidate"],
        bound=est["baseline"],  # the reference engine's AL: the new one must not move from it beyond noise
        passed=not changed,
        draft=cell.get("draft", ""),
        min_detectable_drop=est.get("mdd"),
        request_rate=rate,
        detail=sentence,
    )


def canary_gate(folder: Path) -> GateResult:
    """The canary in `folder` as a gate result: fail when an engine did not serve the draft or a cell's
    acceptance changed between two engines (module docstring)."""
    data = read_canary(folder)
    envs = data["environments"]
    checks = [_engine_check(e) for e in envs if e.get("error")]
    not_gated = [f"{comp['env']}: {m}" for comp in data["comparisons"] for m in comp.get("missing") or []]
    for comp in data["comparisons"]:
        for c in comp["cells"]:
            if c.get("estimates"):
                checks.append(_cell_check(comp["against"], comp["env"], c))
            else:  # no request drafted on both engines: listed, as the canary lists it, not gated
                not_gated.append(f"{comp['env']} {c.get('cell')}: {'; '.join(c.get('problems') or ['no estimate'])}")
    if not checks:
        raise BadInput(f"{folder / CANARY_FILE}: no cell was compared between the engines; nothing to gate")
    names = [e.get("engine") or e.get("label") for e in envs]
    return GateResult(
        run_id=folder.name,
        baseline=f"canary reference {names[0]} (engines in order: {', '.join(map(str, names))})",
        tolerance=float(data.get("tolerance", DEFAULT_TOLERANCE)),
        noise_aware=True,
        min_speedup=None,
        floors_source="none (canary: acceptance against the reference engine)",
        checks=tuple(checks),
        not_gated=tuple(not_gated),
        baseline_kind="canary",
    )
