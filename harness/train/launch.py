"""torchrun: the command the dry run prints and the real run starts, the CPU process group, and
what a failed rank looks like to the user.

One command for every size: `torchrun --nproc_per_node=P --nnodes=N [--rdzv_backend=c10d
--rdzv_endpoint=$MASTER_ADDR:PORT] -m harness.train.fit RUN_DIR`. On a cluster every node runs it
(the job launcher starts one per node) against a shared run folder; on one machine, two "nodes"
are two such commands with MASTER_ADDR=127.0.0.1 (docs/cluster-run.md). The real run expands
`$MASTER_ADDR` from its environment and records the command it started (`launch.json`).

speculators' `maybe_setup_distributed` asks for an accelerator and refuses without one; on CPU
the harness creates the gloo process group and fills speculators' topology state the same way
(tests/train/test_fit.py pins the names it sets).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from harness.errors import BadInput, DiskFull, InfraError, log_says_disk_full
from harness.recipe import Recipe

RDZV_HOST = "$MASTER_ADDR"


def torchrun_command(recipe: Recipe, run_dir: Path) -> list[str]:
    """The training command, as printed by the dry run (the host left as `$MASTER_ADDR`)."""
    t = recipe.train
    cmd = ["torchrun", f"--nproc_per_node={t.nproc_per_node}", f"--nnodes={t.nnodes}"]
    if t.nnodes > 1:
        cmd += ["--rdzv_backend=c10d", f"--rdzv_endpoint={RDZV_HOST}:{t.rdzv_port}"]
    return cmd + ["-m", "harness.train.fit", str(run_dir)]


def resolved_command(cmd: list[str], environ: dict[str, str]) -> list[str]:
    """The command with `$MASTER_ADDR` filled in from `environ` (nothing else is expanded)."""
    if any(RDZV_HOST in a for a in cmd):
        host = environ.get("MASTER_ADDR")
        if not host:
            raise BadInput(
                "train.nnodes > 1 needs MASTER_ADDR: set it to node 0's address on every node "
                "(MASTER_ADDR=127.0.0.1 to try several 'nodes' on one machine)"
            )
        cmd = [a.replace(RDZV_HOST, host) for a in cmd]
    return cmd


def launch_env(environ: dict[str, str], recipe: Recipe | None = None) -> dict[str, str]:
    """torchrun from this interpreter's environment first (the venv's bin is often not on PATH).
    On CPU each rank gets an equal share of the cores as OpenMP threads (torchrun's default is 1)."""
    bindir = str(Path(sys.executable).parent)
    env = {**environ, "PATH": os.pathsep.join([bindir, environ.get("PATH", "")])}
    if recipe is not None and recipe.engine.device == "cpu" and "OMP_NUM_THREADS" not in environ:
        env["OMP_NUM_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // recipe.train.nproc_per_node))
    return env


_RANK = re.compile(r"rank\s*:\s*(\d+) \(local_rank: (\d+)\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def failed_ranks(torchrun_output: str) -> list[tuple[int, int, int]]:
    """(rank, local rank, exit code) of each failure in torchrun's closing summary, the root
    cause (first observed failure) first; the others are usually ranks torchrun stopped itself."""
    head, _, root = torchrun_output.rpartition("Root Cause (first observed failure):")
    found = [(int(r), int(lr), int(code)) for text in (root, head) for r, lr, code in _RANK.findall(text)]
    return list(dict.fromkeys(found))


def _describe_exit(code: int) -> str:
    if code < 0:
        import signal

        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def run_torchrun(cmd: list[str], run_dir: Path, env: dict[str, str]) -> None:
    """Start the training command; its output goes to the terminal and to logs/torchrun.log.
    A failure names the rank(s) that failed (exit 3); rerunning resumes from the last checkpoint."""
    log_path = run_dir / "logs" / "torchrun.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stderr.write(line)
            log.write(line)
        code = proc.wait()
    if code == 0:
        return
    text = log_path.read_text()
    if log_says_disk_full(text):  # a rank's checkpoint or state write did not fit
        raise DiskFull(run_dir / "checkpoints", detail=f"a training rank; log: {log_path}")
    failures = failed_ranks(text)
    who = f"torchrun {_describe_exit(code)}"
    if failures:
        r, lr, c = failures[0]
        who = f"rank {r} (local rank {lr}) {_describe_exit(c)}"
        if failures[1:]:
            who += f", then rank(s) {', '.join(str(f[0]) for f in failures[1:])} stopped"
    raise InfraError(
        f"torchrun training failed: {who}; rerun the same command to resume from the last "
        f"checkpoint in {run_dir / 'checkpoints'} (log: {log_path})"
    )


def setup_distributed() -> None:
    """speculators' distributed setup, or on CPU the gloo equivalent (no accelerator to bind)."""
    import torch
    from speculators.train import distributed as sd

    if "LOCAL_RANK" not in os.environ or torch.accelerator.is_available():
        sd.maybe_setup_distributed()
        return
    import torch.distributed as dist

    dist.init_process_group("gloo")
    sd._local_rank = int(os.environ["LOCAL_RANK"])  # noqa: SLF001 - speculators' topology state
    sd._is_distributed = True  # noqa: SLF001
    sd._rank = dist.get_rank()  # noqa: SLF001
    sd._world_size = dist.get_world_size()  # noqa: SLF001
    sd._init_sp_process_groups(sd._rank, sd._world_size, 1)  # noqa: SLF001
