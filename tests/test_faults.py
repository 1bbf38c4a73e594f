"""Fault injection: what a user or a CI system does wrong, or what kills the harness, ends in the
documented exit code and one line, leaves no process behind and loses no finished cell.

Exit codes (harness/errors.py): 0 ok · 1 only the gate's verdict · 2 bad input · 3
infrastructure · 4 internal error (traceback in a log) · 128 + signal when interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from harness.cli.entry import main
from harness.engine.ownership import process_alive, start_ticks
from harness.errors import BadInput, InfraError
from harness.paths import REPO_ROOT
from harness.results.manifest import (
    effective_status,
    free_unstarted_run,
    read_manifest,
    require_resumable,
)
from harness.results.table import ensure_tables, rebuild_table, tables_stale
from harness.schema_manifest import Manifest
from harness.verifier.safetensors_index import TensorInfo, coverage_problem
from tests.conftest import PLAIN_RECIPE
from tests.engine_wrappers import WrappedEngine

PY = sys.executable


def run_cli(capsys, monkeypatch, *args: str) -> tuple[int, str]:
    """`harness ARGS` in this process, through the real entry point: (exit code, stderr)."""
    monkeypatch.setattr(sys, "argv", ["harness", *args])
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    return code, capsys.readouterr().err.strip()


def one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


# ----------------------------------------------------------------------------- a tiny checkpoint


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> None:
    """A safetensors file by hand: name -> (dtype, shape, bytes per element), zero data."""
    header, offset = {}, 0
    for name, (dtype, shape, width) in tensors.items():
        n = width
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    blob = json.dumps(header).encode()
    path.write_bytes(len(blob).to_bytes(8, "little") + blob + bytes(offset))


def _draft(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"speculators_model_type": "eagle3"}))
    _write_safetensors(folder / "model.safetensors", {"fc.weight": ("F32", [4, 8], 4), "norm.weight": ("BF16", [4], 2)})
    return folder


# ----------------------------------------------------------------------------- bad input: exit 2


@pytest.mark.parametrize(
    "name, content", [("config.json", "{not json"), ("harness.json", '{"held_out_full_acc": [0.5,')]
)
def test_draft_with_a_malformed_json_file_is_bad_input_naming_it(tmp_path, capsys, monkeypatch, name, content):
    draft = _draft(tmp_path / "draft")
    (draft / name).write_text(content)
    code, err = run_cli(capsys, monkeypatch, "bench", "--draft", str(draft), "--run-id", f"faults-{uuid.uuid4().hex}")
    assert code == 2
    assert f"{draft / name}:1: malformed JSON" in one_line(err)


def test_truncated_draft_shard_is_bad_input_naming_the_draft(tmp_path, capsys, monkeypatch):
    draft = _draft(tmp_path / "draft")
    shard = draft / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[:-5])
    code, err = run_cli(capsys, monkeypatch, "bench", "--draft", str(draft), "--run-id", f"faults-{uuid.uuid4().hex}")
    assert code == 2
    assert str(shard) in one_line(err) and "truncated" in err


def test_truncated_verifier_shard_fails_inspect_and_dry_run(tmp_path, capsys, monkeypatch):
    v = tmp_path / "verifier"
    v.mkdir()
    (v / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "num_hidden_layers": 1,
                "hidden_size": 4,
                "vocab_size": 8,
                "num_attention_heads": 1,
            }
        )
    )
    _write_safetensors(
        v / "model.safetensors",
        {
            "model.embed_tokens.weight": ("F32", [8, 4], 4),
            "model.layers.0.mlp.weight": ("F32", [4, 4], 4),
            "model.norm.weight": ("F32", [4], 4),
            "lm_head.weight": ("F32", [8, 4], 4),
        },
    )
    code, _ = run_cli(capsys, monkeypatch, "verifier", "inspect", str(v))
    assert code == 0  # the intact checkpoint passes: the check below is about the truncation
    shard = v / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[:-1])
    code, err = run_cli(capsys, monkeypatch, "verifier", "inspect", str(v))
    assert code == 2 and str(shard) in one_line(err) and "truncated" in err
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'name = "truncated"\n[verifier]\npath = "{v}"\n')
    code, err = run_cli(capsys, monkeypatch, "train-and-bench", str(recipe), "--dry-run")
    assert code == 2 and str(shard) in one_line(err)


def test_header_offsets_must_tile_the_data_exactly():
    infos = {"a": TensorInfo("F32", (2,)), "b": TensorInfo("F32", (2,))}
    assert coverage_problem([(0, 8, "a"), (8, 16, "b")], infos, 16) is None
    assert "overlaps" in coverage_problem([(0, 8, "a"), (4, 12, "b")], infos, 12)
    assert "gap" in coverage_problem([(0, 8, "a"), (12, 20, "b")], infos, 20)
    assert "truncated" in coverage_problem([(0, 8, "a"), (8, 16, "b")], infos, 15)
    assert "needs 8" in coverage_problem([(0, 8, "a"), (8, 12, "b")], infos, 12)


def test_prompt_files_that_are_not_utf8_or_not_json_are_bad_input_with_file_and_line(tmp_path, capsys, monkeypatch):
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"id":"a","prompt":"ok"}\n{"id":"u","prompt":"caf\xe9"}\n')
    code, err = run_cli(capsys, monkeypatch, "train", "--dry-run", "--set", f"train.prompts='{latin1}'")
    assert code == 2 and f"{latin1}:2: not UTF-8" in one_line(err)
    malformed = tmp_path / "malformed.jsonl"
    malformed.write_text('{"id":"a","prompt":"ok"}\n{"id": "b" "prompt": 1}\n')
    code, err = run_cli(capsys, monkeypatch, "train", "--dry-run", "--set", f"train.prompts='{malformed}'")
    assert code == 2 and f"{malformed}:2: not valid JSON" in one_line(err)
    code, err = run_cli(capsys, monkeypatch, "train-and-bench", "--dry-run", "--set", f"bench.suites=['{latin1}']")
    assert code == 2 and f"{latin1}:2: not UTF-8" in one_line(err)


@pytest.mark.parametrize("tolerance", ["-1", "1", "2"])
def test_gate_tolerance_outside_0_1_is_bad_input_not_a_verdict(capsys, monkeypatch, tolerance):
    code, err = run_cli(capsys, monkeypatch, "gate", "some-run", "--baseline", "tiny-kimi-ci", "--tolerance", tolerance)
    assert code == 2 and "--tolerance" in one_line(err)


def test_resume_of_an_unknown_run_id_is_bad_input(capsys, monkeypatch):
    rid = f"faults-{uuid.uuid4().hex}"
    code, err = run_cli(capsys, monkeypatch, "bench", "--resume", "--run-id", rid)
    assert code == 2 and rid in one_line(err)
    assert not (REPO_ROOT / "results" / "runs" / rid).exists()


def test_set_problems_are_blamed_on_set_not_the_recipe(capsys, monkeypatch):
    code, err = run_cli(capsys, monkeypatch, "recipe", "show", "--set", "train.epochs='many'")
    assert code == 2 and err.startswith("error: --set:") and "train.epochs" in err


def test_attach_error_names_the_recipe_settings():
    from harness.engine.server import AttachedEngine, free_port

    for setting in ("bench.url", "bench.baseline_url"):  # the one the failing server came from
        with pytest.raises(InfraError) as e:
            AttachedEngine(f"http://127.0.0.1:{free_port()}", setting=setting)
        assert f"check {setting} in the recipe" in e.value.message


# ----------------------------------------------------------------------------- unexpected: exit 4 / 3

_RAISING = textwrap.dedent("""
    import errno, sys
    from harness.cli.app import app
    from harness.cli.entry import main

    @app.command("boom")
    def boom():
        raise {exc}

    sys.argv = ["harness", "boom"]
    main()
