"""The bench spread over several nodes ([cluster] nodes): shard runs and their merge.

Every node runs `harness bench RECIPE --draft DIR --run-id ID --shard I/N`. It plans the cells as one
node would, keeps those harness/bench/placement.py gives node I (every node computes the same
placement from the same recipe, with no coordination), and runs them into a run folder of its own,
results/runs/ID/shards/I-of-N/: a complete, resumable run (manifest, cells, tables) whose manifest
names the shard. `harness bench --merge ID` then writes results/runs/ID/ from the finished shards:
their cells and per-request files (hard links, copies across file systems), one manifest, the tables.

A shard never writes a path another shard writes: the manifest and the tables are rewritten whole
after every cell, and two nodes replacing the same file on a shared file system would each drop the
other's update (the last rename wins). Only the merge writes the run's own folder, after every shard
has ended, so it reads finished files and is safe to repeat.
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.bench.grid import CellSpec
from harness.bench.placement import bench_weight, place
from harness.draft.under_test import DraftUnderTest
from harness.errors import BadInput
from harness.provenance import atomic_path, atomic_write_json
from harness.recipe import Recipe
from harness.results.manifest import read_manifest, read_manifest_data
from harness.results.table import ensure_tables, finished_cells
from harness.schema import CELLS_DIR, MANIFEST_FILE, REQUESTS_DIR
from harness.schema_manifest import Manifest
from harness.suites import Suite

SHARDS_DIR = "shards"
SHARD_NAME = re.compile(r"(\d+)-of-(\d+)")
COMPLETE = "complete"


@dataclass(frozen=True)
class Shard:
    """Node `index` of `of` (counted from 0)."""

    index: int
    of: int

    @property
    def name(self) -> str:
        return f"{self.index}-of-{self.of}"

    def to_dict(self) -> dict[str, int]:
        return {"index": self.index, "of": self.of}


def parse_shard(text: str) -> Shard:
    """`I/N` from the command line: node I of N, 0 <= I < N."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if m is None or not int(m[1]) < int(m[2]):
        raise BadInput(f"--shard {text!r}: expected I/N, node I of N counted from 0 (0 <= I < N), e.g. --shard 0/2")
    return Shard(int(m[1]), int(m[2]))


def shard_run_id(run_id: str | None, shard: Shard) -> str:
    """The run id (a path under results/runs/) of a shard's own folder: ID/shards/I-of-N."""
    if not run_id:  # a generated id has the node's clock in it: every node must name the same run
        raise BadInput(f"--shard {shard.index}/{shard.of} needs --run-id: every node writes under the same run id")
    return f"{run_id}/{SHARDS_DIR}/{shard.name}"


def run_id_of(run_dir: Path, shard: Shard | None) -> str:
    """The run id a run's rows carry: a shard's rows name the run it is part of, so merged cells are its files."""
    return run_dir.parent.parent.name if shard is not None else run_dir.name


def refuse_mixed_layout(run_root: Path, shard: Shard | None) -> None:
    """A run id holds either one node's run or shards and their merge, never both."""
    manifest = read_manifest_data(run_root, missing_ok=True)
    if shard is None and (run_root / SHARDS_DIR).is_dir():
        raise BadInput(
            f"{run_root} is a run spread over nodes ({SHARDS_DIR}/): run a node's share with --shard I/N, "
            f"or merge the shards with `harness bench --merge {run_root.name}`"
        )
    if shard is not None and manifest and "shards" not in manifest:
        raise BadInput(f"{run_root} holds a run of one node; choose another run id for a run spread over nodes")


def refuse_what_shards_cannot_run(recipe: Recipe) -> None:
    """Before any engine starts: what a share of the cells cannot measure as the whole run would."""
    b = recipe.bench
    if b.dynamic_k:  # derive_schedule reads every fixed-k cell of the run folder: a shard holds some
        raise BadInput(
            "bench.dynamic_k derives one schedule from every fixed-k cell of the run, which no shard holds; "
            "run it on one node, or set bench.dynamic_k = false"
        )
    if b.engine == "attach":  # the nodes would load the same pair of servers at once
        raise BadInput("bench.engine 'attach' measures one pair of servers: run it on one node, not in shards")


