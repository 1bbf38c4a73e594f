"""torchrun training runs the tests share: a fit-only copy of the session's training (its data
stages, none of its training), the `harness train` CLI, and a 2-process run whose rank 1 is killed
after the first epoch's checkpoint and which is then rerun to the end (tests/conftest.py
`torchrun_killed_and_resumed`: the scale-out tests check the kill and the resume, the end-to-end
bench serves the resulting draft beside the single-process one)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.paths import REPO_ROOT
from harness.recipe import load_recipe
from tests.conftest import CI_TRAIN


def fit_only_copy(trained, dest: Path, overrides: list[str]):
    """A run folder with the session run's data stages (responses, agreement, hidden states,
    vocabulary) and none of its training, made for a torchrun recipe: only the fit stage runs."""
    from harness.provenance import atomic_write_json
    from harness.train.pipeline import TRAIN_SECTIONS

    recipe = load_recipe(None, ["verifier.standin='kimi-k2.5'", *CI_TRAIN, *overrides])
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


def train_cli(out: Path, overrides: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    args = [sys.executable, "-m", "harness", "train", "--out", str(out)]
    for s in ["verifier.standin='kimi-k2.5'", *CI_TRAIN, *overrides]:
        args += ["--set", s]
    return subprocess.Popen(
        args,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )


def rank_process(root_pid: int, rank: int):
    import psutil

    for p in psutil.Process(root_pid).children(recursive=True):
        try:
            env = p.environ()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if env.get("RANK") == str(rank) and "harness.train.fit" in " ".join(p.cmdline()):
            return p
    return None


def wait_for(predicate, proc: subprocess.Popen, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.5)


# CI_TRAIN packs 1024 tokens per process and step; two processes of 512 make the same optimizer
# step (same data, same epochs, same step count), so the two drafts should serve alike.
TWO_PROCS = ["train.launcher='torchrun'", "train.nproc_per_node=2", "train.total_seq_len=512"]


def kill_rank_and_rerun(out: Path, trained) -> dict:
    """2-process torchrun training (CI_TRAIN's epochs); rank 1 is killed after the first epoch's
    checkpoint; the rerun trains the others."""
    fit_only_copy(trained, out, TWO_PROCS)
    t0 = time.perf_counter()
    proc = train_cli(out, TWO_PROCS)
    wait_for(lambda: (out / "checkpoints" / "0" / "training_state.json").is_file(), proc)
    first_epoch = (out / "checkpoints" / "0" / "model.safetensors").stat().st_mtime
    victim = rank_process(proc.pid, 1)
    assert victim is not None
    victim.send_signal(signal.SIGKILL)
    _, killed_err = proc.communicate(timeout=300)
    killed = {"returncode": proc.returncode, "stderr": killed_err, "wall_s": time.perf_counter() - t0}
    t1 = time.perf_counter()
    rerun = train_cli(out, TWO_PROCS)
    _, rerun_err = rerun.communicate(timeout=900)
    return {
        "out": out,
        "killed": killed,
        "rerun_rc": rerun.returncode,
        "rerun_err": rerun_err,
        "rerun_wall_s": time.perf_counter() - t1,
        "first_epoch_mtime": first_epoch,
    }
