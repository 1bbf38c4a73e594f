"""The speculators Trainer internals HarnessTrainer (harness/train/fit.py) adapts for CPU.
A change in any of them fails here with what to re-check."""

from __future__ import annotations

import pytest

from tests.synthetic import assert_source_unchanged

PINNED = {
    # setup_trainer runs before setup_model (where HarnessTrainer sets the CPU device)
    "speculators.train.trainer:Trainer.__init__": "c323c45e45491c73",
    "speculators.train.trainer:Trainer.setup_trainer": "4d9caeffa2ee477e",
    # train_epoch builds its _StepTimer and tqdm by module-global name (swapped during CPU runs)
    "speculators.train.trainer:Trainer.train_epoch": "a84f3c8000da1b71",
    "speculators.train.trainer:_StepTimer": "68fbf864caa0af85",
    # CpuCheckpointer mirrors its loads with map_location="cpu"
    "speculators.train.checkpointer:SingleGPUCheckpointer": "4cbb53b04f43c90b",
    # torchrun on CPU (harness/train/launch.py setup_distributed): the accelerator-only setup it
    # replaces with gloo, and the topology state and group builder it fills the same way
    "speculators.train.distributed:maybe_setup_distributed": "ce8ff9c12a247fe7",
    "speculators.train.distributed:_init_sp_process_groups": "15dabcf74ef4a179",
}


@pytest.mark.parametrize("path", list(PINNED))
def test_trainer_internals_unchanged(path):
    assert_source_unchanged(path, PINNED[path], "HarnessTrainer (harness/train/fit.py)")


def test_trainer_module_names_the_fit_swaps_exist():
    from speculators.train import trainer

    assert hasattr(trainer, "_StepTimer") and hasattr(trainer, "tqdm")


def test_distributed_topology_names_the_cpu_setup_sets_exist():
    from speculators.train import distributed

    for name in ("_local_rank", "_is_distributed", "_rank", "_world_size", "_init_sp_process_groups"):
        assert hasattr(distributed, name), name