def shard_cells(
    recipe: Recipe, drafts: Sequence[DraftUnderTest], suites: Sequence[Suite], cells: Sequence[CellSpec], shard: Shard
) -> list[CellSpec]:
    """The cells placement.place gives node `shard.index`, per verifier as the dry run places them
    (harness/plan/stages.py bench_count: one baseline engine per verifier, its own share of the load).
    Weights as the dry run's: requests per suite (turns counted) at the cell's concurrency, no in-flight
    cap; suites are named by their load order (#0, #1, ...) as there, so ties break the same way."""
    refuse_what_shards_cannot_run(recipe)
    alias = {s.name: f"#{i}" for i, s in enumerate(suites)}
    requests = {alias[s.name]: sum(r.num_turns for r in s.records) for s in suites}
    weight = bench_weight(recipe.bench, requests)
    verifier = {d.label: d.verifier.path for d in drafts}
    kept: set[CellSpec] = set()
    for path in dict.fromkeys(verifier.values()):
        mine = [c for c in cells if verifier.get(c.draft) == path]
        named = {CellSpec(c.draft, alias[c.suite], c.k, c.concurrency, c.temperature, c.request_rate): c for c in mine}
        placed = place(list(named), shard.of, weight)
        kept |= {named[c] for c, node in placed.items() if node == shard.index}
    return [c for c in cells if c in kept]


def shard_fields(run_dir: Path, shard: Shard | None) -> dict[str, Any]:
    """What a shard's manifest adds: the run it belongs to and which share it is."""
    return {} if shard is None else {"run_id": run_id_of(run_dir, shard), "shard": shard.to_dict()}


# ----------------------------------------------------------------------------- the merge


@dataclass(frozen=True)
class ShardRun:
    shard: Shard
    folder: Path
    manifest: Manifest


@dataclass(frozen=True)
class MergeResult:
    run_dir: Path
    shards: int
    cells: int
    added: tuple[str, ...]  # cell ids new in (or changed for) the merged folder
    removed: tuple[str, ...]  # cell ids no shard holds any more
    manifest_changed: bool
    tables_rebuilt: str | None  # why the tables were rebuilt; None: they were current

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed or self.manifest_changed or self.tables_rebuilt)


def finished_shards(run_root: Path) -> list[ShardRun]:
    """Every shard of the run, each finished; one line naming what is missing or unfinished otherwise."""
    folders = sorted((run_root / SHARDS_DIR).glob("*-of-*")) if (run_root / SHARDS_DIR).is_dir() else []
    named = {p: m for p in folders if p.is_dir() and (m := SHARD_NAME.fullmatch(p.name))}
    if not named:
        raise BadInput(f"{run_root}: no shard folders ({SHARDS_DIR}/I-of-N); run `harness bench ... --shard I/N` first")
    counts = sorted({int(m[2]) for m in named.values()})
    if len(counts) > 1:
        raise BadInput(f"{run_root}: shards split the run {' and '.join(map(str, counts))} ways; keep one layout")
    of = counts[0]
    runs = {int(m[1]): ShardRun(Shard(int(m[1]), of), p, _shard_manifest(p)) for p, m in named.items()}
    problems = [f"{Shard(i, of).name} missing" for i in range(of) if i not in runs]
    problems += [f"{runs.pop(i).shard.name} is no shard of {of}" for i in sorted(runs) if i >= of]
    problems += [
        f"{r.shard.name} {r.manifest.status}" for _, r in sorted(runs.items()) if r.manifest.status != COMPLETE
    ]
    if problems:
        raise BadInput(
            f"cannot merge {run_root.name}: shard {', '.join(problems)}; run or resume those shards, then merge again"
        )
    return [runs[i] for i in range(of)]


def _shard_manifest(folder: Path) -> Manifest:
    if not (folder / MANIFEST_FILE).is_file():
        return Manifest.from_dict({"status": "not started"})
    return read_manifest(folder)  # a shard whose process died reads as interrupted


def refuse_different_shards(runs: Sequence[ShardRun]) -> None:
    """Shards of one run measure one recipe, one draft and one verifier: anything else is not one run."""
    checks = {
        "bench recipes (fingerprint)": lambda m: m.data.get("recipe_fingerprint"),
        "drafts (content hash)": lambda m: sorted((k, a.content_hash or "") for k, a in m.drafts.items()),
        "verifiers (content hash)": lambda m: sorted(a.content_hash or "" for a in m.verifiers),
    }
    for what, key in checks.items():
        seen: dict[str, list[str]] = {}
        for r in runs:
            seen.setdefault(repr(key(r.manifest)), []).append(r.shard.name)
        if len(seen) > 1:
            groups = "; ".join(", ".join(names) for names in seen.values())
            raise BadInput(f"cannot merge: the shards ran different {what}: {groups}; rerun them with the same one")