""")


def test_unexpected_error_exits_4_with_one_line_pointing_to_the_traceback(tmp_path):
    p = subprocess.run(
        [PY, "-c", _RAISING.format(exc="KeyError('surprise')")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "HARNESS_CACHE": str(tmp_path)},
        timeout=120,
    )
    assert p.returncode == 4, p.stderr
    line = one_line(p.stderr)
    logs = list((tmp_path / "crash").glob("*.log"))
    assert len(logs) == 1 and str(logs[0]) in line and "KeyError" in line
    assert "Traceback" in logs[0].read_text() and "surprise" in logs[0].read_text()


def test_disk_full_is_infrastructure(tmp_path):
    exc = "OSError(errno.ENOSPC, 'No space left on device', 'cells/x.json')"
    p = subprocess.run(
        [PY, "-c", _RAISING.format(exc=exc)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, "HARNESS_CACHE": str(tmp_path)},
        timeout=120,
    )
    assert p.returncode == 3 and "disk full writing cells/x.json" in one_line(p.stderr)


# ----------------------------------------------------------------------------- signals

_SLEEPER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from harness.cli.app import app
    from harness.cli.entry import main

    @app.command("nap")
    def nap(marker: str):
        try:
            Path(marker).write_text("started")
            time.sleep(120)
        finally:
            Path(marker).write_text("cleaned up")  # what closes engines and writes the manifest

    sys.argv = ["harness", "nap", sys.argv[1]]
    main()
""")


