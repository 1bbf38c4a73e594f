"""torchrun training runs the tests share: a fit-only copy of the session's training (its data
stages, none of its training), a copy with its data only (`same_data`), the `harness train` CLI,
and the session's training again as a 2-process online run whose rank 1 is killed after the first
epoch's checkpoint and which is then rerun to the end (tests/conftest.py
`torchrun_killed_and_resumed`: the scale-out tests check the kill and the resume, the end-to-end
bench serves the resulting draft beside the single-process offline one, and checks its online
disk bound)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from harness.paths import REPO_ROOT
from harness.recipe import load_recipe
from tests.conftest import CI_TRAIN, PLAIN_RECIPE


def fit_only_copy(trained, dest: Path, overrides: list[str]):
    """A run folder with the session run's data stages (responses, agreement, hidden states,
    vocabulary) and none of its training, made for a torchrun recipe: only the fit stage runs."""
    from harness.provenance import atomic_write_json
    from harness.train.run_dir import TRAIN_SECTIONS

    recipe = load_recipe(PLAIN_RECIPE, ["verifier.standin='kimi-k2.5'", *CI_TRAIN, *overrides])
    dest.mkdir(parents=True)
    for name in ("prompts.jsonl", "agreement.json", "vocab.pt", "vocab.json"):
        shutil.copy2(trained.run_dir / name, dest / name)
    shutil.copytree(trained.run_dir / "responses", dest / "responses")
    (dest / "hidden").symlink_to(trained.run_dir / "hidden")  # read-only here: shared, not copied
    atomic_write_json(
        dest / "recipe.json",
        {
            "fingerprint": recipe.fingerprint(*TRAIN_SECTIONS),
            "sections": list(TRAIN_SECTIONS),
            "recipe": recipe.model_dump(mode="json"),
        },
    )
    return recipe


def same_data(run_dir: Path, out: Path, sets: list[str]):
    """A run folder `out` for the CI-size Kimi training under `sets` (the default recipe, as
    `harness train` loads it), holding `run_dir`'s prompts and responses (copied, so the data is
    identical); returns the recipe. The same seed and sizes follow from CI_TRAIN."""
    from harness.train.run_dir import TRAIN_SECTIONS, prepare_run_dir

    recipe = load_recipe(PLAIN_RECIPE, ["verifier.standin='kimi-k2.5'", *CI_TRAIN, *sets])
    prepare_run_dir(out, recipe, TRAIN_SECTIONS)
    shutil.copy(run_dir / "prompts.jsonl", out / "prompts.jsonl")
    shutil.copytree(run_dir / "responses", out / "responses")
    return recipe


def train_args(out: Path, overrides: list[str], *flags: str) -> list[str]:
    """`harness train` on the test bed's recipe at CI size, as a command line."""
    args = [sys.executable, "-m", "harness", "train", str(PLAIN_RECIPE), "--out", str(out), *flags]
    for s in ["verifier.standin='kimi-k2.5'", *CI_TRAIN, *overrides]:
        args += ["--set", s]
    return args


def train_cli(out: Path, overrides: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        train_args(out, overrides),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )


def rank_process(root_pid: int, rank: int):
    for p in psutil.Process(root_pid).children(recursive=True):
        try:
            env = p.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if env.get("RANK") == str(rank) and "harness.train.fit" in " ".join(p.cmdline()):
            return p
    return None


def _is_extraction_server(p) -> bool:
    try:
        return "vllm.entrypoints.openai.api_server" in " ".join(p.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _left_running(procs, within_s: float) -> list[int]:
    """The pids of `procs` still alive `within_s` seconds on (psutil checks pid and start time; an
    exited, not yet reaped process does not count)."""

    def alive():
        out = []
        for p in procs:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p.pid)
            except psutil.NoSuchProcess:
                pass
        return out

    deadline = time.monotonic() + within_s
    while (left := alive()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def wait_for(predicate, proc: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.5)


# CI_TRAIN packs 1024 tokens per process and step; two processes of 512 make the same optimizer
# step (same data, same epochs, same step count), so the two drafts should serve alike.
TWO_PROCS = ["train.launcher='torchrun'", "train.nproc_per_node=2", "train.total_seq_len=512"]
VLLM_STATES = ["train.hidden_states_source='vllm'"]
# Each sample's states from a live vLLM extraction server as the Trainer reads it (harness/train/online.py)
VLLM_ONLINE = [*VLLM_STATES, "train.hidden_states_mode='online'"]
# The production recipe's way (train/kimi-k2.5.toml): torchrun, online. One run shows both the
# scale-out kill and the online resume, and serves one draft for both 5 % comparisons.
KILLED_RUN = [*TWO_PROCS, *VLLM_ONLINE]


def kill_rank_and_rerun(out: Path, trained) -> dict:
    """The session's training again (same prompts and responses, CI_TRAIN's epochs) as KILLED_RUN:
    2-process torchrun, online; rank 1 is SIGKILLed after the first epoch's checkpoint (torchrun
    stops rank 0, the harness its extraction server); the rerun resumes from that checkpoint."""
    same_data(trained.run_dir, out, KILLED_RUN)
    t0 = time.perf_counter()
    proc = train_cli(out, KILLED_RUN)
    wait_for(lambda: (out / "checkpoints" / "0" / "training_state.json").is_file(), proc, timeout_s=900)
    first_epoch = (out / "checkpoints" / "0" / "model.safetensors").stat().st_mtime
    victim = rank_process(proc.pid, 1)
    assert victim is not None
    below = psutil.Process(proc.pid).children(recursive=True)  # the ranks and the extraction server
    server_seen = any(_is_extraction_server(p) for p in below)  # read while they run
    victim.send_signal(signal.SIGKILL)
    _, killed_err = proc.communicate(timeout=300)
    killed = {
        "returncode": proc.returncode,
        "stderr": killed_err,
        "wall_s": time.perf_counter() - t0,
        "extraction_server_seen": server_seen,
        "left_running": _left_running(below, within_s=10),
    }
    t1 = time.perf_counter()
    rerun = train_cli(out, KILLED_RUN)
    _, rerun_err = rerun.communicate(timeout=900)
    return {
        "out": out,
        "killed": killed,
        "rerun_rc": rerun.returncode,
        "rerun_err": rerun_err,
        "rerun_wall_s": time.perf_counter() - t1,
        "first_epoch_mtime": first_epoch,
    }
