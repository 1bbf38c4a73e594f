"""torchrun for training (harness/train/launch.py): one command for every size, allowed on CPU, and what a
failed rank reads like."""

from __future__ import annotations

import pytest

from harness.errors import BadInput
from harness.recipe import load_recipe
from harness.train.launch import failed_ranks, resolved_command, torchrun_command


def test_torchrun_is_allowed_on_cpu_and_one_command_serves_every_size(tmp_path):
    one = load_recipe(None, ["train.launcher='torchrun'", "train.nproc_per_node=2"])
    assert torchrun_command(one, tmp_path) == [
        "torchrun",
        "--nproc_per_node=2",
        "--nnodes=1",
        "-m",
        "harness.train.fit",
        str(tmp_path),
    ]
    two = load_recipe(None, ["train.launcher='torchrun'", "train.nnodes=2", "train.rdzv_port=29611"])
    printed = torchrun_command(two, tmp_path)
    assert printed[:5] == [
        "torchrun",
        "--nproc_per_node=1",
        "--nnodes=2",
        "--rdzv_backend=c10d",
        "--rdzv_endpoint=$MASTER_ADDR:29611",
    ]
    assert resolved_command(printed, {"MASTER_ADDR": "127.0.0.1"})[4] == "--rdzv_endpoint=127.0.0.1:29611"
    assert resolved_command(printed, {"MASTER_ADDR": "127.0.0.1"})[5:] == printed[5:]
    with pytest.raises(BadInput, match="MASTER_ADDR"):
        resolved_command(printed, {})
    assert resolved_command(torchrun_command(one, tmp_path), {}) == torchrun_command(one, tmp_path)


TORCHRUN_SUMMARY = """
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
harness.train.fit FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-01_01:02:03
  host      : box
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 4241)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 4241
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_01:02:03
  host      : box
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 4242)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4242
============================================================
"""


def test_failed_rank_is_read_from_torchrun_summary():
    """torchrun 2.13's summary (seen when rank 1 was SIGKILLed): the root cause comes first."""
    assert failed_ranks(TORCHRUN_SUMMARY) == [(1, 1, -9), (0, 0, -15)]
    assert failed_ranks("no summary") == []