def _default_signal_dispositions() -> None:
    """A terminal user's harness: a test suite started under nohup (SIGHUP ignored) or as a shell's
    background job (SIGINT ignored) would hand those ignores down, and the CLI keeps an ignore."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_terminating_signals_unwind_like_ctrl_c(tmp_path, sig, code):
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [PY, "-c", _SLEEPER, str(marker)],
        cwd=REPO_ROOT,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signal_dispositions,
    )
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code
    assert marker.read_text() == "cleaned up"
    assert "interrupted" in one_line(err)


_SWALLOWER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from harness import interrupts
    from harness.cli.app import app
    from harness.cli.entry import main

    @app.command("nap")
    def nap(marker: str):
        Path(marker).write_text("started")
        try:
            time.sleep(120)
        except KeyboardInterrupt:
            pass  # lost on the way, as in a __del__ or a library's broad except
        for _ in range(100):  # the next units of work, each starting at a safe point
            interrupts.check()
            time.sleep(0.1)
        Path(marker).write_text("ran to the end")

    sys.argv = ["harness", "nap", sys.argv[1]]
    main()
""")


def test_a_sigterm_whose_exception_was_lost_stops_the_run_at_the_next_safe_point(tmp_path):
    """The bench checks for a received SIGTERM before every arm (harness/interrupts.py): a run
    whose KeyboardInterrupt was swallowed still ends as interrupted (143) instead of finishing."""
    marker = tmp_path / "marker"
    proc = subprocess.Popen([PY, "-c", _SWALLOWER, str(marker)], cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert marker.read_text() == "started"
    assert "interrupted (SIGTERM)" in one_line(err)


_OWNER = textwrap.dedent("""
    import subprocess, sys, time
    from harness.engine.ownership import child_preexec, start_watchdog

    # An "engine": a server process with grandchildren, in its own process group.
    p = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300 & wait"], process_group=0, preexec_fn=child_preexec())
    start_watchdog(p.pid)
    print(p.pid, flush=True)
    time.sleep(300)
""")


def _descendants(root: int) -> dict[int, int]:
    """pid -> start ticks of every live process below `root` (from /proc)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(name))
    out, todo = {}, [root]
    while todo:
        for c in children.get(todo.pop(), []):
            ticks = start_ticks(c)
            if ticks is not None:
                out[c] = ticks
                todo.append(c)
    return out


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_engine_group_dies_with_its_owner_whatever_kills_it(sig):
    owner = subprocess.Popen([PY, "-c", _OWNER], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    owner.stdout.readline()
    time.sleep(0.5)
    procs = _descendants(owner.pid)
    assert len(procs) >= 4  # sh, two sleeps, the watchdog
    owner.send_signal(sig)
    owner.wait(10)
    time.sleep(5)
    assert [p for p, t in procs.items() if process_alive(p, t)] == []


# ----------------------------------------------------------------------------- manifest truth


def test_stale_running_reads_as_interrupted():
    m = {"status": "running", "owner": {"pid": 123, "pid_start_ticks": 9, "hostname": "h"}}

    def status(data: dict, alive: bool, host: str) -> str:
        return effective_status(Manifest.from_dict(data), lambda pid, t: alive, host)

    assert status(m, False, "h") == "interrupted"
    assert status(m, True, "h") == "running"
    assert status(m, False, "other-host") == "running"  # cannot look: as recorded
    assert status({**m, "status": "complete"}, False, "h") == "complete"
    assert status({"status": "running"}, False, "h") == "running"


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_unstarted_run_folder_can_be_reused_and_a_live_one_cannot(tmp_path):
    import socket

    run = tmp_path / "run"
    run.mkdir()
    dead = {"status": "running", "owner": {"pid": _dead_pid(), "pid_start_ticks": 1, "hostname": socket.gethostname()}}
    (run / "manifest.json").write_text(json.dumps(dead))
    assert read_manifest(run).status == "interrupted"
    assert free_unstarted_run(run, set()) and not (run / "manifest.json").exists()
    me = os.getpid()
    live = {
        "status": "running",
        "owner": {"pid": me, "pid_start_ticks": start_ticks(me), "hostname": socket.gethostname()},
    }
    (run / "manifest.json").write_text(json.dumps(live))
    with pytest.raises(BadInput, match="being run right now"):
        free_unstarted_run(run, set())
    with pytest.raises(BadInput, match="being run right now"):
        require_resumable(run)
    with pytest.raises(BadInput, match="finished cell"):
        free_unstarted_run(run, {"a-cell"})


def test_resume_rebuilds_missing_or_stale_tables(tmp_path):
    run = tmp_path / "run"
    (run / "cells").mkdir(parents=True)
    rows = [
        {"cell_id": "c1", "mode": "baseline", "flags": [], "acceptance_length": None},
        {"cell_id": "c1", "mode": "speculative", "flags": ["x"], "acceptance_length": 2.5},
    ]
    (run / "cells" / "c1.json").write_text(json.dumps(rows))
    rebuild_table(run)
    assert tables_stale(run) is None and ensure_tables(run) is None
    csv_before = (run / "results.csv").read_bytes()
    (run / "results.csv").write_text("garbage")
    assert ensure_tables(run) == "results.csv changed since it was written"
    assert (run / "results.csv").read_bytes() == csv_before
    (run / "results.parquet").unlink()
    assert ensure_tables(run) == "results.parquet missing"
    import pandas as pd

    assert list(pd.read_parquet(run / "results.parquet")["acceptance_length"].fillna(0)) == [0, 2.5]
    (run / "cells" / "c2.json").write_text(json.dumps([{**rows[1], "cell_id": "c2"}]))  # a cell the tables lack
    assert ensure_tables(run) == "built from other cells"
    assert len(pd.read_parquet(run / "results.parquet")) == 3


# ----------------------------------------------------------------------------- real server engines

# Small cells: the test signals the run after a cell, with cells still to run.
_TINY_SERVER_BENCH = [
    "bench.engine='server'",
    "bench.suites=['code']",
    "bench.num_prompts=3",
    "bench.max_tokens=24",
    "bench.k=[3]",
    "bench.concurrency=[1,2,3,4]",
    "bench.warmup_requests=0",
    "bench.repeats=1",
    "bench.reference_drafts=[]",
    "bench.method='ngram'",
    "bench.machine_sentinel=false",  # processes and files only: no speed is asserted here
]


def _bench(run_id: str, *extra: str, sets: list[str] = _TINY_SERVER_BENCH) -> subprocess.Popen:
    args = [PY, "-m", "harness", "bench", str(PLAIN_RECIPE), "--run-id", run_id, *extra]
    for s in sets:
        args += ["--set", s]
    return subprocess.Popen(args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _cells(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (run_dir / "cells").glob("*.json")}


def _kill_after_next_cell(
    proc: subprocess.Popen, run_dir: Path, sig: signal.Signals, code: int, engine_marker: str = "api_server"
) -> dict[str, bytes]:
    """Wait for one more finished cell than the run had, send `sig`, and check that the harness
    exits with `code`, that none of its processes (vLLM servers or offline engine hosts, found by
    `engine_marker` in their command line) is alive 10 s later and that the manifest reads
    `interrupted`. Returns the cells finished before the signal."""
    had = len(_cells(run_dir)) if (run_dir / "cells").is_dir() else 0
    seen: dict[int, int] = {}  # every process of the run, gathered while it runs
    deadline = time.monotonic() + 900
    while not (run_dir / "cells").is_dir() or len(_cells(run_dir)) <= had:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        seen.update(_descendants(proc.pid))
        time.sleep(0.2)
    seen.update(_descendants(proc.pid))
    assert any(
        engine_marker in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
        for p in seen
        if process_alive(p, seen[p])
    )
    done = _cells(run_dir)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err[-3000:]
    deadline = time.monotonic() + 10  # every process gone within 10 s of the harness's end
    while (alive := [p for p, t in seen.items() if process_alive(p, t)]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert alive == []
    # SIGTERM writes "interrupted"; SIGKILL writes nothing, and the stale "running" reads so.
    assert read_manifest(run_dir).status == "interrupted"
    return done


@pytest.mark.slow
def test_killed_server_bench_leaves_no_process_and_resumes_byte_identical(kimi_standin):
    """One server-engine run, killed by SIGTERM after its first cell, then resumed to the end: the
    kill leaves no process behind and every cell finished before it is byte-identical at the end.
    The finished run (cells from two server pairs) also carries the server's per-step check
    (tests/step_sums.py). A SIGKILLed harness's engines: the offline test below and
    test_engine_group_dies_with_its_owner_whatever_kills_it (a server's process group)."""
    import shutil

    from tests.results_fixtures import run_frame
    from tests.step_sums import assert_steps_sum_to_counters

    run_id = f"faults-kill-{uuid.uuid4().hex[:8]}"
    run_dir = REPO_ROOT / "results" / "runs" / run_id
    try:
        first = _kill_after_next_cell(_bench(run_id), run_dir, signal.SIGTERM, 143)
        resumed = _bench(run_id, "--resume")
        _, err = resumed.communicate(timeout=900)
        assert resumed.returncode == 0, err[-3000:]
        final = _cells(run_dir)
        assert {n: b for n, b in final.items() if n in first} == first
        assert len(final) == 4 and len(first) < 4
        assert read_manifest(run_dir).status == "complete" and tables_stale(run_dir) is None
        _, df, _ = run_frame(run_dir)
        assert_steps_sum_to_counters(run_dir, df, requests_per_cell={"code": 3}, repeats=1)
        spec = df[df["mode"] == "speculative"]
        assert ((spec["speedup_ci_low"] <= spec["speedup"]) & (spec["speedup"] <= spec["speedup_ci_high"])).all()
        assert spec["repetition_share"].between(0.0, 1.0).all()
        # the server streams a verify step's tokens in one chunk: ITL per token <= per chunk, both filled
        base = df[df["mode"] == "baseline"]
        assert base["itl_per_token_ms_median"].tolist() == pytest.approx(base["itl_ms_median"].tolist())
        assert (spec["itl_per_token_ms_median"] <= spec["itl_ms_median"] + 1e-9).all()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.slow
def test_sigkilled_offline_bench_leaves_no_engine_host_behind(kimi_standin):
    """The offline engine's hosts (spawned children that import vLLM, and vLLM's own engine-core
    processes below them) die with a harness killed by SIGKILL, which runs no cleanup of its own
    (harness/engine/ownership.py)."""
    import shutil

    run_id = f"faults-kill-offline-{uuid.uuid4().hex[:8]}"
    run_dir = REPO_ROOT / "results" / "runs" / run_id
    sets = [*_TINY_SERVER_BENCH, "bench.engine='offline'", "bench.concurrency=[1,2]"]  # later --set wins
    try:
        proc = _bench(run_id, sets=sets)
        _kill_after_next_cell(proc, run_dir, signal.SIGKILL, -signal.SIGKILL, engine_marker="multiprocessing")
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["offline", "server"])
def test_an_engine_that_does_not_start_in_time_is_exit_3_in_one_line(engine, kimi_standin):
    """engine.startup_timeout_s passed: infrastructure (exit 3, CI may retry), one line naming the
    timeout, the run folder says failed, and no engine process is left behind."""
    import shutil

    run_id = f"faults-timeout-{engine}-{uuid.uuid4().hex[:8]}"
    run_dir = REPO_ROOT / "results" / "runs" / run_id
    sets = [*_TINY_SERVER_BENCH, f"bench.engine='{engine}'", "engine.startup_timeout_s=0.5"]
    try:
        proc = _bench(run_id, sets=sets)
        seen: dict[int, int] = {}
        while proc.poll() is None:
            seen.update(_descendants(proc.pid))
            time.sleep(0.2)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 3, err[-3000:]
        errors = [line for line in err.splitlines() if line.startswith("error:")]  # after the progress line
        assert len(errors) == 1, err[-3000:]
        first = errors[0]
        assert "within 0s" in first or "after 0s" in first, err[-3000:]
        deadline = time.monotonic() + 10
        while (alive := [p for p, t in seen.items() if process_alive(p, t)]) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert alive == []
        assert read_manifest(run_dir).status == "failed"
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def test_progress_after_an_interrupt_shows_the_count_reached_not_all_done():
    from harness.ui import RichReporter

    rep = RichReporter()
    try:
        try:
            rep.stage("bench cells", total=4)
            rep.advance(1)
            raise KeyboardInterrupt
        finally:
            rep.done()
    except KeyboardInterrupt:
        pass
    task = rep.progress.tasks[-1]
    rep.close()
    assert task.completed == 1 and task.fields["info"] == "[red]interrupted[/] at 1/4"


def test_engine_start_failure_names_the_checkpoint_its_log_blames(tmp_path):
    from harness.engine.logs import failing_checkpoint

    log = tmp_path / "engine.log"
    log.write_text(
        "$ python -m vllm... --model /m/verifier --speculative-config {draft: /m/draft}\n"
        "INFO loading /m/verifier/model-00001.safetensors\n"
        "ERROR: /m/draft/model.safetensors: incomplete metadata, file not fully covered\n"
        "Traceback ...\n"
    )
    assert failing_checkpoint(log, "/m/verifier", "/m/draft") == "the draft /m/draft"
    log.write_text("$ cmd /m/verifier /m/draft\nERROR /m/verifier/config.json: bad vocab\n")
    assert failing_checkpoint(log, "/m/verifier", "/m/draft") == "the verifier /m/verifier"
    log.write_text("$ cmd /m/verifier /m/draft\nsegfault\n")
    assert failing_checkpoint(log, "/m/verifier", "/m/draft") == "verifier /m/verifier with draft /m/draft"


class _DiesOnSecondCell(WrappedEngine):
    """A real server engine whose vLLM server is killed (its whole process group, SIGKILL) just
    before its second measured batch: a server that dies mid-run, after one finished cell."""

    calls = 0

    def generate(self, requests, sampling, concurrency, timeout_s=None):
        self.calls += 1
        if self.calls == 2:
            os.killpg(self._e._proc.pid, signal.SIGKILL)
            self._e._proc.wait(30)
        return self._e.generate(requests, sampling, concurrency, timeout_s)


@pytest.mark.slow
def test_server_dying_mid_run_is_infrastructure_naming_its_log_and_keeps_finished_cells(tmp_path, kimi_standin):
    from harness.bench.engines import default_engine_factory
    from harness.bench.loop import run_bench
    from harness.draft.under_test import resolve_drafts
    from harness.draft.verifier import resolve_verifier
    from harness.errors import InfraError
    from harness.recipe import load_recipe
    from harness.results.table import finished_cells
    from harness.ui import Reporter

    # warm-up off and one repeat: the speculative engine's 1st batch is cell 1's arm, its 2nd cell 2's
    recipe = load_recipe(
        None, [*_TINY_SERVER_BENCH, "bench.num_prompts=2", "bench.max_tokens=8", "bench.concurrency=[1,2]"]
    )
    layout = resolve_verifier(recipe)
    drafts = resolve_drafts(recipe, layout, None)
    run_dir = tmp_path / "run"
    real = default_engine_factory(recipe, run_dir)

    def factory(plan, name):
        eng = real(plan, name)
        return _DiesOnSecondCell(eng) if plan.speculative else eng

    with pytest.raises(InfraError) as e:
        run_bench(recipe, drafts, run_dir, Reporter(), engine_factory=factory)
    assert e.value.exit_code == 3
    first = e.value.message.splitlines()[0]
    assert "vLLM server" in first and "exited with code" in first and "--resume" in first, first
    assert "last lines of" in first and "logs" in first
    assert len(finished_cells(run_dir)) == 1  # the finished cell is kept
    assert read_manifest(run_dir).status == "failed"  # resuming such a run: the kill tests above


def test_a_cells_log_line_keeps_its_cell_id():
    """A flag is logged as "[<cell id>] <flag>"; rich would read the bracket as a style and drop it,
    and two cells' identical flags then read as one flag printed twice."""
    import io

    from harness.ui import RichReporter

    rep = RichReporter()
    buf = io.StringIO()
    rep.progress.console.file = buf
    rep.log("[draft__chat__k3__c1__t0] LOOPING OUTPUTS (68%)")
    rep.close()
    assert "[draft__chat__k3__c1__t0] LOOPING OUTPUTS (68%)" in buf.getvalue()