def merge_shards(run_root: Path) -> MergeResult:
    """results/runs/ID/ from its finished shards: every shard's cells and per-request files, one
    manifest, the tables. Idempotent: what is already there and current is left as it is."""
    if (root := read_manifest_data(run_root, missing_ok=True)) and "shards" not in root:
        raise BadInput(f"{run_root} holds a run of one node, not a merge of shards: nothing to merge into it")
    runs = finished_shards(run_root)
    refuse_different_shards(runs)
    owners: dict[str, str] = {}
    for r in runs:
        for cid in finished_cells(r.folder):
            if cid in owners:  # placement gives each cell one node: two copies are two different runs
                raise BadInput(f"cannot merge: cell {cid} was measured by shards {owners[cid]} and {r.shard.name}")
            owners[cid] = r.shard.name
    added, removed = _sync_cells(run_root, runs)
    manifest = merged_manifest(run_root.name, runs)
    changed = read_manifest_data(run_root, missing_ok=True) != manifest
    if changed:
        atomic_write_json(run_root / MANIFEST_FILE, manifest)
    rebuilt = ensure_tables(run_root)
    return MergeResult(run_root, len(runs), len(owners), added, removed, changed, rebuilt)


def _sync_cells(run_root: Path, runs: Sequence[ShardRun]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The merged cells/ made the union of the shards' (cell file last: it marks the cell finished)."""
    cells, requests = run_root / CELLS_DIR, run_root / CELLS_DIR / REQUESTS_DIR
    wanted: set[str] = set()
    added = []
    for r in runs:
        for cid in sorted(finished_cells(r.folder)):
            wanted.add(cid)
            src = r.folder / CELLS_DIR / f"{cid}.json"
            side = _place(src.parent / REQUESTS_DIR / src.name, requests / src.name)
            if _place(src, cells / src.name) or side:
                added.append(cid)
    removed = sorted(finished_cells(run_root) - wanted)
    for cid in removed:  # the merged folder is derived: a cell no shard holds is not the run's
        (requests / f"{cid}.json").unlink(missing_ok=True)
        (cells / f"{cid}.json").unlink()
    return tuple(added), tuple(removed)


def _place(src: Path, dst: Path) -> bool:
    """`dst` made `src`'s content (a hard link, a copy across file systems), atomically; False when it
    already was. A missing `src` (a cell written without its side file) places nothing."""
    # a copy keeps the source's mtime (copy2), so filecmp's size-and-mtime check answers without reading
    if not src.is_file() or (dst.is_file() and (os.path.samefile(src, dst) or filecmp.cmp(src, dst))):
        return False
    with atomic_path(dst, src.stat().st_size) as tmp:
        tmp.unlink()
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copy2(src, tmp)
    return True


def merged_manifest(run_id: str, runs: Sequence[ShardRun]) -> dict[str, Any]:
    """One manifest for the run: the shards' shared record (recipe, drafts, suites: checked equal) from
    the first, what each shard did on its node keyed by shard (engines `shard0/baseline`, machine noise,
    engine phases), the planned cells the union, and the layout under `shards`. No timestamp of its
    own, so merging again with nothing new rewrites nothing."""
    per_node = ("owner", "shard", "engines", "machine_noise", "engine_phases", "resumed_at")
    out = {k: v for k, v in runs[0].manifest.data.items() if k not in per_node}
    engines: dict[str, Any] = {}
    noise: dict[str, Any] = {}
    phases: list[dict[str, Any]] = []
    for r in runs:
        data, tag = r.manifest.data, f"shard{r.shard.index}"
        engines |= {f"{tag}/{name}": e for name, e in (data.get("engines") or {}).items()}
        noise |= {f"{tag}/{name}": n for name, n in (data.get("machine_noise") or {}).items()}
        phases += [{**p, "engine": f"{tag}/{p.get('engine')}"} for p in data.get("engine_phases") or []]
    starts = [r.manifest.started_at for r in runs if r.manifest.started_at]
    ends = [r.manifest.ended_at for r in runs if r.manifest.ended_at]
    out |= {
        "run_id": run_id,
        "status": COMPLETE,
        "started_at": min(starts, default=None),
        "ended_at": max(ends, default=None),
        "planned_cells": [c for r in runs for c in r.manifest.planned_cells],
        "engines": engines,
        "shards": {"of": len(runs), "layout": {r.shard.name: _layout_entry(r) for r in runs}},
    }
    out |= {"machine_noise": noise} if noise else {}
    out |= {"engine_phases": phases} if phases else {}
    return out


def _layout_entry(r: ShardRun) -> dict[str, Any]:
    m = r.manifest
    return {
        "index": r.shard.index,
        "folder": f"{SHARDS_DIR}/{r.shard.name}",
        "cells": m.planned_cells,
        "host": m.owner.hostname if m.owner else None,
        "started_at": m.started_at,
        "ended_at": m.ended_at,
        "git_sha": m.git_sha,
        "hardware": m.provenance.get("hardware"),
    }
