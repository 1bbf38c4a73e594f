"""The bench spread over nodes without engines: `--shard I/N` parsing, the placement every node
computes on its own (the same in every process, the dry run's share), and the merge of synthetic
shard folders (refusals, idempotence, a resumed shard refreshing the merge). The real engines run
in tests/e2e/test_shards_engine.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from harness.bench.placement import baseline_key
from harness.bench.planning import plan_cells, recipe_suites
from harness.bench.shards import Shard, merge_shards, parse_shard, shard_cells
from harness.errors import BadInput
from harness.paths import REPO_ROOT
from harness.provenance import atomic_write_json
from harness.recipe import load_recipe
from harness.results.table import write_cell
from tests.conftest import PLAIN_RECIPE
from tests.fault_helpers import one_line, run_cli
from tests.results_fixtures import make_run, rows_for, run_frame

# several baseline groups of unequal weight: 3 suites x 2 concurrencies x 2 temperatures, two drafts
# on the verifier (the draft and ngram) and the oracle on its own
GRID = [
    "verifier.standin='kimi-k2.5'",
    "bench.suites=['chat','code','math']",
    "bench.concurrency=[1,4]",
    "bench.temperature=[0.0,1.0]",
    "bench.k=[2,3]",
    "bench.reference_drafts=['ngram','oracle']",
]


@pytest.mark.parametrize(("text", "shard"), [("0/2", Shard(0, 2)), (" 1 / 3 ", Shard(1, 3)), ("0/1", Shard(0, 1))])
def test_shard_parses_i_of_n(text, shard):
    assert parse_shard(text) == shard
    assert shard.name == f"{shard.index}-of-{shard.of}"


@pytest.mark.parametrize("text", ["2/2", "3/2", "-1/2", "1", "a/b", "1/0", "0/0", "1/2/3", ""])
def test_a_bad_shard_is_one_line(text):
    with pytest.raises(BadInput, match=r"expected I/N, node I of N counted from 0 \(0 <= I < N\)"):
        parse_shard(text)


def test_cli_refuses_a_bad_shard_or_a_missing_run_id_in_one_line(capsys, monkeypatch):
    code, err = run_cli(capsys, monkeypatch, "bench", "--shard", "2/2", "--run-id", "x")
    assert code == 2 and "--shard '2/2': expected I/N" in one_line(err)
    code, err = run_cli(capsys, monkeypatch, "bench", str(PLAIN_RECIPE), "--shard", "0/2")
    assert code == 2 and "needs --run-id" in one_line(err)
    code, err = run_cli(capsys, monkeypatch, "bench", "--merge", "x", "--shard", "0/2")
    assert code == 2 and "--merge ID merges the shards as they ran" in one_line(err)


# ----------------------------------------------------------------------------- placement


def _drafts():
    main, oracle = SimpleNamespace(path="/v/main"), SimpleNamespace(path="/v/oracle")
    return [SimpleNamespace(label=x, verifier=main) for x in ("draft", "ngram")] + [
        SimpleNamespace(label="oracle", verifier=oracle)
    ]


def _shares(nodes: int) -> dict[int, list[str]]:
    recipe = load_recipe(PLAIN_RECIPE, GRID)
    suites = recipe_suites(recipe)
    drafts = _drafts()
    cells = plan_cells(recipe, drafts, suites)
    return {i: [c.id for c in shard_cells(recipe, drafts, suites, cells, Shard(i, nodes))] for i in range(nodes)}


_IN_ANOTHER_PROCESS = """
import json, sys
from tests.bench.test_shards import _shares
print(json.dumps(_shares(int(sys.argv[1]))))
"""


def test_every_process_computes_the_same_placement():
    """Each node places the cells on its own: another interpreter (another hash seed, so another set
    and dict iteration order) must give every node the same share."""
    here = _shares(3)
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", _IN_ANOTHER_PROCESS, "3"],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        there = {int(k): v for k, v in json.loads(out.stdout.strip().splitlines()[-1]).items()}
        assert there == here


def test_shares_are_disjoint_whole_baseline_groups_per_verifier():
    recipe = load_recipe(PLAIN_RECIPE, GRID)
    suites = recipe_suites(recipe)
    drafts = _drafts()
    cells = plan_cells(recipe, drafts, suites)
    shares = {i: shard_cells(recipe, drafts, suites, cells, Shard(i, 2)) for i in range(2)}
    assert sorted(c.id for s in shares.values() for c in s) == sorted(c.id for c in cells)  # each cell once
    verifier = {d.label: d.verifier.path for d in drafts}
    node_of = {(verifier[c.draft], baseline_key(c)): i for i, s in shares.items() for c in s}
    assert all(node_of[(verifier[c.draft], baseline_key(c))] == i for i, s in shares.items() for c in s)
    assert all(shares.values())  # both nodes have work
    assert shard_cells(recipe, drafts, suites, cells, Shard(0, 1)) == cells


def test_the_shard_runs_the_share_the_dry_run_priced():
    """The dry run prices node I's share with harness/plan/stages.py bench_count(node=...); the shard
    must run those cells: as many, with as many engine starts."""
    from harness.plan.dry_run import _suite_requests
    from harness.plan.stages import bench_count

    recipe = load_recipe(PLAIN_RECIPE, GRID)
    suites = recipe_suites(recipe)
    drafts = _drafts()
    cells = plan_cells(recipe, drafts, suites)
    for i in range(3):
        mine = shard_cells(recipe, drafts, suites, cells, Shard(i, 3))
        count = bench_count(recipe, _suite_requests(recipe), node=(i, 3))
        verifiers = {d.verifier.path for d in drafts for c in mine if c.draft == d.label}
        starts = len(verifiers) + len({(c.draft, c.k) for c in mine})
        assert (len(mine), starts) == (count.cells, count.engines), i


def test_what_a_shard_cannot_run_is_refused():
    recipe = load_recipe(PLAIN_RECIPE, [*GRID, "bench.dynamic_k=true"])
    suites = recipe_suites(recipe)
    with pytest.raises(BadInput, match="bench.dynamic_k derives one schedule"):
        shard_cells(recipe, _drafts(), suites, plan_cells(recipe, _drafts(), suites), Shard(0, 2))


# ----------------------------------------------------------------------------- the merge


def _shard(root: Path, i: int, of: int, suites: list[str], status="complete", fingerprint="fp", draft_hash="dh"):
    folder = make_run(root / "shards", f"{i}-of-{of}", [{"suite": s} for s in suites], status=status)
    for s in suites:  # rows name the run, not the shard; a per-request side file beside each cell
        rows = rows_for(root.name, suite=s)
        write_cell(folder, rows[0]["cell_id"], rows, {"baseline": [{"request_id": "a#0"}], "speculative": []})
    data = json.loads((folder / "manifest.json").read_text())
    data |= {
        "run_id": root.name,
        "shard": {"index": i, "of": of},
        "recipe_fingerprint": fingerprint,
        "engines": {"baseline": {"startup_s": 5.0 + i}, "eagle-k3": {"startup_s": 6.0}},
        "machine_noise": {"v": 0.01 * (i + 1)},
        "ended_at": f"2025-01-01T0{i + 1}:00:00+00:00",
        "owner": {"pid": None, "pid_start_ticks": None, "hostname": f"node{i}"},
    }
    data["drafts"]["eagle"]["content_hash"] = {"sha256": draft_hash}
    atomic_write_json(folder / "manifest.json", data)
    return folder


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "shards" not in p.relative_to(folder).parts
    }


def test_merge_writes_one_run_and_is_idempotent(tmp_path):
    root = tmp_path / "run-a"
    _shard(root, 0, 2, ["chat", "code"])
    _shard(root, 1, 2, ["math"])
    res = merge_shards(root)
    assert (res.shards, res.cells, len(res.added), res.removed) == (2, 3, 3, ())
    manifest, df, missing = run_frame(root)
    assert manifest.status == "complete" and not missing and len(manifest.planned_cells) == 3
    assert sorted(df["suite"].unique()) == ["chat", "code", "math"] and set(df["run_id"]) == {"run-a"}
    data = manifest.data
    assert set(data["engines"]) == {"shard0/baseline", "shard0/eagle-k3", "shard1/baseline", "shard1/eagle-k3"}
    assert data["machine_noise"] == {"shard0/v": 0.01, "shard1/v": 0.02}
    layout = data["shards"]["layout"]
    assert data["shards"]["of"] == 2 and [e["host"] for e in layout.values()] == ["node0", "node1"]
    assert data["ended_at"] == "2025-01-01T02:00:00+00:00" and "owner" not in data and "shard" not in data
    for cid in manifest.planned_cells:  # the shards' files, linked
        shard = next(p for p in (root / "shards").iterdir() if (p / "cells" / f"{cid}.json").is_file())
        for rel in (f"cells/{cid}.json", f"cells/requests/{cid}.json"):
            assert os.path.samefile(root / rel, shard / rel)
    before = _files(root)
    again = merge_shards(root)
    assert not again.changed and _files(root) == before  # nothing rewritten, not even the manifest


def test_a_resumed_shard_refreshes_the_merge(tmp_path):
    root = tmp_path / "run-b"
    _shard(root, 0, 2, ["chat"])
    one = _shard(root, 1, 2, ["math"])
    merge_shards(root)
    rows = rows_for(root.name, suite="code")  # shard 1 resumed and measured one more cell
    write_cell(one, rows[0]["cell_id"], rows)
    data = json.loads((one / "manifest.json").read_text())
    atomic_write_json(one / "manifest.json", {**data, "planned_cells": [*data["planned_cells"], rows[0]["cell_id"]]})
    res = merge_shards(root)
    assert res.added == (rows[0]["cell_id"],) and res.manifest_changed and res.tables_rebuilt
    _, df, missing = run_frame(root)
    assert not missing and sorted(df["suite"].unique()) == ["chat", "code", "math"]
    assert len(pd.read_parquet(root / "results.parquet")) == 6


@pytest.mark.parametrize(
    ("shards", "message"),
    [
        ([(0, 2, "complete")], "shard 1-of-2 missing"),
        ([(0, 2, "complete"), (1, 2, "interrupted")], "shard 1-of-2 interrupted"),
        ([(0, 2, "failed"), (1, 2, "running")], "shard 0-of-2 failed, 1-of-2 running"),
        ([(0, 2, "complete"), (1, 2, "complete"), (0, 3, "complete")], "split the run 2 and 3 ways"),
    ],
)
def test_unfinished_or_missing_shards_are_refused_in_one_line(tmp_path, shards, message):
    root = tmp_path / "run-c"
    for i, of, status in shards:
        _shard(root, i, of, [f"s{i}{of}"], status=status)
    with pytest.raises(BadInput, match=message) as e:
        merge_shards(root)
    assert "\n" not in str(e.value) and not (root / "manifest.json").exists()


@pytest.mark.parametrize(
    ("other", "message"),
    [
        ({"fingerprint": "fp2"}, "different bench recipes \\(fingerprint\\): 0-of-2; 1-of-2"),
        ({"draft_hash": "other"}, "different drafts \\(content hash\\)"),
    ],
)
def test_shards_of_different_recipes_or_drafts_are_refused(tmp_path, other, message):
    root = tmp_path / "run-d"
    _shard(root, 0, 2, ["chat"])
    _shard(root, 1, 2, ["math"], **other)
    with pytest.raises(BadInput, match=message) as e:
        merge_shards(root)
    assert "\n" not in str(e.value) and not (root / "manifest.json").exists()


def test_a_one_node_run_is_never_merged_into_or_sharded(tmp_path):
    from harness.bench.shards import refuse_mixed_layout

    root = make_run(tmp_path, "plain", [{"suite": "chat"}])
    with pytest.raises(BadInput, match="holds a run of one node"):
        merge_shards(root)
    with pytest.raises(BadInput, match="holds a run of one node"):
        refuse_mixed_layout(root, Shard(0, 2))
    sharded = tmp_path / "sharded"
    _shard(sharded, 0, 1, ["chat"])
    with pytest.raises(BadInput, match="run a node's share with --shard I/N"):
        refuse_mixed_layout(sharded, None)
    merge_shards(sharded)
    refuse_mixed_layout(sharded, Shard(0, 1))  # a merged run's shards may resume


def test_merge_through_the_cli(tmp_path, capsys, monkeypatch):
    root = tmp_path / "run-e"
    _shard(root, 0, 2, ["chat"])
    _shard(root, 1, 2, ["math"])
    code, err = run_cli(capsys, monkeypatch, "bench", "--merge", str(root))
    assert code == 0 and f"merged {root}: 2 cells from 2 shards" in err
    code, err = run_cli(capsys, monkeypatch, "bench", "--merge", str(root))
    assert code == 0 and "is up to date" in err


def test_main_job_refuses_a_run_folder_spread_over_nodes(tmp_path, capsys, monkeypatch):
    """train-and-bench on a folder of shards would bench one node's way over it: refused in one line."""
    from tests.fault_helpers import one_line, run_cli

    (tmp_path / "run" / "shards" / "0-of-2").mkdir(parents=True)
    code, err = run_cli(capsys, monkeypatch, "train-and-bench", "--run-dir", str(tmp_path / "run"))
    assert code == 2 and "spread over nodes" in one_line(err) and "bench --merge" in err
